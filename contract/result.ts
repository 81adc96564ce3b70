/**
 * One run of one cell, as written by `fsbench run --out` (one JSON line each), posted by agents
 * and stored by the coordinator. A union keyed on `state`.
 */
import { z } from 'zod';
import { ERROR_CODE_LIST, FsbenchError } from './errors.js';
import { Annotations, CellParams, Matrix } from './matrix.js';
import { InotifyLimits, MachineFingerprint } from './fingerprint.js';
import { Interference } from './interference.js';
import { paramSpec, WORKLOAD_NAMES, WORKLOADS } from './workloads/index.js';

/** The longest text a run's info may hold in one entry: a workload that lists things lists what fits. */
export const MAX_INFO_TEXT = 4096;

/** What a workload says of a run beside its metrics (the backend, the seed, what it missed): short entries, checked where the run is made. */
export const RunInfo = z.record(z.string().max(64), z.union([z.string().max(MAX_INFO_TEXT), z.number(), z.boolean(), z.null()]));
export type RunInfo = z.infer<typeof RunInfo>;

/**
 * A log-linear latency histogram: `[lowNs, highNs, count]` per non-empty bucket. Buckets are
 * self-describing, so histograms from many runs merge by summing counts per bucket, never by
 * averaging percentiles.
 */
export const Histogram = z
  .object({
    unit: z.literal('ns'),
    buckets: z.array(z.tuple([z.number().nonnegative(), z.number().nonnegative(), z.number().int().positive()])).max(4096),
  })
  .strict();
export type Histogram = z.infer<typeof Histogram>;

/** A message from a run (an error, a skip reason): long enough for a kernel's or mkfs's words, bounded. */
const message = z.string().max(8192);

const RunBase = z.object({
  /** Which matrix the run belongs to (its name locally, its id on a coordinator). */
  matrix: Matrix.shape.name,
  cellId: z.string().regex(/^[0-9a-f]{12}$/),
  workload: z.enum(WORKLOAD_NAMES),
  /** 0-based measured repetition; warmup runs are never written. */
  repetition: z.number().int().nonnegative(),
  params: CellParams,
  startedAt: z.iso.datetime(),
  finishedAt: z.iso.datetime(),
  fingerprint: MachineFingerprint,
  /** The kernel limits the run actually ran under, when the workload depends on them. */
  limits: InotifyLimits.nullable(),
  /** What else the machine did while the run measured (contract/interference.ts); absent from skipped runs and older results. */
  interference: Interference.optional(),
  /** The matrix's annotations (`commit: 4f2a9c1`), carried by each run so that a results file or an upload keeps them. */
  annotations: Annotations.optional(),
});

export const OkRun = RunBase.extend({
  state: z.literal('ok'),
  metrics: z.record(z.string(), z.number().nullable()),
  histograms: z.record(z.string(), Histogram).default({}),
  /** Facts about how the run was made that are not numbers to aggregate (fs geometry, cache state). */
  info: RunInfo.default({}),
}).strict();

export const FailedRun = RunBase.extend({
  state: z.literal('failed'),
  error: z.object({ code: z.enum(ERROR_CODE_LIST), message }).strict(),
}).strict();

export const SkippedRun = RunBase.extend({
  state: z.literal('skipped'),
  reason: message,
}).strict();

/**
 * A run's parameters must be its workload's (a stored run with a stray parameter would be a cell
 * no matrix has), and an ok run's metrics the ones its workload defines. Parameters an older
 * fsbench did not have may be missing: compare matches such results without them.
 */
function checkMetrics(
  run: { state: string; workload: (typeof WORKLOAD_NAMES)[number]; params: CellParams; metrics?: unknown },
  ctx: z.RefinementCtx,
): void {
  for (const name of Object.keys(run.params)) {
    if (!paramSpec(run.workload, name)) ctx.addIssue({ code: 'custom', path: ['params', name], message: `unknown parameter ${name} for workload ${run.workload}` });
  }
  if (run.state !== 'ok') return;
  const r = WORKLOADS[run.workload].metrics.safeParse(run.metrics);
  if (!r.success) {
    for (const issue of r.error.issues) {
      ctx.addIssue({ code: 'custom', path: ['metrics', ...issue.path.map(String)], message: issue.message });
    }
  }
}

export const RunResult = z.discriminatedUnion('state', [OkRun, FailedRun, SkippedRun]).superRefine(checkMetrics);
export type RunResult = z.infer<typeof RunResult>;

const NO_FINGERPRINT = { fingerprint: true } as const;

/**
 * A RunResult without its fingerprint, which travels apart and is named by its hash: how an
 * agent reports a run (see queue/jobs.ts), a few hundred bytes instead of a kilobyte.
 */
export const RunResultSansFingerprint = z
  .discriminatedUnion('state', [OkRun.omit(NO_FINGERPRINT), FailedRun.omit(NO_FINGERPRINT), SkippedRun.omit(NO_FINGERPRINT)])
  .superRefine(checkMetrics);
export type RunResultSansFingerprint = z.infer<typeof RunResultSansFingerprint>;
export type OkRun = z.infer<typeof OkRun>;

/** How the runs of a matrix ended, with the failed runs' error codes where known. */
export interface RunCounts {
  readonly ok: number;
  readonly failed: number;
  readonly skipped: number;
  /** Failed runs by error code; absent where only the count is known (a coordinator's progress). */
  readonly failedBy?: Readonly<Record<string, number>>;
}

export function countRuns(runs: readonly RunResult[]): RunCounts {
  const failedBy: Record<string, number> = {};
  let ok = 0;
  let skipped = 0;
  for (const r of runs) {
    if (r.state === 'ok') ok++;
    else if (r.state === 'skipped') skipped++;
    else failedBy[r.error.code] = (failedBy[r.error.code] ?? 0) + 1;
  }
  return { ok, failed: runs.length - ok - skipped, skipped, failedBy };
}

/**
 * What a matrix's runs mean for a command's exit, for `fsbench run` and `fsbench submit --wait`
 * alike: a CI job reads only the exit code, so runs that failed never end in success unless the
 * user accepted them (`allowFailures`, for exploratory sweeps), and a matrix that measured
 * nothing fails even then. Skipped runs are cells the matrix itself rules out (contract/
 * workloads' skip reasons): not failures, but not a measurement either. Null when all is well.
 */
export function runsProblem(c: RunCounts, o: { readonly allowFailures: boolean }): FsbenchError | null {
  const total = c.ok + c.failed + c.skipped;
  const codes = Object.entries(c.failedBy ?? {})
    .sort(([, a], [, b]) => b - a)
    .map(([code, n]) => `${code} ${String(n)}`)
    .join(', ');
  const failed = `${String(c.failed)} of ${String(total)} run${total === 1 ? '' : 's'} failed${codes === '' ? '' : ` (${codes})`}`;
  if (c.ok === 0 && total > 0) {
    const what = [...(c.failed > 0 ? [failed] : []), ...(c.skipped > 0 ? [`${String(c.skipped)} of ${String(total)} skipped`] : [])];
    return new FsbenchError('NO_RUN_MEASURED', `nothing was measured: ${what.join(', ')}; the report says why for each cell`);
  }
  if (c.failed > 0 && !o.allowFailures) {
    return new FsbenchError('RUNS_FAILED', `${failed}; the other runs are kept; --allow-failures accepts failed runs`);
  }
  return null;
}
