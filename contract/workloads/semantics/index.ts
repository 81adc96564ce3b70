/**
 * The semantics workload (docs/semantics.md): what a watcher reports of each kind of change. A
 * script of operations, generated from a seed, runs against a watched tree; its own log is the
 * ground truth, and the watcher's events, in the vocabulary of ./events.ts, are matched to it per
 * kind: recall, wrong-kind reports, duplicates, events for untouched paths, latency, deafness
 * after an atomic replace or a new directory, and the kernel's overflows.
 *
 * Pure (no node: imports): the runner, the coordinator, the reports and the browser bundle read
 * the same declaration.
 */
import { z } from 'zod';
import type { MetricDoc } from '../../metrics.js';
import type { ParamSpecs, ParamValue } from '../../params.js';
import { containerParams, containerSkipReason } from '../container.js';
import type { SliceParams, WorkloadContract } from '../slice.js';
import { WATCHER_NAME } from '../../watcher-name.js';
import { SEMANTICS_BACKENDS, USER_BACKEND } from './backends.js';

/** Every kind of change the script makes; docs/semantics.md says what each one does and what counts as reporting it. */
export const OPERATION_KINDS = [
  'create',
  'modify',
  'truncate',
  'attrib',
  'rename-within',
  'rename-across',
  'move-out',
  'move-in',
  'delete',
  'atomic-replace',
  'mkdir-then-files',
  'mkdir-p',
  'rmdir-tree',
  'symlink',
  'hardlink',
] as const;
export type OperationKind = (typeof OPERATION_KINDS)[number];

export const SEMANTICS_TARGETS = ['tmpfs', 'scratch'] as const;

/** Operations of one kind a cell may ask for: 15 kinds of 10,000 make a storm of 150,000 operations and about 400,000 entries. */
export const MAX_PER_KIND = 10_000;
/** The fastest pace a cell may ask for by number; `max` is as fast as the writer goes. */
export const MAX_PACE = 1_000_000;
/** The longest settle window: events later than a minute are not a watcher's report of the change. */
export const MAX_SETTLE_MS = 60_000;

export const semanticsParams = {
  backend: {
    kind: 'enum',
    values: SEMANTICS_BACKENDS,
    default: 'inotify',
    doc:
      'Who watches: `inotify` is fsbench\'s native recursive inotify reader (a watch per directory; for a new directory it ' +
      'adds the watch, then lists the directory and reports what it finds, as a careful recursive watcher does: its ' +
      '`synthesized` metric counts those); `fanotify` is fsbench\'s native fanotify reader (one filesystem mark with ' +
      '`FAN_REPORT_DFID_NAME_TARGET`, so no directory is ever unwatched; a rename is one event with both paths; needs ' +
      'CAP_SYS_ADMIN); `parcel` is @parcel/watcher subscribed to the root with its inotify backend; `chokidar` is chokidar 5 ' +
      'with its defaults; `fswatch` is Node\'s `fs.watch(root, {recursive: true})`. The Node libraries run in a child ' +
      'process of their own. The programs people run, each started on the tree and read by fsbench: `inotifywait` ' +
      '(`inotifywait -m -r`, inotify-tools), `fswatch-cli` (the fswatch program), `watchman` (a subscription to a ' +
      'private server), `watchdog` (Python\'s watchdog). `user`: the watcher of this host\'s own list that `watcher` names.',
  },
  watcher: {
    kind: 'text',
    default: 'none',
    allowed: "'none' or the name of a watcher in the host's list (FSBENCH_WATCHERS)",
    maxLength: 32,
    check: (v) => (v === 'none' || (typeof v === 'string' && WATCHER_NAME.test(v)) ? undefined : 'must be none or 1 to 32 of a-z, 0-9 and -, starting with a letter'),
    doc:
      'With `backend: user`, which of the host operator\'s own watchers runs: a name from the list in FSBENCH_WATCHERS on ' +
      'the host that runs the cell (the argv, the user it runs as; it prints JSON lines, docs/semantics.md). A host ' +
      'without that name refuses the cell before anything starts (WATCHER_NOT_LISTED). A job never carries a command line.',
  },
  kinds: {
    kind: 'list',
    values: OPERATION_KINDS,
    default: OPERATION_KINDS.join(','),
    doc: 'The kinds of change the script makes, each `perKind` times, in an order shuffled by `seed`. All of them by default.',
  },
  perKind: {
    kind: 'integer',
    min: 1,
    max: MAX_PER_KIND,
    default: 20,
    doc: 'Operations of each kind. Each works on paths of its own, so one operation\'s events never stand for another\'s.',
  },
  pace: {
    kind: 'integer',
    min: 1,
    max: MAX_PACE,
    keywords: ['max'],
    default: 100,
    doc: 'Operations per second, on a fixed schedule; `max` makes them one after the other, as fast as the writer goes (a storm).',
  },
  target: {
    kind: 'enum',
    values: SEMANTICS_TARGETS,
    default: 'tmpfs',
    doc:
      '`tmpfs`: a private tmpfs mounted for the run; `scratch`: a fresh directory on the scratch directory\'s own ' +
      'filesystem. Both are removed after the run.',
  },
  settle: {
    kind: 'duration',
    min: 10,
    max: MAX_SETTLE_MS,
    default: '1s',
    doc:
      'How long after an operation its events may still arrive and count: the run waits this long after the last ' +
      'operation, and before the appends that test deafness after an atomic replace. Libraries that batch ' +
      '(@parcel/watcher waits up to 500 ms) need more than raw inotify.',
  },
  seed: {
    kind: 'integer',
    min: 0,
    max: 2 ** 31 - 1,
    default: 1,
    doc: 'Seeds the order of the operations: the same seed makes the same script, so a missed operation can be tried again.',
  },
} as const satisfies ParamSpecs;

