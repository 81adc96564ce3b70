/**
 * What a matrix will make the agents do, before it runs: how many runs (measured ones and
 * warmups, which agents run once per cell and host), and roughly how long, spread over the hosts
 * that share it. The limits (FSBENCH_MAX_RUNS, FSBENCH_MAX_DURATION) are checked against these,
 * so they count exactly what will run. The durations are rough by design (each workload's own
 * estimate, with the costs it assumes stated beside it); they exist to refuse a typo that asks for a month
 * and to tell users what to expect.
 */
import type { Cell } from '../../contract/matrix.js';
import { WORKLOADS } from '../../contract/workloads/index.js';

/** One run of one cell, as its workload estimates it (WorkloadContract.estimateRunMs). */
export function estimateRunMs(cell: Cell): number {
  return WORKLOADS[cell.workload].estimateRunMs(cell.params);
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
