/**
 * Whether what the collector finds in Redis is a run this coordinator issued. Anyone who can write
 * to Redis can append to a stream, so a report is stored only for a run this coordinator issued:
 * on the queue of its target, of a matrix it has, a cell of that matrix, a repetition below the
 * runs issued of that cell on that target, a target among the matrix's, a plausible attempt count,
 * authenticated by the MAC of the enrolled agent key of its host, and answering a job the
 * coordinator signed for that very run: the report names the job by its signature's digest, which
 * the store recorded when the job was queued (store/issued-table.ts), so a report for a job never
 * issued, or carrying another run's or another host's job, is not stored. A failed job must in
 * addition carry the coordinator's signature. Anything else is counted, logged once per reason and
 * episode (drop-log.ts), and dropped: it never moves a matrix toward done.
 */
import type { Job } from 'bullmq';
import { z } from 'zod';
import type { ErrorCode } from '../../contract/errors.js';
import { proofMatches, reportMac } from '../../queue/enrollment.js';
import { ANY_TARGET, jobId, qualifiedQueueName, QueuedRunJob, RunReport, SignedRunReport, type RunJob } from '../../queue/jobs.js';
import { signatureDigest, type JobVerifier } from '../../queue/signing.js';
import type { EnrolledKey } from '../enrollment/index.js';
import { issuedOf } from '../matrices/index.js';
import type { MatrixRecord, Store, StoredRun } from '../store/index.js';

/**
 * A report whose result is looked at apart: a report for a known run with an invalid result is
 * stored as a failed run saying why, not dropped.
 */
export const Report = RunReport.extend({ result: z.unknown() });
export type Report = z.infer<typeof Report> & {
  readonly signedBy?: string;
  /** The machine name the authenticating key is enrolled under: the report's fingerprint must name it. */
  readonly boundMachine?: string;
};

/**
 * Starts of a run beyond its attempts: each agent retries a run whose agent died up to its own
 * FSBENCH_MAX_ATTEMPTS - 1 times (at most 19), which the coordinator cannot know, and a report
 * dropped for a count it could legitimately reach would leave its matrix unfinished.
 */
const MAX_STALLS = 19;

/** Why a report or failed job was dropped: the label of fsbench_reports_dropped_total. */
export type DropReason =
  | 'not-a-report'
  | 'unsigned'
  | 'unenrolled'
  | 'revoked'
  | 'bad-mac'
  | 'wrong-host'
  | 'wrong-machine'
  | 'wrong-job'
  | 'wrong-queue'
  | 'unknown-matrix'
  | 'unknown-target'
  | 'unknown-cell'
  | 'repetition'
  | 'attempts';

/** What a report or a failed job claims: checked against what the coordinator issued. */
interface Claim {
  readonly matrixId: string;
  readonly cellId: string;
  readonly target: string;
  readonly repetition: number;
  readonly attempts: number;
  /** The digest of the signature of the job it answers (RunReport.jobSignature). */
  readonly jobSignature: string;
}

/** Drops of one batch, logged once per reason. */
export type Drops = Map<DropReason, { n: number; example: string }>;

/** What checking a report or a failed job takes (CollectorDeps has it all). */
export interface Verification {
  readonly store: Store;
  readonly prefix: string;
  /** The coordinator's public job key: a failed job it did not sign was never issued. */
  readonly verifier: JobVerifier;
  /** FSBENCH_MAX_ATTEMPTS: the attempts a job was issued with. */
  readonly maxAttempts: number;
  /** The enrolled agent key with a fingerprint (enrollment/): a report counts only with its MAC. */
  readonly enrolledKey: (key: string) => EnrolledKey | undefined;
  /** Whether a key was revoked (enrollment/): its reports are dropped as `revoked`, apart from keys never enrolled. */
  readonly revokedKey?: (key: string) => boolean;
  /**
   * False only in `npm run bench:dispatch`, to measure what checking the agents' signatures costs
   * side by side: never a setting, since a coordinator that does not check them stores forgeries.
   */
  readonly verifyReports?: boolean;
}

/**
 * Whether a claimed run is one this coordinator issued: null when it is, else why not. Matrices
 * and cells are looked up once per batch.
 */