/** The stable metric-name form of a kind: `rename-within` -> `rename_within`. */
export function kindKey(kind: OperationKind): string {
  return kind.replaceAll('-', '_');
}

/** Per-kind metric names: `recall_<kind>`, `wrong_kind_<kind>`, `duplicates_<kind>`, `latency_p50_ms_<kind>`. */
export const PER_KIND_METRICS = ['recall', 'wrong_kind', 'duplicates', 'latency_p50_ms'] as const;
export type PerKindMetric = (typeof PER_KIND_METRICS)[number];
export function perKindMetric(metric: PerKindMetric, kind: OperationKind): string {
  return `${metric}_${kindKey(kind)}`;
}

const ratio = z.number().min(0).max(1);
const count = z.number().int().nonnegative();
const ms = z.number().nonnegative();

const CORE_METRICS = {
  recall: ratio,
  operations: count,
  missed: count,
  wrongKind: count,
  unknownKind: count,
  duplicates: count,
  unrelated: count,
  late: count,
  latencyP50Ms: ms.nullable(),
  latencyP99Ms: ms.nullable(),
  deafAfter: count,
  deafChecks: count,
  overflows: count.nullable(),
  synthesized: count.nullable(),
  events: count,
  opsPerSec: z.number().nonnegative(),
  readyMs: ms,
};

const PER_KIND_SCHEMA: Readonly<Record<PerKindMetric, z.ZodType<number | null>>> = {
  recall: ratio.nullable(),
  wrong_kind: count.nullable(),
  duplicates: count.nullable(),
  latency_p50_ms: ms.nullable(),
};

/** Metric names are stable: results are stored and compared by name. A kind the cell did not make is null. */
export const SemanticsMetrics = z
  .object({
    ...CORE_METRICS,
    ...Object.fromEntries(OPERATION_KINDS.flatMap((k) => PER_KIND_METRICS.map((m) => [perKindMetric(m, k), PER_KIND_SCHEMA[m]]))),
  })
  .strict();

export const SEMANTICS_HEADLINE_METRICS = ['recall', 'wrongKind', 'duplicates', 'deafAfter', 'latencyP50Ms', 'latencyP99Ms', 'overflows'] as const;

const fact = (unit: string, doc: string) => ({ unit, direction: 'neither', doc }) as const;

const CORE_DOCS: Readonly<Record<keyof typeof CORE_METRICS, MetricDoc>> = {
  recall: {
    unit: 'ratio',
    direction: 'higher',
    doc: 'Operations reported with the right kind on the right path within the settle window, over all operations (an operation that makes several entries counts when every one is reported).',
  },
  operations: fact('operations', 'Operations the script made (the appends after an atomic replace are deafness checks, not operations).'),
  missed: { unit: 'operations', direction: 'lower', doc: 'Operations not reported with the right kind on every path they made or changed; the run\'s info lists them (`missedOps`).' },
  wrongKind: {
    unit: 'events',
    direction: 'lower',
    doc: 'Events on an operation\'s paths within its window that say another kind of change: a rename reported as a deletion and a creation counts two.',
  },
  unknownKind: { unit: 'events', direction: 'neither', doc: 'Of wrongKind, the events that say only that something changed (Node\'s fs.watch `rename`).' },
  duplicates: { unit: 'events', direction: 'lower', doc: 'Events of the right kind on a path after the first that reported the operation.' },
  unrelated: { unit: 'events', direction: 'lower', doc: 'Events for paths no operation touched (a parent directory, a path the watcher made up); readiness markers excluded.' },
  late: { unit: 'events', direction: 'lower', doc: 'Events on an operation\'s path that arrived after its settle window.' },
  latencyP50Ms: { unit: 'ms', direction: 'lower', doc: 'Median from the operation\'s syscall returning to the first event reporting it, over every reported path (0 when the event was read before the writer\'s clock reading).' },
  latencyP99Ms: { unit: 'ms', direction: 'lower', doc: '99th percentile of the same latencies (nearest rank).' },
  deafAfter: {
    unit: 'changes',
    direction: 'lower',
    doc: 'Changes the watcher never reported because its watch went deaf: the append to a file after an atomic replace, and files made inside a new directory whose creation it did report.',
  },
  deafChecks: fact('changes', 'How many such changes the script made: deafAfter is out of these.'),
  overflows: {
    unit: 'events',
    direction: 'lower',
    doc: 'Overflow events the watcher passed on (IN_Q_OVERFLOW): the kernel dropped events, so a loss is the kernel\'s, not the watcher\'s. Null where the backend does not say.',
  },
  synthesized: fact('events', 'Creations the inotify reader reported from listing a new directory rather than from the kernel: entries made before its watch was in place. Null for other backends.'),
  events: fact('events', 'Events the watcher reported, readiness markers excluded.'),
  opsPerSec: fact('operations/s', 'The pace the writer achieved: operations over the time from the first to the last.'),
  readyMs: fact('ms', 'From starting the watcher until it reported a marker file in every directory of the tree: the moment the script starts.'),
};

