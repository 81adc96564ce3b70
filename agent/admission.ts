/**
 * Whether an agent may start a job whose signature it has verified. A signature says the
 * coordinator issued the job once, not that this copy of it is that issuance: anyone who can
 * write to Redis can put a saved job on another host's queue, under another id, with `repeat`,
 * after its matrix was cancelled or long after. So the agent also checks, before it touches
 * anything on the host, that the job sits where it was signed to sit, is still valid, and has not
 * run here already; each refusal has an error code, is counted in Redis for the coordinator's
 * /metrics (fsbench_jobs_refused_total) and fails the job for good.
 *
 * What has run is remembered by nonce in the state directory (ran-here.ts: the signed report each
 * job completed with, under the day the job expires, so whole days are pruned once past), not in
 * Redis, where whoever replays a job could also delete the record. A job that ran here already is
 * not run again: it completes with the same report (ranBefore).
 */
import path from 'node:path';
import type { Job } from 'bullmq';
import type { RedisConnection } from '../queue/redis.js';
import type { ErrorCode } from '../contract/errors.js';
import { ANY_TARGET, jobId, qualifiedQueueName, SignedRunReport, type RunJob } from '../queue/jobs.js';
import { cancelledKey, refusalsKey } from '../queue/keys.js';
import { RanHere } from './ran-here.js';

const DONE_DIR = 'done';
const DAY_MS = 86_400_000;

export interface Refusal {
  readonly code: Extract<ErrorCode, 'JOB_MISROUTED' | 'JOB_EXPIRED' | 'JOB_REPLAYED' | 'JOB_CANCELLED'>;
  readonly why: string;
}

export interface AdmissionDeps {
  readonly redis: RedisConnection;
  readonly prefix: string;
  readonly hostId: string;
  /** The agent's state directory (checked: only root controls it). */
  readonly stateDir: string;
  readonly now?: () => number;
}


export class Admission {
  private readonly ranHere: RanHere;

  constructor(private readonly deps: AdmissionDeps) {
    this.ranHere = new RanHere(path.join(deps.stateDir, DONE_DIR));
  }

  /** Why `job` (verified already) must not run here, or null when it may. Reads Redis and the state directory; changes nothing. */
  async refusal(job: RunJob, queued: Job<unknown, unknown>): Promise<Refusal | null> {
    const { prefix, hostId } = this.deps;
    const expectedId = jobId(job.matrixId, job.cell.id, job.target, job.repetition);
    if (queued.id !== job.id || job.id !== expectedId) {
      return { code: 'JOB_MISROUTED', why: `job ${queued.id ?? '?'} carries the signed run ${expectedId} (signed id ${job.id}): a copy under another id` };
    }
    const queue = qualifiedQueueName(prefix, job.target);
    if (queued.queueQualifiedName !== job.queue || job.queue !== queue) {
      return { code: 'JOB_MISROUTED', why: `job ${job.id} sits on ${queued.queueQualifiedName}, but was signed for ${job.queue} (this installation's queue for it: ${queue})` };
    }
    if (job.target !== ANY_TARGET && job.target !== hostId) {
      return { code: 'JOB_MISROUTED', why: `job ${job.id} was issued to host ${job.target}, not this host ${hostId}` };
    }
    const opts = queued.opts;
    // `repeat` is no longer in BullMQ's public options, but a job scheduler's jobs still carry it.
    const repeating = 'repeat' in opts || opts.repeatJobKey !== undefined || queued.repeatJobKey !== undefined;
    if (repeating || (opts.delay ?? 0) > 0) {
      return { code: 'JOB_REPLAYED', why: `job ${job.id} carries ${repeating ? 'repeat' : 'delay'} options the coordinator never sets` };
    }
    const now = (this.deps.now ?? Date.now)();
    if (now > job.expiresAt) {
      return { code: 'JOB_EXPIRED', why: `job ${job.id} expired at ${new Date(job.expiresAt).toISOString()} (FSBENCH_JOB_TTL on the coordinator)` };
    }
    if ((await this.deps.redis.exists(cancelledKey(prefix, job.matrixId))) === 1) {
      return { code: 'JOB_CANCELLED', why: `matrix ${job.matrixId} was cancelled` };
    }
    return null;
  }

  /**
   * The signed report this host completed `job` with, when it ran here already: a job whose
   * completion Redis lost (restarted, failed over) comes back as a retry of the same issuance,
   * and gets the same report again without running a second time; so does a saved copy replayed.
   */
  async ranBefore(job: RunJob): Promise<SignedRunReport | null> {
    const day = dayOf(job);
    const text = await this.ranHere.lookup(day, job.nonce);
    if (text === null) return null;
    try {
      return SignedRunReport.parse(JSON.parse(text));
    } catch {
      // Cut short by a crash while it was written: the report never left, so the run is made again.
      await this.ranHere.forget(day, job.nonce);
      return null;
    }
  }

  /** Remembers that `job` ran here and what it reported, on the disk before this resolves, until the day after it expires. */
  async ranNow(job: RunJob, report: SignedRunReport): Promise<void> {
    await this.ranHere.record(dayOf(job), job.nonce, JSON.stringify(report));
  }

  /** Counts a refusal where the coordinator reads it; a failure to count never hides the refusal. */
  async count(code: Refusal['code']): Promise<void> {
    await this.deps.redis.hincrby(refusalsKey(this.deps.prefix), code, 1).catch(() => undefined);
  }

  /** Removes the records of jobs expired before yesterday: they are refused as expired anyway. */
  async prune(): Promise<void> {
    await this.ranHere.prune(Math.floor((this.deps.now ?? Date.now)() / DAY_MS) - 1);
  }

  /** Closes the files of what ran here. */
  async close(): Promise<void> {
    await this.ranHere.close();
  }
}

/** The day a job's record is kept under: the day it expires (see prune). */
function dayOf(job: RunJob): string {
  return String(Math.floor(job.expiresAt / DAY_MS));
}
