/**
 * Puts runs on the queues and takes them off again. Placement decides the targets once, at
 * submission: `any` is the shared queue; `all` is one target per live host (boot id), so
 * several agents on one kernel count once; `{labels}` is each host where a live agent carries
 * every label. Each (cell, target, repetition) is one job with a deterministic id.
 */
import { Queue } from 'bullmq';
import type { RedisConnection } from '../../queue/redis.js';
import { maxRepetitions, type Cell, type Matrix, type Placement } from '../../contract/matrix.js';
import type { AgentStatus } from '../../queue/registry.js';
import { FsbenchError } from '../../contract/errors.js';
import { runOrder, type RunOrder } from '../../contract/schedule.js';
import { randomBytes } from 'node:crypto';
import { ANY_TARGET, eventStreamLength, jobId, qualifiedQueueName, queueName, RUN_JOB_NAME, runJobOptions, type RunJob, type SignedRunJob } from '../../queue/jobs.js';
import { signatureDigest, type JobSigner } from '../../queue/signing.js';
import { defaultOf } from '../../settings/index.js';
import { cancelledKey } from '../../queue/keys.js';
import { issuedRuns, plannedRuns } from './plans.js';
import { cellTargetKey, runKey, type IssuedJob, type MatrixRecord, type Planned, type Store, type TargetInfo } from '../store/index.js';

/** Jobs per addBulk call: one round trip each, small enough not to stall Redis. */
const CHUNK = 1000;
/** Targets whose queues one enqueue fills at once: their round trips overlap, Redis sees no more than this many addBulk calls together. */
const TARGETS_AT_ONCE = 16;

/** The hosts (or `any`) a placement selects among the live agents. */
export function resolveTargets(placement: Placement, agents: readonly AgentStatus[]): TargetInfo[] {
  if (placement === 'any') return [{ target: ANY_TARGET, machine: null }];
  const wanted = placement === 'all' ? [] : placement.labels;
  const hosts = new Map<string, string>();
  for (const a of agents) {
    if (wanted.every((l) => a.labels.includes(l)) && !hosts.has(a.hostId)) hosts.set(a.hostId, a.machine);
  }
  if (hosts.size === 0) {
    const what = placement === 'all' ? 'no agent is live' : `no live agent carries the labels ${wanted.join(', ')}`;
    throw new FsbenchError('NO_MATCHING_AGENTS', `${what}: start one (fsbench agent), or submit with placement: any to wait for one`);
  }
  return [...hosts].map(([target, machine]) => ({ target, machine }));
}

export interface EnqueueRequest {
  readonly matrixId: string;
  readonly cells: readonly Cell[];
  /** Runs per cell; under `repetitions: auto` the most, with `planned` saying how many are queued now. */
  readonly repetitions: number;
  /** Runs queued so far of each cell on each target under `repetitions: auto` (plans.ts). */
  readonly planned?: Planned | undefined;
  /** The order the runs are queued in (interleaved when absent) and, shuffled, its seed. */
  readonly order?: RunOrder;
  readonly seed?: number | undefined;
  readonly warmup: number;
  readonly targets: readonly TargetInfo[];
  /** The runKey of each run already stored, not to run again. */
  readonly skip?: ReadonlySet<string>;
  /** Checked between chunks: a cancelled matrix stops being enqueued. */
  readonly stillWanted?: () => boolean;
}

/** Everything of a stored matrix that is queued (or taken back): its runs in its order, under `auto` the planned ones. */
export function enqueueRequest(
  matrixId: string,
  spec: Matrix,
  cells: readonly Cell[],
  targets: readonly TargetInfo[],
  planned: Planned | undefined,
): EnqueueRequest {
  return { matrixId, cells, repetitions: maxRepetitions(spec), planned, order: spec.order, seed: spec.seed, warmup: spec.warmup, targets };
}

/** Everything of a stored matrix that is queued (or taken back): its cells as stored and, under `auto`, its plans so far. */
export function requestOf(store: Store, m: MatrixRecord): EnqueueRequest {
  return enqueueRequest(m.id, m.spec, store.cells(m.id), m.targets, plannedRuns(store, m));
}

