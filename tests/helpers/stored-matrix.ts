/**
 * Matrices written into a coordinator's database directly (its Store on the same file), as the
 * collector would store their runs: big matrices for tests of readers in a second, without
 * agents running thousands of runs.
 */
import { expandMatrix, parseMatrix, type Cell } from '../../contract/matrix.js';
import { Store, type StoredRun } from '../../coordinator/store/index.js';
import { syntheticRunStream } from '../fixtures/synthetic.js';

/** `n` inotify cells that differ in `files` and `writers` (a parameter lists at most 1,000 values); the same cells for every matrix. */
export function cellsOf(n: number): Cell[] {
  const writers = Math.ceil(n / 1000);
  const files = Math.ceil(n / writers);
  const params = { files: Array.from({ length: files }, (_, i) => 16 * (i + 1)), writers: Array.from({ length: writers }, (_, i) => i + 1) };
  return expandMatrix(parseMatrix({ name: 'stored', workload: 'inotify', repetitions: 1, warmup: 0, params })).slice(0, n);
}

export interface StoredMatrixOptions {
  readonly cells: number;
  readonly repetitions: number;
  /** One target per machine. */
  readonly machines: readonly string[];
  /** The synthetic runs' seed (of the first machine; the next ones count up from it). */
  readonly seed?: number;
  /** The last `holdBack` runs are not stored but returned, for the test to store later. */
  readonly holdBack?: number;
}

/** A matrix `id` of `cells` x `repetitions` runs on each machine, stored in `store`; returns the runs held back. */
export function storeMatrixIn(store: Store, id: string, o: StoredMatrixOptions): StoredRun[] {
  const cells = cellsOf(o.cells);
  const spec = parseMatrix({ name: id, workload: 'inotify', repetitions: Math.min(o.repetitions, 1000), warmup: 0, placement: 'all' });
  const targets = o.machines.map((machine) => ({ target: `host-${machine}`, machine }));
  store.createMatrix({ id, spec, targets, cells, expectedRuns: cells.length * o.repetitions * targets.length, estimatedMs: 0 });
  store.markEnqueued(id);
  const batch: StoredRun[] = [];
  for (const [i, t] of targets.entries()) {
    for (const result of syntheticRunStream(cells, o.repetitions, { matrixId: id, machine: { machine: t.machine }, seed: (o.seed ?? 1) + i })) {
      batch.push({ kind: 'result', matrixId: id, target: t.target, result, attempts: 1 });
    }
  }
  const held = batch.splice(batch.length - (o.holdBack ?? 0));
  store.storeRuns(batch);
  return held;
}

/** The same, through a Store of its own on the coordinator's data directory. */
export function storeMatrix(dataDir: string, id: string, o: StoredMatrixOptions): StoredRun[] {
  const store = Store.open(dataDir);
  try {
    return storeMatrixIn(store, id, o);
  } finally {
    store.close();
  }
}
