/**
 * The registry of workloads: one line per workload plugs in its slice, the folder
 * `contract/workloads/<name>/` whose contract (slice.ts) answers everything the runner, agent,
 * coordinator, CLI, reports and dashboard ask about it. The workloads' names are this registry's
 * keys; no other product file names a workload (tests/slices.test.ts), and its host side is
 * plugged in the same way in runner/workloads.ts.
 */
import type { MetricDoc, MetricInfo } from '../metrics.js';
import type { ParamSpec } from '../params.js';
import { inotifyCharts } from './inotify/charts.js';
import { inotifyContract } from './inotify/index.js';
import { inotifyNotes } from './inotify/notes.js';
import { metadataCharts } from './metadata/charts.js';
import { metadataContract } from './metadata/index.js';
import { noopContract } from './noop/index.js';
import { semanticsCharts } from './semantics/charts.js';
import { semanticsContract } from './semantics/index.js';
import { semanticsNotes } from './semantics/notes.js';
import { watchesCharts } from './watches/charts.js';
import { watchesContract } from './watches/index.js';
import { watchesNoteRules } from './watches/notes.js';
import type { WorkloadContract } from './slice.js';

export type { SandboxNeeds, SliceParams, WorkloadContract } from './slice.js';

const REGISTRY = {
  inotify: { ...inotifyContract, charts: inotifyCharts, notes: inotifyNotes },
  metadata: { ...metadataContract, charts: metadataCharts },
  noop: noopContract,
  semantics: { ...semanticsContract, charts: semanticsCharts, notes: semanticsNotes },
  watches: { ...watchesContract, charts: watchesCharts, notes: watchesNoteRules },
} satisfies Record<string, WorkloadContract>;

export type WorkloadName = keyof typeof REGISTRY;

export const WORKLOADS: Readonly<Record<WorkloadName, WorkloadContract>> = REGISTRY;

/** The registry's keys, in its order, as the non-empty tuple z.enum takes. */
function namesOf<K extends string>(registry: Readonly<Record<K, WorkloadContract>>): readonly [K, ...K[]] {
  // Object.keys types its answer string[]; a registry's keys are exactly K.
  const [first, ...rest] = Object.keys(registry) as K[];
  if (first === undefined) throw new Error('the workload registry is empty');
  return [first, ...rest];
}

export const WORKLOAD_NAMES = namesOf(REGISTRY);

/** A workload's metrics with their docs: the headline ones first, in headline order, then the rest as declared. */
export function metricInfos(workload: WorkloadName): MetricInfo[] {
  const { metricDocs, headline } = WORKLOADS[workload];
  const names = [...headline, ...Object.keys(metricDocs).filter((n) => !headline.includes(n))];
  return names.flatMap((name) => {
    const doc = metricDocs[name];
    return doc ? [{ name, ...doc, headline: headline.includes(name) }] : [];
  });
}

/** The doc of one metric, or undefined for a name the workload does not have. */
export function metricDoc(workload: WorkloadName, metric: string): MetricDoc | undefined {
  return Object.hasOwn(WORKLOADS[workload].metricDocs, metric) ? WORKLOADS[workload].metricDocs[metric] : undefined;
}

/**
 * One parameter's spec, or undefined for a name the workload does not have. Own properties
 * only: `constructor` or `toString` in a matrix are unknown parameters, not Object's methods.
 */
export function paramSpec(workload: WorkloadName, name: string): ParamSpec | undefined {
  const specs = WORKLOADS[workload].params;
  return Object.hasOwn(specs, name) ? specs[name] : undefined;
}