type QueuedJob = { name: string; data: SignedRunJob; opts: { jobId: string } & ReturnType<typeof runJobOptions> };

/** What the store records of a job about to be queued (store/issued-table.ts): the run, and its signature's digest. */
function recordOf(job: QueuedJob): IssuedJob {
  const { matrixId, cell, target, repetition, signature } = job.data;
  return { matrixId, cellId: cell.id, target, repetition, digest: signatureDigest(signature) };
}

/** Runs of a cell on a target the request covers: those issued (plans.ts issuedRuns). */
function runsOf(r: EnqueueRequest, cell: Cell, target: string): number {
  return issuedRuns(r.repetitions, r.planned?.get(cellTargetKey(cell.id, target)));
}

export class Dispatcher {
  private readonly queues = new Map<string, Queue<unknown, unknown>>();

  constructor(
    private readonly redis: RedisConnection,
    private readonly prefix: string,
    private readonly maxAttempts: number,
    /** FSBENCH_MAX_QUEUED: sizes the queues' event streams, which carry the runs' reports. */
    private readonly maxQueued: number,
    /** Every job carries the coordinator's signature: agents run nothing else. */
    private readonly signer: JobSigner,
    /**
     * Told of each job before it is queued (Store.issued.record): a report counts only for a job
     * recorded here, so one that reached Redis unrecorded could never be answered.
     */
    private readonly recordIssued: (jobs: readonly IssuedJob[]) => void,
    /** FSBENCH_JOB_TTL: how long after signing an agent may start a job. */
    private readonly jobTtlMs: number = defaultOf('jobTtl'),
    /**
     * A queue's connection errors (the coordinator's RedisHealth). Each queue needs a listener:
     * BullMQ prints an error no one listens to with console.error, a stack dump per reconnect
     * attempt while Redis is away. Queue operations that fail also reject to their callers.
     */
    private readonly onError: (queue: string, err: Error) => void = () => undefined,
  ) {}

  queue(target: string): Queue<unknown, unknown> {
    let q = this.queues.get(target);
    if (!q) {
      q = new Queue<unknown, unknown>(queueName(target), {
        connection: this.redis,
        prefix: this.prefix,
        streams: { events: { maxLen: eventStreamLength(this.maxQueued) } },
      });
      q.on('error', (err) => {
        this.onError(target, err);
      });
      this.queues.set(target, q);
    }
    return q;
  }

  /** Runs waiting (not yet started) on the given targets' queues. */
  async waiting(targets: Iterable<string>): Promise<number> {
    // Asked all at once (one round trip's wait, not one per queue): `placement: all` over 1,000
    // hosts counted 1,001 queues one after another, and overran the submission's 10 s deadline.
    const counts = await Promise.all([...new Set(targets)].map((t) => this.queue(t).getJobCountByTypes('wait', 'delayed', 'prioritized')));
    return counts.reduce((a, b) => a + b, 0);
  }

  async enqueue(r: EnqueueRequest): Promise<number> {
    let added = 0;
    const order = runOrder(r.cells.length, r.repetitions, r.order ?? 'interleaved', r.seed);
    let stopped = false;
    const fill = async (t: TargetInfo): Promise<void> => {
      let batch: QueuedJob[] = [];
      const flush = async () => {
        if (batch.length === 0) return;
        this.recordIssued(batch.map(recordOf));
        await this.queue(t.target).addBulk(batch);
        added += batch.length;
        batch = [];
      };
      // Queues are first in, first out: the order they are filled in is the order runs are made.
      for (const { cell: i, repetition } of order) {
        const cell = r.cells[i];
        if (!cell || repetition >= runsOf(r, cell, t.target)) continue;
        if (r.skip?.has(runKey(cell.id, t.target, repetition))) continue;
        batch.push(this.job(r.matrixId, cell, t.target, repetition, r.warmup));
        if (batch.length >= CHUNK) {
          if (stopped || (r.stillWanted && !r.stillWanted())) {
            stopped = true;
            return;
          }
          await flush();
        }
      }
      await flush();
    };
    // Several targets' queues filled at once, each in its own order: one after another,
    // `placement: all` over 1,000 hosts waited for 1,000 round trips and overran the
    // submission's 10 s deadline.
    // Once one of them stops (not wanted any more, or Redis failed), none takes another target,
    // and the enqueue settles only when all have, as it did one target at a time.
    const next = r.targets[Symbol.iterator]();
    const filler = async (): Promise<void> => {
      for (let t = next.next(); t.done !== true && !stopped; t = next.next()) {
        await fill(t.value).catch((err: unknown) => {
          stopped = true;
          throw err;
        });
      }
    };
    const settled = await Promise.allSettled(Array.from({ length: TARGETS_AT_ONCE }, filler));
    for (const s of settled) if (s.status === 'rejected') throw s.reason;
    return added;
  }

