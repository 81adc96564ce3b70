/**
 * The registry of workloads: their parameters, metric schemas and the cross-parameter rules
 * that turn a cell into a `skipped` run. Runner, agent, coordinator and CLI all read it.
 */
import type { z } from 'zod';
import type { MetricDoc, MetricInfo } from '../metrics.js';
import type { ParamSpec, ParamSpecs, ParamValue } from '../params.js';
import { INOTIFY_HEADLINE_METRICS, INOTIFY_METRIC_DOCS, InotifyMetrics, inotifyParams, inotifySkipReason } from './inotify/index.js';
import { METADATA_HEADLINE_METRICS, METADATA_METRIC_DOCS, MetadataMetrics, metadataParams, metadataSkipReason } from './metadata/index.js';
import { NOOP_METRIC_DOCS, NoopMetrics, noopParams } from './noop/index.js';
import { containerParams, containerSkipReason } from './container.js';

export const WORKLOAD_NAMES = ['inotify', 'metadata', 'noop'] as const;
export type WorkloadName = (typeof WORKLOAD_NAMES)[number];

export interface WorkloadContract {
  readonly params: ParamSpecs;
  /** Validates an `ok` run's metrics; every value is a number, or null where not observable. */
  readonly metrics: z.ZodType<Record<string, number | null>>;
  /** Unit, direction and meaning of every metric the schema allows (see contract/metrics.ts). */
  readonly metricDocs: Readonly<Record<string, MetricDoc>>;
  /** Metrics a summary shows first. */
  readonly headline: readonly string[];
  /**
   * Sweeps whose knee a report finds: along `param`, the smallest value whose median `metric`
   * is within 5% of the best (seed 000: the read buffer against throughput, next to the L3 size).
   */
  readonly sweeps: readonly { readonly param: string; readonly metric: string }[];
  /** Why a combination of values cannot be measured, making its runs `skipped`. */
  readonly skipReason: (params: Readonly<Record<string, ParamValue>>) => string | undefined;
  /**
   * Whether a run measures the kernel (limits, CPUs, page cache) and so must have the host to
   * itself: agents take the host lock for it. A workload that never touches the kernel does not.
   */
  readonly exclusive: boolean;
}

export const WORKLOADS: Readonly<Record<WorkloadName, WorkloadContract>> = {
  inotify: {
    params: { ...inotifyParams, ...containerParams },
    metrics: InotifyMetrics,
    metricDocs: INOTIFY_METRIC_DOCS,
    headline: INOTIFY_HEADLINE_METRICS,
    sweeps: [{ param: 'bufferBytes', metric: 'eventsPerSec' }],
    skipReason: (p) => containerSkipReason(p) ?? inotifySkipReason(p),
    exclusive: true,
  },
  metadata: {
    params: { ...metadataParams, ...containerParams },
    metrics: MetadataMetrics,
    metricDocs: METADATA_METRIC_DOCS,
    headline: METADATA_HEADLINE_METRICS,
    sweeps: [],
    skipReason: (p) => containerSkipReason(p) ?? metadataSkipReason(p),
    exclusive: true,
  },
  noop: {
    params: noopParams,
    metrics: NoopMetrics,
    metricDocs: NOOP_METRIC_DOCS,
    headline: ['value'],
    sweeps: [],
    skipReason: () => undefined,
    exclusive: false,
  },
};

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
