/**
 * Collects results. Agents append each finished run to the results stream (see jobs.ts); jobs
 * that gave up (their agents died or abandoned them too often) sit in their queue's failed set.
 * The collector reads the stream in batches, stores each batch in one SQLite transaction
 * (duplicates ignored), and only then deletes the entries (XDEL) or removes the failed jobs, so
 * a crash at any point loses nothing and doubles nothing; at start it reads the stream from its
 * beginning and so finds what completed while the coordinator was down.
 *
 * Why XREAD and XDEL rather than a consumer group: there is one coordinator, and whatever it has
 * not deleted is, by construction, not yet stored; a group's pending list would say the same
 * thing with one more command per batch (XACK).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Job, Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { RunResult } from '../contract/result.js';
import type { Dispatcher } from './dispatch.js';
import { ANY_TARGET, REPORT_FIELD, resultsStream, RunJob, RunReport } from './jobs.js';
import type { Store, StoredRun } from './store.js';

/** Entries per read: one SQLite transaction and one XDEL each. */
const BATCH = 500;
/**
 * After a read that found fewer than BATCH entries, wait this long before the next: under load,
 * batches of tens instead of a few, for a latency that queueing dwarfs anyway.
 */
const GATHER_MS = 25;
/** Cancelled and finished matrices may still have runs in flight for a while. */
const LATE_RESULTS_MS = 3_600_000;

export interface CollectorDeps {
  readonly store: Store;
  readonly dispatcher: Dispatcher;
  /** For XDEL; the blocking reads use a connection of their own, duplicated from this one. */
  readonly redis: Redis;
  readonly prefix: string;
  /** Told which matrices changed, after each stored batch. */
  readonly onChange: (matrixIds: ReadonlySet<string>) => void;
  /** Told of every run result as it is stored (run-duration metrics). */
  readonly onStored?: (runs: readonly StoredRun[]) => void;
  readonly log: (line: string) => void;
  /** How long a read waits for new results, and how often the failed sets are looked at. */
  readonly pollMs: number;
}

export class Collector {
  private running = false;
  private loop: Promise<void> | undefined;
  private failing = false;
  private readonly stream: string;
  /** A blocking XREAD holds its connection: never the one the API and the queues share. */
  private reader: Redis | undefined;
  /** The last entry stored *and* deleted; a batch whose XDEL failed is read again. */
  private lastId = '0-0';
  private nextFailedScan = 0;

  constructor(private readonly deps: CollectorDeps) {
    this.stream = resultsStream(deps.prefix);
  }

  start(): void {
    this.running = true;
    const reader = this.deps.redis.duplicate();
    reader.on('error', () => undefined);
    this.reader = reader;
    this.loop = this.run(reader);
  }

  async stop(): Promise<void> {
    this.running = false;
    // Ends a read blocked on Redis (which may be gone) at once; the loop sees `running` and stops.
    this.reader?.disconnect();
    await this.loop;
  }

  /** A method, not the field: the field is read again after each await. */
  private stopping(): boolean {
    return !this.running;
  }

  private async run(reader: Redis): Promise<void> {
    while (this.running) {
      try {
        const n = await this.drainOnce(reader);
        if (n > 0 && n < BATCH) await sleep(GATHER_MS);
        if (this.failing) this.deps.log('collector: Redis reachable again');
        this.failing = false;
      } catch (err) {
        if (this.stopping()) break;
        if (!this.failing) this.deps.log(`collector: ${err instanceof Error ? err.message : String(err)} (retrying)`);
        this.failing = true;
        await sleep(Math.max(this.deps.pollMs, 500));
      }
    }
  }

  /** One read of the stream (waiting up to pollMs for it), and the failed sets when due. */
  private async drainOnce(reader: Redis): Promise<number> {
    let n = await this.drainStream(reader);
    if (Date.now() >= this.nextFailedScan) {
      this.nextFailedScan = Date.now() + this.deps.pollMs;
      const targets = this.deps.store.activeTargets(Date.now() - LATE_RESULTS_MS);
      targets.add(ANY_TARGET);
      for (const target of targets) n += await this.drainFailed(this.deps.dispatcher.queue(target));
    }
    return n;
  }

