/**
 * How long a matrix will take, before it runs: the sum of its runs' estimated durations, spread
 * over the hosts that share it. Rough by design (the workloads' own durations plus a fixed setup
 * cost); it exists to refuse a typo that asks for a month and to tell users what to expect.
 */
import type { Cell } from '../contract/matrix.js';
import { WORKLOADS } from '../contract/workloads/index.js';

/** Setup and teardown per run (fingerprint, target, limits), and per metadata filesystem made. */
const RUN_OVERHEAD_MS = 200;
const MKFS_MS = 2000;
/** What one metadata file costs over its five phases on an ordinary disk, cold caches included. */
const METADATA_MS_PER_FILE = 0.2;

function num(cell: Cell, name: string): number {
  const v = cell.params[name];
  return typeof v === 'number' ? v : 0;
}

/** One run of one cell. */
export function estimateRunMs(cell: Cell): number {
  const specs = WORKLOADS[cell.workload].params;
  switch (cell.workload) {
    case 'noop':
      return num(cell, 'sleep');
    case 'metadata': {
      const files = num(cell, 'dirs') * num(cell, 'filesPerDir');
      return RUN_OVERHEAD_MS + (cell.params['fs'] === 'none' ? 0 : MKFS_MS) + files * METADATA_MS_PER_FILE;
    }
    default: {
      // Workloads measured over a duration (inotify: `duration`, then a drain that is usually short).
      let ms = RUN_OVERHEAD_MS;
      for (const [name, spec] of Object.entries(specs)) {
        if (spec.kind === 'duration') ms += name === 'duration' ? num(cell, name) : num(cell, name) / 10;
      }
      return ms;
    }
  }
}

/**
 * The whole matrix: with `any` the runs spread over `hosts` hosts; with `all` or labels each
 * target host runs every cell, in parallel with the others.
 */
export function estimateMatrixMs(cells: readonly Cell[], runsPerCell: number, parallelHosts: number): number {
  let total = 0;
  for (const cell of cells) total += estimateRunMs(cell) * runsPerCell;
  return Math.ceil(total / Math.max(1, parallelHosts));
}
