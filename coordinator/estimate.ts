/**
 * What a matrix will make the agents do, before it runs: how many runs (measured ones and
 * warmups, which agents run once per cell and host), and roughly how long, spread over the hosts
 * that share it. The limits (FSBENCH_MAX_RUNS, FSBENCH_MAX_DURATION) are checked against these,
 * so they count exactly what will run. The durations are rough by design (each workload's own
 * durations plus fixed costs, stated below); they exist to refuse a typo that asks for a month
 * and to tell users what to expect.
 */
import type { Cell } from '../contract/matrix.js';
import { WORKLOADS } from '../contract/workloads/index.js';

/** Setup and teardown per run (fingerprint, target, limits), and per metadata filesystem made. */
const RUN_OVERHEAD_MS = 200;
const MKFS_MS = 2000;
/** What one metadata file's inode costs over its five phases on an ordinary disk, cold caches included. */
const METADATA_MS_PER_FILE = 0.2;
/** Each file's data is written once and read twice; assumed at this rate. */
const METADATA_BYTES_PER_MS = 200 * 1024;
/** One fsync() of a small file or a directory, and one syncfs(), on an ordinary SSD. */
const FSYNC_MS = 2;
const SYNCFS_MS = 100;
/** `cache: cold` syncs and drops the caches before each of the four phases after create. */
const DROP_CACHES_MS = 4 * 250;

function num(cell: Cell, name: string): number {
  const v = Object.hasOwn(cell.params, name) ? cell.params[name] : undefined;
  return typeof v === 'number' ? v : 0;
}

function metadataRunMs(cell: Cell): number {
  const dirs = num(cell, 'dirs');
  const files = dirs * num(cell, 'filesPerDir');
  const fsync = cell.params['fsync'];
  const syncs = fsync === 'file' ? files : fsync === 'dir' ? files + dirs : 0;
  return (
    RUN_OVERHEAD_MS +
    (cell.params['fs'] === 'none' ? 0 : MKFS_MS) +
    files * METADATA_MS_PER_FILE +
    (files * num(cell, 'fileSize') * 3) / METADATA_BYTES_PER_MS +
    syncs * FSYNC_MS +
    (fsync === 'end' ? SYNCFS_MS : 0) +
    (cell.params['cache'] === 'cold' ? DROP_CACHES_MS : 0)
  );
}

/** One run of one cell. */
export function estimateRunMs(cell: Cell): number {
  switch (cell.workload) {
    case 'noop':
      return num(cell, 'sleep');
    case 'metadata':
      return metadataRunMs(cell);
    default: {
      // Workloads measured over a duration (inotify: `duration`, then a drain that is usually short).
      let ms = RUN_OVERHEAD_MS;
      for (const [name, spec] of Object.entries(WORKLOADS[cell.workload].params)) {
        if (spec.kind === 'duration') ms += name === 'duration' ? num(cell, name) : num(cell, name) / 10;
      }
      return ms;
    }
  }
}

export interface MatrixPlan {
  /** Measured runs: what the matrix stores. */
  readonly measured: number;
  /** Warmup runs: once per cell on each host that runs any of its repetitions (at most). */
  readonly warmups: number;
  /** Every run the agents will make. */
  readonly total: number;
  readonly estimatedMs: number;
}

/**
 * `targets` hosts each run every cell (`all`, labels), or with `any` the runs spread over
 * `liveHosts` hosts, each of which warms a cell up before the first of its repetitions it takes:
 * at most min(hosts, repetitions) warmups per cell, which is what the limits count.
 */
export function planMatrix(
  cells: readonly Cell[],
  o: { readonly repetitions: number; readonly warmup: number; readonly any: boolean; readonly targets: number; readonly liveHosts: number },
): MatrixPlan {
  const hosts = o.any ? Math.max(1, o.liveHosts) : o.targets;
  const warmingHosts = o.any ? Math.min(hosts, o.repetitions) : o.targets;
  const measured = cells.length * o.repetitions * (o.any ? 1 : o.targets);
  const warmups = cells.length * o.warmup * warmingHosts;
  let work = 0;
  for (const cell of cells) work += estimateRunMs(cell) * (o.repetitions * (o.any ? 1 : o.targets) + o.warmup * warmingHosts);
  // `all` and labels: every target runs the whole matrix, all at once.
  return { measured, warmups, total: measured + warmups, estimatedMs: Math.ceil(work / hosts) };
}