const PER_KIND_DOCS: Readonly<Record<PerKindMetric, (kind: OperationKind) => MetricDoc>> = {
  recall: (k) => ({ unit: 'ratio', direction: 'higher', doc: `recall for \`${k}\` operations (null when the cell made none).` }),
  wrong_kind: (k) => ({ unit: 'events', direction: 'lower', doc: `wrongKind events for \`${k}\` operations.` }),
  duplicates: (k) => ({ unit: 'events', direction: 'lower', doc: `duplicates for \`${k}\` operations.` }),
  latency_p50_ms: (k) => ({ unit: 'ms', direction: 'lower', doc: `Median latency for \`${k}\` operations (null when none was reported).` }),
};

export const SEMANTICS_METRIC_DOCS: Readonly<Record<string, MetricDoc>> = {
  ...CORE_DOCS,
  ...Object.fromEntries(OPERATION_KINDS.flatMap((k) => PER_KIND_METRICS.map((m) => [perKindMetric(m, k), PER_KIND_DOCS[m](k)]))),
};

/** The kinds a cell makes, in the declared order (a list parameter holds its words comma-joined). */
export function kindsOf(value: ParamValue | undefined): OperationKind[] {
  const words = typeof value === 'string' ? value.split(',') : [];
  return OPERATION_KINDS.filter((k) => words.includes(k));
}

const numberOr = (v: ParamValue | undefined, fallback: number) => (typeof v === 'number' ? v : fallback);

/**
 * Rough cost of one run: the watcher's start (a Node child ~300 ms, markers), the script at its
 * pace (at `max`, ~20 us an operation here), the settle window once, and once more before the
 * deafness appends.
 */
export function semanticsRunMs(p: Readonly<Record<string, ParamValue>>): number {
  const ops = kindsOf(p['kinds']).length * numberOr(p['perKind'], 20);
  const pace = p['pace'];
  const settle = numberOr(p['settle'], 1000);
  const scriptMs = typeof pace === 'number' ? (ops * 1000) / pace : ops * 0.02;
  return 1500 + scriptMs + settle * 2;
}

/**
 * A sandbox container's storage is its work directory, which is the container's scratch
 * directory: `target: scratch` lands there, a private tmpfs would not measure it.
 */
function sandboxSkipReason(p: SliceParams): string | undefined {
  const storage = p['container.storage'];
  if (storage !== undefined && storage !== 'none' && p['backend'] === USER_BACKEND) {
    return "backend: user runs a program of the host's own list on the host, not in a sandbox container: leave container.storage at none";
  }
  if (storage !== undefined && storage !== 'none' && p['target'] === 'tmpfs') {
    return `container.storage: ${String(storage)} measures the container's work directory: use target: scratch`;
  }
  return undefined;
}

/** `watcher` and `backend: user` go together: one without the other would measure something the cell does not say. */
function userWatcherSkipReason(p: SliceParams): string | undefined {
  const named = p['watcher'] !== undefined && p['watcher'] !== 'none';
  if (p['backend'] === USER_BACKEND && !named) return "backend: user needs watcher: the name of a watcher in the host's list";
  if (p['backend'] !== USER_BACKEND && named) return `watcher applies only to backend: user (this cell's backend is ${String(p['backend'] ?? 'inotify')})`;
  return undefined;
}

export const semanticsContract: WorkloadContract = {
  params: { ...semanticsParams, ...containerParams },
  metrics: SemanticsMetrics,
  metricDocs: SEMANTICS_METRIC_DOCS,
  headline: SEMANTICS_HEADLINE_METRICS,
  sweeps: [],
  skipReason: (p) =>
    containerSkipReason(p) ?? sandboxSkipReason(p) ?? userWatcherSkipReason(p) ?? (kindsOf(p['kinds']).length === 0 ? 'kinds is empty: name at least one kind of operation' : undefined),
  // Latency is measured on the host's CPUs and the kernel's event queues: a run needs the host to itself.
  exclusive: true,
  estimateRunMs: semanticsRunMs,
  native: ['semantics'],
  // target: scratch is the container's scratch directory, its work directory: nothing to point.
  sandbox: { workDirParam: () => undefined },
};
