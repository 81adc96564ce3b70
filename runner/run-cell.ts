/**
 * Runs one repetition of one cell and always returns a RunResult: `skipped` for combinations
 * the workload cannot measure, `failed` with a stable code when the run could not be measured,
 * `ok` with metrics checked against the workload's metric schema. The local CLI and the agent
 * both call this and nothing else.
 *
 * The result is built, not parsed: everything in it is typed, and the one part a workload
 * reports from outside (its metrics, from a probe's output) is parsed with the workload's
 * metric schema. Whoever receives a result across a boundary (the coordinator, `fsbench upload`)
 * parses it with RunResult there.
 */
import type { MachineFingerprint } from '../contract/fingerprint.js';
import type { Interference, InterferenceThresholds } from '../contract/interference.js';
import { FsbenchError, toFsbenchError } from '../contract/errors.js';
import type { Cell } from '../contract/matrix.js';
import { RunInfo, type RunResult } from '../contract/result.js';
import { WORKLOADS } from '../contract/workloads/index.js';
import { finishInterference, startInterference, thresholdsFromEnv } from '../host/interference.js';
import { WorkloadSkipped, type RunContext, type WorkloadRunner } from '../workloads/workload.js';
import { checkHostBudget, type HostBudget } from './host-budget.js';
import { RUNNERS } from './workloads.js';

export interface RunRequest {
  /** The matrix's name (locally) or id (on a coordinator). */
  readonly matrix: string;
  readonly cell: Cell;
  readonly repetition: number;
  readonly fingerprint: MachineFingerprint;
}

export interface RunCellContext extends RunContext {
  /** What this host lets a cell take (the settings); the defaults when absent. */
  readonly budget?: HostBudget;
  /** When a run counts as disturbed; FSBENCH_MAX_STEAL and FSBENCH_MAX_OUTSIDE_CPU from the environment when absent. */
  readonly interference?: InterferenceThresholds;
}

/**
 * The agent and `fsbench run` hand in the thresholds their settings parsed at start; other
 * callers (tests, benchmarks) get the environment's, read per run.
 */
function thresholdsFrom(ctx: RunCellContext): InterferenceThresholds {
  return ctx.interference ?? thresholdsFromEnv();
}

/** Cells with container parameters run in a sandbox container; the rest in this process. */
function runnerFor(cell: Cell, ctx: RunContext): WorkloadRunner {
  const storage = cell.params['container.storage'];
  if (storage === undefined || storage === 'none') return RUNNERS[cell.workload];
  if (!ctx.sandbox) {
    throw new FsbenchError(
      'SANDBOX_UNAVAILABLE',
      `container.storage: ${String(storage)} needs an fsbench agent that can reach the Docker engine (/var/run/docker.sock); this process cannot`,
    );
  }
  return ctx.sandbox;
}

/** A workload's info, checked where the run is made: a wrong one is a failed run with a reason, not a result the store refuses later. */
function checkedInfo(info: unknown): RunInfo {
  const r = RunInfo.safeParse(info);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  throw new FsbenchError('WORKLOAD_FAILED', `the workload's info about the run cannot be stored: ${issue ? `${issue.path.join('.')}: ${issue.message}` : 'invalid'}`);
}

export async function runCell(req: RunRequest, ctx: RunCellContext): Promise<RunResult> {
  const { cell } = req;
  const startedAt = new Date().toISOString();
  const base = {
    matrix: req.matrix,
    cellId: cell.id,
    workload: cell.workload,
    repetition: req.repetition,
    params: cell.params,
    startedAt,
    fingerprint: req.fingerprint,
  };
  const reason = WORKLOADS[cell.workload].skipReason(cell.params);
  if (reason !== undefined) {
    return { ...base, finishedAt: startedAt, limits: null, state: 'skipped', reason };
  }
  // Kept when the workload fails too: a failure under heavy interference is worth knowing as such.
  let interference: Interference | undefined;
  try {
    // Before anything of the run exists, so a refused cell leaves nothing to undo.
    await checkHostBudget(cell, ctx.scratchDir, ctx.budget);
    const thresholds = thresholdsFrom(ctx);
    const runner = runnerFor(cell, ctx);
    const before = startInterference();
    // The budget's list is the one the cell was just checked against: the run reads that one.
    const runCtx: RunContext = ctx.budget?.watchers === undefined ? ctx : { ...ctx, watchers: ctx.budget.watchers };
    const outcome = await runner.run(cell, runCtx).finally(() => {
      // A sandbox's workload runs in a container, not in a child of this process.
      interference = finishInterference(before, { thresholds, attributable: runner !== ctx.sandbox });
    });
    const metrics = WORKLOADS[cell.workload].metrics.parse(outcome.metrics);
    return {
      ...base,
      // The same object when nothing changed, so whoever hashes it can tell without re-serializing.
      fingerprint: outcome.targetFs === req.fingerprint.targetFs ? req.fingerprint : { ...req.fingerprint, targetFs: outcome.targetFs },
      finishedAt: new Date().toISOString(),
      limits: outcome.limits,
      ...(interference ? { interference } : {}),
      state: 'ok',
      metrics,
      histograms: outcome.histograms ?? {},
      info: checkedInfo(outcome.info ?? {}),
    };
  } catch (err) {
    if (err instanceof WorkloadSkipped) return { ...base, finishedAt: new Date().toISOString(), limits: null, state: 'skipped', reason: err.skipReason };
    const e = toFsbenchError(err, 'WORKLOAD_FAILED');
    return {
      ...base,
      finishedAt: new Date().toISOString(),
      limits: null,
      ...(interference ? { interference } : {}),
      state: 'failed',
      error: { code: e.code, message: e.message },
    };
  }
}
