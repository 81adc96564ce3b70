/**
 * The watch-setup workload (docs/watches.md): build a tree of `dirs` directories, watch all of
 * it with one backend, and measure what users of large trees hit first: how long until the whole
 * tree is watched (and the first event arrives), how much kernel memory each watch costs, the
 * watcher's own memory, teardown, and `fs.inotify.max_user_watches` when the tree outgrows it.
 *
 * Everything here is pure (no node: imports): the runner, the coordinator, the reports and the
 * browser bundle read the same declaration.
 */
import { z } from 'zod';
import type { MetricDocs } from '../../metrics.js';
import type { ParamSpecs, ParamValue } from '../../params.js';
import { containerParams, containerSkipReason } from '../container.js';
import type { SliceParams, WorkloadContract } from '../slice.js';

export const WATCH_BACKENDS = ['inotify', 'fanotify', 'parcel', 'chokidar', 'fswatch'] as const;
export type WatchBackend = (typeof WATCH_BACKENDS)[number];
export const WATCH_TARGETS = ['tmpfs', 'scratch'] as const;
export const WATCH_MARKS = ['filesystem', 'mount'] as const;
export const WATCH_ACCOUNTING = ['auto', 'meminfo'] as const;

/** The most directories a cell may ask for: ten times the docs' largest tree, still minutes to build. */
export const MAX_WATCH_DIRS = 1_000_000;
/** Directories plus files: what a tree costs in inodes and what a library stats one by one. */
export const MAX_WATCH_ENTRIES = 4_000_000;
/** The deepest a tree may be: paths stay far below PATH_MAX (4096) with names of up to 8 bytes. */
export const MAX_WATCH_DEPTH = 64;

/** Levels below the root of a tree of `dirs` directories, `fanout` per directory, filled breadth first. */
export function treeDepth(dirs: number, fanout: number): number {
  let depth = 0;
  let level = 1;
  let made = 1;
  while (made < dirs) {
    level *= fanout;
    made += level;
    depth++;
  }
  return depth;
}

export const watchesParams = {
  backend: {
    kind: 'enum',
    values: WATCH_BACKENDS,
    default: 'inotify',
    doc:
      'Who watches the tree: `inotify` is the native recursive walk, one inotify watch per directory, added before the ' +
      'directory is read; `fanotify` one fanotify mark on the tree\'s filesystem or mount (see `mark`); `parcel` is ' +
      '@parcel/watcher subscribed to the root; `chokidar` is chokidar 5 with its defaults; `fswatch` is Node\'s ' +
      '`fs.watch(root, {recursive: true})`. The Node backends run in a child process of their own, so its memory is theirs.',
  },
  dirs: {
    kind: 'integer',
    min: 1,
    max: MAX_WATCH_DIRS,
    default: 1000,
    doc: 'Directories in the tree, the root included: directory i > 0 is `d<i>` inside directory (i-1)/fanout (breadth first).',
  },
  fanout: {
    kind: 'integer',
    min: 2,
    max: 100_000,
    default: 10,
    doc: 'Subdirectories per directory: the tree\'s depth is about log(dirs)/log(fanout). 2 gives deep trees, 1000 flat ones.',
  },
  filesPerDir: {
    kind: 'integer',
    min: 0,
    max: 1000,
    default: 0,
    doc:
      'Empty files `f<j>` in every directory. The raw backends never look at files; the libraries stat them (chokidar) ' +
      'or watch them (Node\'s recursive fs.watch), which is what this shows.',
  },
  target: {
    kind: 'enum',
    values: WATCH_TARGETS,
    default: 'tmpfs',
    doc:
      '`tmpfs`: a private tmpfs mounted for the run (sized to the tree); `scratch`: a fresh directory on the scratch ' +
      'directory\'s own filesystem. Both are removed after the run.',
  },
  mark: {
    kind: 'enum',
    values: WATCH_MARKS,
    default: 'filesystem',
    doc: 'fanotify only: `filesystem` (FAN_MARK_FILESYSTEM) or `mount` (FAN_MARK_MOUNT) on the tree. Both need CAP_SYS_ADMIN; without it the run is skipped.',
  },
  maxUserWatches: {
    kind: 'integer',
    min: 1,
    max: 2 ** 31 - 1,
    keywords: ['auto', 'system'],
    default: 'auto',
    doc:
      '`fs.inotify.max_user_watches` during the run: `auto` raises it when the tree needs more (never lowers it), `system` ' +
      'leaves it, a number sets exactly that (lower too, to see the ENOSPC users hit). Journaled and restored after the ' +
      'run. A run that hits it is `ok` with `limitHit` 1 and a note naming the value that would have sufficed.',
  },
  accounting: {
    kind: 'enum',
    values: WATCH_ACCOUNTING,
    default: 'auto',
    doc:
      'Where `kernelBytesPerWatch` comes from: `auto` puts the watcher in a fresh child memory cgroup (v2 `memory.stat` ' +
      '`kernel`, or v1 `memory.kmem.usage_in_bytes`) where one can be made, else `/proc/meminfo` `SUnreclaim`; ' +
      '`meminfo` always uses the host-wide figure. The method is recorded in each run\'s info.',
  },
} as const satisfies ParamSpecs;