export function issuedCheck(v: Verification): (c: Claim, queueTarget: string | undefined) => DropReason | null {
  const matrices = new Map<string, MatrixRecord | undefined>();
  const cells = new Map<string, boolean>();
  return (c, queueTarget) => {
    // A host's queue carries only that host's runs, the `any` queue only runs placed `any`.
    if (queueTarget !== undefined && c.target !== queueTarget) return 'wrong-queue';
    let m = matrices.get(c.matrixId);
    if (!matrices.has(c.matrixId)) {
      m = v.store.getMatrix(c.matrixId);
      matrices.set(c.matrixId, m);
    }
    if (!m) return 'unknown-matrix';
    if (!m.targets.some((t) => t.target === c.target)) return 'unknown-target';
    // Under `repetitions: auto`, only the runs its plan queued so far were issued.
    if (c.repetition >= issuedOf(v.store, m, c.cellId, c.target)) return 'repetition';
    const cellKey = `${c.matrixId} ${c.cellId}`;
    let known = cells.get(cellKey);
    if (known === undefined) {
      known = v.store.cell(c.matrixId, c.cellId) !== undefined;
      cells.set(cellKey, known);
    }
    if (!known) return 'unknown-cell';
    if (c.attempts > v.maxAttempts + MAX_STALLS) return 'attempts';
    // Matrices submitted before jobs were recorded have reports that cannot be bound (issued-table.ts).
    const bound = (v.verifyReports ?? true) && !v.store.issued.unboundMatrix(c.matrixId);
    if (bound && !v.store.issued.issued({ matrixId: c.matrixId, cellId: c.cellId, target: c.target, repetition: c.repetition, digest: c.jobSignature })) return 'wrong-job';
    return null;
  };
}

/** The report of a `completed` event; null for every other event. */
export function reportOf(v: Verification, stream: string, id: string, fields: readonly string[], drops: Drops): Report | null {
  if (field(fields, 'event') !== 'completed') return null;
  const raw = field(fields, 'returnvalue');
  let json: unknown;
  try {
    json = raw === undefined ? undefined : JSON.parse(raw);
  } catch {
    json = undefined;
  }
  const job = field(fields, 'jobId') ?? '?';
  const envelope = SignedRunReport.safeParse(json);
  if (!envelope.success) {
    drop(drops, 'not-a-report', `${stream} entry ${id}: job ${job} did not complete with a signed run report (${envelope.error.issues[0]?.message ?? 'invalid'})`);
    return null;
  }
  const { report: text, key } = envelope.data;
  const verify = v.verifyReports ?? true;
  const checked = verify ? authenticate(envelope.data, v.enrolledKey) : null;
  if (checked === 'unenrolled' && v.revokedKey?.(key) === true) {
    drop(drops, 'revoked', `${stream} entry ${id}: job ${job} completed with a report from ${key}, a revoked agent key`);
    return null;
  }
  if (checked === 'unenrolled') {
    drop(drops, 'unenrolled', `${stream} entry ${id}: job ${job} completed with a report from ${key}, which is not an enrolled agent key`);
    return null;
  }
  if (checked === 'bad-mac') {
    drop(drops, 'bad-mac', `${stream} entry ${id}: job ${job} completed with a report whose MAC is not ${key}'s over it`);
    return null;
  }
  const signer = checked ?? undefined;
  let inner: unknown;
  try {
    inner = JSON.parse(text);
  } catch {
    inner = undefined;
  }
  const report = Report.safeParse(inner);
  if (!report.success) {
    drop(drops, 'not-a-report', `${stream} entry ${id}: job ${job} did not complete with a run report (${report.error.issues[0]?.message ?? 'invalid'})`);
    return null;
  }
  const r = report.data;
  // An enrolled key speaks for its own host only: for runs issued to it, or to any host.
  if (verify && signer !== undefined && (r.hostId !== signer.hostId || (r.target !== ANY_TARGET && r.target !== signer.hostId))) {
    drop(drops, 'wrong-host', `${stream} entry ${id}: a report for target ${r.target} from host ${r.hostId}, authenticated by ${key} of host ${signer.hostId}`);
    return null;
  }
  if (r.jobId !== job || r.jobId !== jobId(r.matrixId, r.cellId, r.target, r.repetition)) {
    drop(drops, 'wrong-job', `${stream} entry ${id}: job ${job} completed with the report of job ${r.jobId}`);
    return null;
  }
  return { ...r, signedBy: key, ...(signer === undefined ? {} : { boundMachine: signer.machine }) };
}

/**
 * The reports whose fingerprint names the machine their key is enrolled under (the fingerprint
 * looked up by `fingerprintOf`); the others are dropped: an enrolled host restarted under another
 * machine's name writes nothing into that machine's results. A fingerprint not found is left to
 * the caller (stored as a run that cannot be read).
 */
export function boundToMachine(reports: readonly Report[], fingerprintOf: (hash: string) => { readonly machine: string } | undefined, drops: Drops): Report[] {
  return reports.filter((r) => {
    const machine = fingerprintOf(r.fingerprint)?.machine;
    if (r.boundMachine === undefined || machine === undefined || machine === r.boundMachine) return true;
    drop(drops, 'wrong-machine', `a report of job ${r.jobId} naming machine ${machine}, authenticated by ${r.signedBy ?? '?'} enrolled as ${r.boundMachine}`);
    return false;
  });
}