  private async drainStream(reader: Redis): Promise<number> {
    const read = await reader.xread('COUNT', BATCH, 'BLOCK', this.deps.pollMs, 'STREAMS', this.stream, this.lastId);
    const entries = read?.[0]?.[1] ?? [];
    const last = entries.at(-1);
    if (!last) return 0;
    const runs: StoredRun[] = [];
    for (const [id, fields] of entries) {
      const run = this.fromReport(id, fields);
      if (run) runs.push(run);
    }
    const changed = this.deps.store.storeRuns(runs);
    this.deps.onStored?.(runs);
    // Deleted only once stored: a crash in between stores them again, and duplicates are ignored.
    await this.deps.redis.xdel(this.stream, ...entries.map(([id]) => id));
    this.lastId = last[0];
    if (changed.size > 0) this.deps.onChange(changed);
    return entries.length;
  }

  private fromReport(id: string, fields: readonly string[]): StoredRun | null {
    const at = fields.indexOf(REPORT_FIELD);
    const raw = at >= 0 && at % 2 === 0 ? fields[at + 1] : undefined;
    let json: unknown;
    try {
      json = raw === undefined ? undefined : JSON.parse(raw);
    } catch {
      json = undefined;
    }
    const report = RunReport.safeParse(json);
    if (!report.success) {
      this.deps.log(`collector: dropping results entry ${id}, which is not a run report (${report.error.issues[0]?.message ?? 'invalid'})`);
      return null;
    }
    const r = report.data;
    const result = RunResult.safeParse(r.result);
    const matches = result.success && result.data.cellId === r.cellId && result.data.repetition === r.repetition;
    if (result.success && matches) {
      return { kind: 'result', matrixId: r.matrixId, target: r.target, result: result.data, attempts: r.attempts };
    }
    const why = result.success
      ? 'the agent returned the result of another run'
      : `the agent's result is invalid: ${result.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`;
    const cell = this.deps.store.cell(r.matrixId, r.cellId);
    if (!cell) return null;
    return this.gaveUp({ matrixId: r.matrixId, target: r.target, cell, repetition: r.repetition }, why, r.attempts);
  }

  private async drainFailed(q: Queue<unknown, unknown>): Promise<number> {
    const jobs = await q.getJobs(['failed'], 0, BATCH - 1, true);
    if (jobs.length === 0) return 0;
    const runs: StoredRun[] = [];
    for (const job of jobs) {
      const run = this.fromFailed(job);
      if (run) runs.push(run);
    }
    const changed = this.deps.store.storeRuns(runs);
    this.deps.onStored?.(runs);
    // Removed only once stored, as above.
    await Promise.all(jobs.map((job) => (job.id === undefined ? Promise.resolve(0) : q.remove(job.id))));
    if (changed.size > 0) this.deps.onChange(changed);
    return jobs.length;
  }

  private fromFailed(job: Job<unknown, unknown>): StoredRun | null {
    const data = RunJob.safeParse(job.data);
    if (!data.success) {
      this.deps.log(`collector: dropping job ${job.id ?? '?'} whose data is not a run job (${data.error.issues[0]?.message ?? 'invalid'})`);
      return null;
    }
    // attemptsStarted also counts the start that only found the job over its stall limit.
    const why = `the run was given up after ${job.attemptsMade} attempt(s) (${job.stalledCounter} by agents that died): ${job.failedReason || 'no reason recorded'}`;
    return this.gaveUp(data.data, why, Math.max(1, job.attemptsMade));
  }

  private gaveUp(data: Pick<RunJob, 'matrixId' | 'target' | 'cell' | 'repetition'>, message: string, attempts: number): StoredRun {
    const target = this.deps.store.getMatrix(data.matrixId)?.targets.find((t) => t.target === data.target);
    return {
      kind: 'gave-up',
      matrixId: data.matrixId,
      target: data.target,
      cell: data.cell,
      repetition: data.repetition,
      machine: target?.machine ?? '(unknown)',
      message,
      attempts,
    };
  }
}