/** Combinations that cannot be measured meaningfully become `skipped` runs with this reason. */
export function watchesSkipReason(p: Readonly<Record<string, ParamValue>>): string | undefined {
  const backend = p['backend'];
  if (backend !== 'fanotify' && p['mark'] !== undefined && p['mark'] !== 'filesystem') {
    return `mark applies only to backend: fanotify, not ${String(backend)}`;
  }
  const dirs = typeof p['dirs'] === 'number' ? p['dirs'] : 1000;
  const fanout = typeof p['fanout'] === 'number' ? p['fanout'] : 10;
  const files = typeof p['filesPerDir'] === 'number' ? p['filesPerDir'] : 0;
  const depth = treeDepth(dirs, fanout);
  if (depth > MAX_WATCH_DEPTH) return `a tree of ${dirs} directories with fanout ${fanout} is ${depth} levels deep, beyond ${MAX_WATCH_DEPTH}: raise fanout`;
  if (dirs * (files + 1) > MAX_WATCH_ENTRIES) {
    return `dirs x (filesPerDir + 1) is ${dirs * (files + 1)}, above ${MAX_WATCH_ENTRIES} entries: lower dirs or filesPerDir`;
  }
  return undefined;
}

const ms = z.number().nonnegative();
const count = z.number().int().nonnegative();
const bytes = z.number();

/** Metric names are stable: the coordinator, compare and dashboard read them by name. */
export const WatchesMetrics = z
  .object({
    setupMs: ms,
    firstEventMs: ms.nullable(),
    watchesPerSec: z.number().nonnegative().nullable(),
    watches: count,
    kernelBytes: bytes.nullable(),
    kernelBytesPerWatch: bytes.nullable(),
    sunreclaimBytesPerWatch: bytes.nullable(),
    kernelBytesHostWide: z.union([z.literal(0), z.literal(1)]),
    watcherRssBytes: count,
    rssBytesPerWatch: bytes.nullable(),
    teardownMs: ms,
    limitHit: z.union([z.literal(0), z.literal(1)]),
    maxUserWatches: count.nullable(),
    watchesNeeded: count.nullable(),
    treeDirs: count,
    treeFiles: count,
    treeDepth: count,
    treeBuildMs: ms,
  })
  .strict();
export type WatchesMetrics = z.infer<typeof WatchesMetrics>;

export const WATCHES_HEADLINE_METRICS = ['setupMs', 'firstEventMs', 'watchesPerSec', 'kernelBytesPerWatch', 'watcherRssBytes', 'teardownMs', 'limitHit'] as const;

const fact = (unit: string, doc: string) => ({ unit, direction: 'neither', doc }) as const;

export const WATCHES_METRIC_DOCS = {
  setupMs: {
    unit: 'ms',
    direction: 'lower',
    doc: 'From the start of setup until the backend says it watches the tree (the walk ends, `subscribe` resolves, `ready` fires; `fs.watch` returns before its walk ends, see firstEventMs).',
  },
  firstEventMs: {
    unit: 'ms',
    direction: 'lower',
    doc: 'From the start of setup until the event for a marker file made in the last, deepest directory arrives: the whole tree is watched. Null when a limit stopped the setup.',
  },
  watchesPerSec: { unit: 'watches/s', direction: 'higher', doc: 'watches / setupMs: how fast the backend adds watches.' },
  watches: fact('watches', 'inotify watches (or fanotify marks) the watcher holds after setup, counted from its own /proc/<pid>/fdinfo for the Node backends.'),
  kernelBytes: {
    unit: 'bytes',
    direction: 'lower',
    doc: 'Kernel memory the setup took, by the method in the run info (`kernelMemoryMethod`): a fresh memory cgroup\'s kernel charge, or /proc/meminfo SUnreclaim.',
  },
  kernelBytesPerWatch: {
    unit: 'bytes',
    direction: 'lower',
    doc: 'kernelBytes / watches. A memory cgroup counts what the kernel charges to the watcher (the marks), /proc/meminfo everything unreclaimable the host allocated meanwhile (noisy below ~10,000 watches).',
  },
  sunreclaimBytesPerWatch: {
    unit: 'bytes',
    direction: 'lower',
    doc: 'The /proc/meminfo SUnreclaim delta per watch in every run, whatever the method: includes what no cgroup is charged for (mark connectors, the watch-descriptor tree), and other processes\' allocations.',
  },
  kernelBytesHostWide: fact('0/1', '1 when kernelBytes is a host-wide counter (/proc/meminfo), so other processes\' allocations mix in; 0 for a memory cgroup of the watcher alone.'),
  watcherRssBytes: { unit: 'bytes', direction: 'lower', doc: 'The watcher process\'s resident memory after setup (VmRSS): a Node runtime\'s baseline included for the Node backends.' },
  rssBytesPerWatch: { unit: 'bytes', direction: 'lower', doc: 'Growth of the watcher\'s resident memory during setup, per watch: what the library keeps per directory.' },
  teardownMs: { unit: 'ms', direction: 'lower', doc: 'Closing the watcher: close() of the inotify or fanotify fd, `unsubscribe()`, `close()`. The kernel frees marks afterwards in a worker.' },
  limitHit: fact('0/1', '1 when the setup stopped at fs.inotify.max_user_watches (ENOSPC): the run is `ok`, and this says the tree was not watched whole.'),
  maxUserWatches: fact('watches', 'fs.inotify.max_user_watches during the run (null for fanotify, which does not use it).'),
  watchesNeeded: fact('watches', 'When limitHit: the fs.inotify.max_user_watches that would have sufficed (what this user held elsewhere plus the whole tree).'),
  treeDirs: fact('dirs', 'Directories in the tree, the root included.'),
  treeFiles: fact('files', 'Files in the tree.'),
  treeDepth: fact('levels', 'Levels below the root.'),
  treeBuildMs: fact('ms', 'Building the tree (native mkdir and create), before the measurement.'),
} as const satisfies MetricDocs<WatchesMetrics>;