  /** One more run of a cell under `repetitions: auto`, at the end of its target's queue. */
  async enqueueNext(matrixId: string, cell: Cell, target: string, repetition: number, warmup: number): Promise<void> {
    const job = this.job(matrixId, cell, target, repetition, warmup);
    this.recordIssued([recordOf(job)]);
    await this.queue(target).addBulk([job]);
  }

  private job(matrixId: string, cell: Cell, target: string, repetition: number, warmup: number): QueuedJob {
    const id = jobId(matrixId, cell.id, target, repetition);
    const issuedAt = Date.now();
    // Where it may sit, until when, and which issuance: a saved copy is refused elsewhere, later or again (agent/admission.ts).
    const run: RunJob = {
      matrixId, cell, repetition, warmup, target,
      id, queue: qualifiedQueueName(this.prefix, target), issuedAt, expiresAt: issuedAt + this.jobTtlMs, nonce: randomBytes(16).toString('base64url'),
    };
    const data: SignedRunJob = { ...run, signature: this.signer.sign(run) };
    return { name: RUN_JOB_NAME, data, opts: { jobId: id, ...runJobOptions(this.maxAttempts) } };
  }

  /** Removes the runs that have not started; returns how many. Started ones run to the end. */
  async cancel(r: EnqueueRequest): Promise<number> {
    // First: agents refuse the matrix's jobs from now on (JOB_CANCELLED), copies replayed later included, until they would have expired anyway.
    await this.redis.set(cancelledKey(this.prefix, r.matrixId), '1', 'PX', this.jobTtlMs);
    let removed = 0;
    for (const t of r.targets) {
      const q = this.queue(t.target);
      const ids: string[] = [];
      for (const cell of r.cells) {
        for (let repetition = 0; repetition < runsOf(r, cell, t.target); repetition++) ids.push(jobId(r.matrixId, cell.id, t.target, repetition));
      }
      for (let i = 0; i < ids.length; i += CHUNK) {
        const results = await Promise.all(ids.slice(i, i + CHUNK).map((id) => this.removeIfWaiting(q, id)));
        removed += results.filter(Boolean).length;
      }
    }
    return removed;
  }

  /**
   * Only waiting jobs: a completed job not yet collected holds a result. A job that starts and
   * completes between the two calls is lost to a matrix that is being cancelled anyway.
   */
  private async removeIfWaiting(q: Queue<unknown, unknown>, id: string): Promise<boolean> {
    const state = await q.getJobState(id);
    if (state !== 'waiting' && state !== 'delayed' && state !== 'prioritized' && state !== 'waiting-children') return false;
    return (await q.remove(id)) === 1;
  }

  /**
   * Removes a run that has not finished: waiting, or started by an agent that is gone (its lock
   * lapsed). False when it finished (its report or failure is on the way), is held, or does not exist.
   */
  async removeUnfinished(q: Queue<unknown, unknown>, id: string): Promise<boolean> {
    const state = await q.getJobState(id);
    // Failed jobs gave up already; the collector stores them.
    if (state === 'completed' || state === 'failed' || state === 'unknown') return false;
    // remove() refuses a job whose lock is still held, so a run in progress stays.
    return (await q.remove(id)) === 1;
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values()].map((q) => q.close()));
    this.queues.clear();
  }
}