export function failedRun(v: Verification, job: Job<unknown, unknown>, queueTarget: string, drops: Drops, issued: ReturnType<typeof issuedCheck>): StoredRun | null {
  const parsed = QueuedRunJob.safeParse(job.data);
  if (!parsed.success) {
    drop(drops, 'not-a-report', `job ${job.id ?? '?'} whose data is not a run job (${parsed.error.issues[0]?.message ?? 'invalid'}) [JOB_INVALID]`);
    return null;
  }
  const { signature, ...run } = parsed.data;
  if (signature === undefined || !v.verifier.verify(run, signature)) {
    // The agent refused it (JOB_UNSIGNED): written to Redis by someone else, not a run of ours.
    drop(drops, 'unsigned', `job ${job.id ?? '?'} (matrix ${run.matrixId}, cell ${run.cell.id}) without a valid signature: ${job.failedReason || 'no reason recorded'}`);
    return null;
  }
  // A signed job copied under another id, onto another queue or with repeat (the agent refused
  // it, JOB_MISROUTED or JOB_REPLAYED) is not the run it copies: it must not stand for it.
  const repeating = 'repeat' in job.opts || job.repeatJobKey !== undefined;
  if (job.id !== run.id || run.id !== jobId(run.matrixId, run.cell.id, run.target, run.repetition) || job.queueQualifiedName !== run.queue || run.queue !== qualifiedQueueName(v.prefix, run.target) || repeating) {
    drop(drops, 'wrong-job', `failed job ${job.id ?? '?'} on ${job.queueQualifiedName} is a copy of the signed job ${run.id} for ${run.queue}`);
    return null;
  }
  const claim = { matrixId: run.matrixId, cellId: run.cell.id, target: run.target, repetition: run.repetition, attempts: Math.max(1, job.attemptsMade), jobSignature: signatureDigest(signature) };
  // A signed job names an issued run; still checked, as the coordinator's key may have been replaced.
  const notIssued = issued(claim, queueTarget);
  if (notIssued !== null) {
    drop(drops, notIssued, `failed job ${job.id ?? '?'} (matrix ${run.matrixId}, cell ${run.cell.id}, target ${run.target}, repetition ${run.repetition})`);
    return null;
  }
  // attemptsStarted also counts the start that only found the job over its stall limit.
  // An agent's refusal of a job past its expiry or of a cancelled matrix says so; anything else is a run nobody finished.
  const refused = /\[(JOB_EXPIRED|JOB_CANCELLED)\]/.exec(job.failedReason)?.[1];
  if (refused === 'JOB_EXPIRED' || refused === 'JOB_CANCELLED') return gaveUp(v.store, refused, run, job.failedReason, claim.attempts);
  const why = `the run was given up after ${job.attemptsMade} attempt(s) (${job.stalledCounter} by agents that died): ${job.failedReason || 'no reason recorded'}`;
  return gaveUp(v.store, 'ABANDONED', run, why, claim.attempts);
}

export function gaveUp(store: Store, code: ErrorCode, data: Pick<RunJob, 'matrixId' | 'target' | 'cell' | 'repetition'>, message: string, attempts: number): StoredRun {
  const target = store.getMatrix(data.matrixId)?.targets.find((t) => t.target === data.target);
  return {
    kind: 'gave-up',
    code,
    matrixId: data.matrixId,
    target: data.target,
    cell: data.cell,
    repetition: data.repetition,
    machine: target?.machine ?? '(unknown)',
    message,
    attempts,
  };
}

/**
 * The enrolled key whose MAC a report carries, or why it carries none: what checking a report
 * costs the coordinator (bench/host-scaling.ts measures it alone).
 */
export function authenticate(envelope: SignedRunReport, enrolledKey: (key: string) => EnrolledKey | undefined): EnrolledKey | 'unenrolled' | 'bad-mac' {
  const signer = enrolledKey(envelope.key);
  if (signer === undefined) return 'unenrolled';
  return proofMatches(reportMac(signer.macKey, envelope.report), envelope.mac) ? signer : 'bad-mac';
}

export function drop(drops: Drops, reason: DropReason, example: string): void {
  const d = drops.get(reason);
  if (d) d.n++;
  else drops.set(reason, { n: 1, example });
}

/** A field of a stream entry, whose fields come as [name, value, name, value, ...]. */
export function field(fields: readonly string[], name: string): string | undefined {
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === name) return fields[i + 1];
  return undefined;
}