/** A note about one cell of this workload, from its medians: the report gives it its place. */
export interface WatchesNote {
  readonly kind: 'watch-limit' | 'host-wide-accounting';
  readonly severity: 'warning' | 'info';
  readonly text: string;
  readonly figure: { readonly name: string; readonly value: number } | null;
}

/** The cell's notes, given its parameters and a reader of its metric medians. */
export function watchesNotes(params: Readonly<Record<string, ParamValue>>, median: (metric: string) => number | null): WatchesNote[] {
  const notes: WatchesNote[] = [];
  if (median('limitHit') === 1) {
    const limit = median('maxUserWatches');
    const needed = median('watchesNeeded');
    const watches = median('watches');
    notes.push({
      kind: 'watch-limit',
      severity: 'warning',
      text:
        `the tree of ${String(params['dirs'])} directories hit fs.inotify.max_user_watches${limit === null ? '' : ` (${limit})`}` +
        `${watches === null ? '' : ` after ${watches} watches`} with ENOSPC, the "System limit for number of file watchers reached" users see` +
        `${needed === null ? '' : `; fs.inotify.max_user_watches = ${needed} would have sufficed`}.`,
      figure: needed === null ? null : { name: 'watchesNeeded', value: needed },
    });
  }
  if (median('kernelBytesHostWide') === 1) {
    notes.push({
      kind: 'host-wide-accounting',
      severity: 'info',
      text:
        'kernel memory per watch is a delta of /proc/meminfo SUnreclaim, shared by the whole host (no memory cgroup could be made): ' +
        'other processes\' allocations mix in, so small trees read noisy.',
      figure: null,
    });
  }
  return notes;
}

/**
 * Rough cost of one run, for the coordinator's estimate: tree build, setup by backend, teardown.
 * Setup per directory as docs/watches.md measured it at 100,000 directories (inotify 8.6 us,
 * parcel 13.5, chokidar 206, fswatch 26), rounded up.
 */
const SETUP_US_PER_DIR: Readonly<Record<WatchBackend, number>> = { inotify: 10, fanotify: 0, parcel: 20, chokidar: 250, fswatch: 40 };
export function watchesRunMs(params: Readonly<Record<string, ParamValue>>): number {
  const dirs = typeof params['dirs'] === 'number' ? params['dirs'] : 1000;
  const files = dirs * (typeof params['filesPerDir'] === 'number' ? params['filesPerDir'] : 0);
  const backend = WATCH_BACKENDS.find((b) => b === params['backend']) ?? 'inotify';
  // Building and removing the tree ~10 us an entry (4 us to build here), a Node child's start ~300 ms, the setup.
  return 500 + ((dirs + files) * 10) / 1000 + (backend === 'inotify' || backend === 'fanotify' ? 0 : 300) + ((dirs + files / 4) * SETUP_US_PER_DIR[backend]) / 1000;
}

/**
 * A sandbox container's storage is its work directory, which is the container's scratch
 * directory: `target: scratch` lands there, a private tmpfs would not measure it.
 */
function sandboxSkipReason(p: SliceParams): string | undefined {
  const storage = p['container.storage'];
  if (storage !== undefined && storage !== 'none' && p['target'] === 'tmpfs') {
    return `container.storage: ${String(storage)} measures the container's work directory: use target: scratch`;
  }
  if (p['backend'] === 'fanotify' && p['maxUserWatches'] !== undefined && p['maxUserWatches'] !== 'auto') {
    return 'maxUserWatches is an inotify limit; fanotify marks do not count against it';
  }
  return undefined;
}

export const watchesContract: WorkloadContract = {
  params: { ...watchesParams, ...containerParams },
  metrics: WatchesMetrics,
  metricDocs: WATCHES_METRIC_DOCS,
  headline: WATCHES_HEADLINE_METRICS,
  sweeps: [],
  skipReason: (p) => containerSkipReason(p) ?? sandboxSkipReason(p) ?? watchesSkipReason(p),
  exclusive: true,
  estimateRunMs: watchesRunMs,
  native: ['watches'],
  // target: scratch is the container's scratch directory, its work directory: nothing to point.
  sandbox: { workDirParam: () => undefined },
};
