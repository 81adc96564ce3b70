/**
 * Collects results. An agent completes each run's job with the run's report, which BullMQ's
 * completion script appends to the queue's event stream (see queue/jobs.ts); jobs that gave up (their
 * agents died or abandoned them too often) sit in their queue's failed set. The collector reads
 * the event streams of the queues in use in batches, stores each batch in one SQLite transaction
 * together with how far each stream has been read (duplicates ignored), and only then trims what
 * it stored from the streams or removes the failed jobs. A crash at any point loses nothing and
 * doubles nothing; at start it goes on from the positions in the database, and so finds what
 * completed while the coordinator was down.
 *
 * Why XREAD and a cursor rather than a consumer group: there is one coordinator, and the cursor
 * commits with the runs it covers, which a group's acknowledgements (a second store) cannot.
 *
 * Anyone who can write to Redis can append to a stream: only what verify.ts finds this
 * coordinator issued is stored, the rest dropped and counted.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { messageOf } from '../../contract/errors.js';
import { fingerprintHash, keepFingerprint, MachineFingerprint } from '../../contract/fingerprint.js';
import { adaptiveRepetitions } from '../../contract/matrix.js';
import { RunResultSansFingerprint } from '../../contract/result.js';
import { scheduleInfo } from '../../contract/schedule.js';
import { ANY_TARGET } from '../../queue/jobs.js';
import { fingerprintsKey } from '../../queue/keys.js';
import type { RedisConnection } from '../../queue/redis.js';
import { isConnectionError } from '../../queue/redis-health.js';
import type { CoordinatorParts } from '../matrices/index.js';
import type { StoredRun } from '../store/index.js';
import { DropLog } from './drop-log.js';
import { boundToMachine, drop, failedRun, field, gaveUp, issuedCheck, reportOf, type DropReason, type Drops, type Report, type Verification } from './verify.js';

/**
 * Event stream entries per read and stream: one SQLite transaction each. A run makes a few
 * events (at least waiting and completed; more when retried), so this is up to 1000 runs.
 */
const BATCH = 2000;
/** Failed jobs per look at a queue's failed set. */
const FAILED_BATCH = 500;
/**
 * After a read that found less than a full batch, wait this long before the next: under load,
 * batches of tens instead of a few, for a latency that queueing dwarfs anyway.
 */
const GATHER_MS = 25;
/** XINFO STREAM's answer: names and values, alternating. */
const StreamInfo = z.array(z.unknown());
const FirstEntry = z.tuple([z.string(), z.array(z.string())]).nullable();
/** A pipeline of counts: [error, count] each. */
const PipelineCounts = z.array(z.tuple([z.instanceof(Error).nullable(), z.number().int()]));

/** Orders stream entry ids (`ms-seq`). */
function compareIds(a: string, b: string): number {
  const [am = 0n, as = 0n] = a.split('-').map(BigInt);
  const [bm = 0n, bs = 0n] = b.split('-').map(BigInt);
  return am !== bm ? (am < bm ? -1 : 1) : as === bs ? 0 : as < bs ? -1 : 1;
}

/** Cancelled and finished matrices may still have runs in flight for a while. */
const LATE_RESULTS_MS = 3_600_000;

export interface CollectorDeps extends Verification, CoordinatorParts {
  /** For trimming; the blocking reads use a connection of their own, duplicated from this one. */
  readonly redis: RedisConnection;
  /** Told which matrices changed, after each stored batch. */
  readonly onChange: (matrixIds: ReadonlySet<string>) => void;
  /**
   * Told that reports on a target's queue were lost before they were read (the stream was
   * trimmed past the cursor, or Redis lost it): the runs not stored must be queued again.
   */
  readonly onLost: (target: string) => Promise<void>;
  /** Told of every run result as it is stored (run-duration metrics). */
  readonly onStored?: (runs: readonly StoredRun[]) => void;
  readonly log: (line: string) => void;
  /** How long a read waits for new results; every failed set is looked at every failedSweepMs(pollMs). */
  readonly pollMs: number;
  /** Told of every report or failed job dropped (a metric). */
  readonly onDropped?: (reason: DropReason, n: number) => void;
  /** Reads the enrollments again (Enrollment.sync), when a report names a key not known yet. */
  readonly refreshKeys?: () => Promise<void>;
  /** Whether Redis answers (queue/redis-health.ts): while it does not, a read that waits is no sign of a stuck connection. */
  readonly reachable?: () => boolean;
  /** Told each time the watchdog re-made the reading connection (a metric). */
  readonly onRestart?: () => void;
}

/**
 * How long the read loop may go without finishing a round, Redis answering, before its
 * connection is re-made: a round waits at most pollMs for results, so this is many rounds.
 */
export function collectorWatchdogMs(pollMs: number): number {
  return Math.max(10_000, 20 * pollMs);
}

/**
 * How often every failed set is sized even with no `failed` event seen: sizing them every poll
 * was a third of what an idle coordinator did at 1,000 hosts (bench:dispatch --profile).
 */
export function failedSweepMs(pollMs: number): number {
  return Math.max(1_000, 20 * pollMs);
}

/** A target's queue, by the keys the collector reads: its event stream and its failed set. */
interface QueueKeys {
  readonly target: string;
  readonly events: string;
  readonly failed: string;
}

export class Collector {
  private running = false;
  private loop: Promise<void> | undefined;
  private failing = false;
  /** A blocking XREAD holds its connection: never the one the API and the queues share. */
  private reader: RedisConnection | undefined;
  /** Event stream key -> the last entry stored; from the database at start, then kept here. */
  private readonly cursors: Map<string, string>;
  /** Fingerprint hash -> fingerprint, for those met lately (bounded). */
  private readonly fingerprints = new Map<string, MachineFingerprint>();
  /**
   * The queues whose streams are read, with their keys: `any` and the hosts of recent matrices,
   * made again only when the store's activeTargets answer changes.
   */
  private queues: readonly QueueKeys[] = [];
  private activeSet: ReadonlySet<string> | undefined;
  /**
   * Targets whose failed set is looked at next round: those whose event stream said a job failed,
   * and all of them every failedSweepMs (a job failed while its event was trimmed unread, or
   * before this process read the stream).
   */
  private readonly failedDue = new Set<string>();
  private nextFailedSweep = 0;
  /** Streams looked at for lost reports, once per process: before their first read. */
  private readonly checked = new Set<string>();
  /**
   * When the read loop last finished a round (or Redis was last unreachable). A blocking read on
   * a connection that fell silent (packets dropped, nothing closed) never returns, and ioredis
   * never re-makes a connection that has not closed: the watchdog does, on this clock.
   */
  private lastRound = 0;
  private watchdog: NodeJS.Timeout | undefined;
  private readonly dropLog: DropLog;

  constructor(private readonly deps: CollectorDeps) {
    this.cursors = deps.store.streamCursors();
    this.dropLog = new DropLog(deps.log);
  }

  start(): void {
    this.running = true;
    this.reader = this.newReader();
    this.lastRound = Date.now();
    this.loop = this.run();
    const bound = collectorWatchdogMs(this.deps.pollMs);
    this.watchdog = setInterval(() => {
      this.checkProgress(bound);
    }, Math.min(1_000, bound / 4));
    this.watchdog.unref();
  }

  private newReader(): RedisConnection {
    const reader = this.deps.redis.duplicate();
    reader.on('error', () => undefined);
    return reader;
  }

  private checkProgress(bound: number): void {
    if (!this.running) return;
    // Redis away: the reads wait for it, and RedisHealth says so; the clock starts again when it is back.
    if (this.deps.reachable?.() === false) this.lastRound = Date.now();
    const stuck = Date.now() - this.lastRound;
    if (stuck < bound) return;
    const old = this.reader;
    this.reader = this.newReader();
    this.lastRound = Date.now();
    this.deps.log(`collector: no read of the results finished for ${String(Math.round(stuck / 1000))} s while Redis answers: re-making its connection`);
    this.deps.onRestart?.();
    // Ends the read that never returned; the loop goes on with the new connection.
    old?.disconnect();
  }

  async stop(): Promise<void> {
    this.running = false;
    clearInterval(this.watchdog);
    // Ends a read blocked on Redis (which may be gone) at once; the loop sees `running` and stops.
    this.reader?.disconnect();
    await this.loop;
    this.dropLog.endQuiet(Date.now(), true);
  }

  /** A method, not the field: the field is read again after each await. */
  private stopping(): boolean {
    return !this.running;
  }

  private async run(): Promise<void> {
    while (this.running) {
      const reader = this.reader;
      if (!reader) break;
      try {
        const n = await this.drainOnce(reader);
        this.lastRound = Date.now();
        if (n > 0 && n < BATCH) await sleep(GATHER_MS);
        if (this.failing) this.deps.log('collector: working again');
        this.failing = false;
      } catch (err) {
        if (this.stopping()) break;
        this.lastRound = Date.now();
        // The watchdog ended this read to re-make its connection: nothing to report.
        if (reader !== this.reader) continue;
        // Redis gone is the coordinator's RedisHealth's to say, once per outage.
        if (!this.failing && !isConnectionError(err)) {
          this.deps.log(`collector: ${messageOf(err)} (retrying)`);
          this.failing = true;
        }
        await sleep(Math.max(this.deps.pollMs, 500));
      }
    }
  }

  /** One read of the event streams (waiting up to pollMs for it), and the failed sets due. */
  private async drainOnce(reader: RedisConnection): Promise<number> {
    this.dropLog.endQuiet();
    const active = this.deps.store.activeTargets(LATE_RESULTS_MS);
    if (active !== this.activeSet) {
      this.activeSet = active;
      this.queues = [ANY_TARGET, ...[...active].filter((t) => t !== ANY_TARGET)].map((target) => {
        const q = this.deps.dispatcher.queue(target);
        return { target, events: q.toKey('events'), failed: q.toKey('failed') };
      });
    }
    let n = 0;
    if (Date.now() >= this.nextFailedSweep) {
      this.nextFailedSweep = Date.now() + failedSweepMs(this.deps.pollMs);
      // One round trip sizes every failed set: a look at each queue in turn cost a hundred hosts
      // a hundred round trips per poll (bench:dispatch, idle coordinator CPU).
      const sizes = await this.failedSizes(this.queues);
      for (const [i, { target }] of this.queues.entries()) if (sizes[i] !== 0) this.failedDue.add(target);
    }
    for (const target of [...this.failedDue]) {
      this.failedDue.delete(target);
      const drained = await this.drainFailed(target);
      // More than one look holds: the rest at the next round.
      if (drained === FAILED_BATCH) this.failedDue.add(target);
      n += drained;
    }
    return n + (await this.drainEvents(reader));
  }

  private async drainEvents(reader: RedisConnection): Promise<number> {
    const keys = this.queues.map((q) => q.events);
    for (const { target, events: key } of this.queues) {
      if (this.checked.has(key)) continue;
      if (await this.lostSinceCursor(key)) {
        this.deps.log(`collector: reports on queue ${target} were lost before they were read (${key} was trimmed or lost); queueing the runs not stored again`);
        await this.deps.onLost(target);
      }
      this.checked.add(key);
    }
    const targetOf = new Map(this.queues.map((q) => [q.events, q.target]));
    const from = keys.map((k) => this.cursors.get(k) ?? '0-0');
    const read = await reader.xread('COUNT', BATCH, 'BLOCK', this.deps.pollMs, 'STREAMS', ...keys, ...from);
    if (!read) return 0;
    const readTo = new Map<string, string>();
    let n = 0;
    const collect = (): { reports: Report[]; drops: Drops } => {
      const reports: Report[] = [];
      const drops: Drops = new Map();
      const issued = issuedCheck(this.deps);
      for (const [stream, entries] of read) {
        const last = entries.at(-1);
        if (!last) continue;
        readTo.set(stream, last[0]);
        n = Math.max(n, entries.length);
        for (const [id, fields] of entries) {
          // Written by the same script that moved the job: it is in the failed set by now.
          if (field(fields, 'event') === 'failed') this.failedDue.add(targetOf.get(stream) ?? ANY_TARGET);
          const report = reportOf(this.deps, stream, id, fields, drops);
          if (!report) continue;
          const why = issued(report, targetOf.get(stream));
          if (why === null) reports.push(report);
          else drop(drops, why, `${stream} entry ${id} (matrix ${report.matrixId}, cell ${report.cellId}, target ${report.target}, repetition ${report.repetition}, attempt ${report.attempts})`);
        }
      }
      return { reports, drops };
    };
    let { reports, drops } = collect();
    // A key enrolled a moment ago (its approval not read yet): looked for once more before its reports are dropped.
    // Once per batch, however many junk reports name unknown keys: two hash reads, and unchanged announcements are not verified again.
    if (drops.has('unenrolled') && this.deps.refreshKeys) {
      await this.deps.refreshKeys();
      ({ reports, drops } = collect());
    }
    await this.resolveFingerprints(new Set(reports.map((r) => r.fingerprint)));
    reports = boundToMachine(reports, (hash) => this.fingerprints.get(hash), drops);
    this.reportDrops(drops, 'report');
    const runs: StoredRun[] = [];
    const infoOf = this.scheduleInfoCheck();
    for (const r of reports) {
      const run = this.fromReport(r);
      if (run?.kind === 'result' && run.result.state === 'ok') {
        runs.push({ ...run, result: { ...run.result, info: { ...run.result.info, ...infoOf(run.matrixId) } } });
      } else if (run) {
        runs.push(run);
      }
    }
    const changed = this.deps.store.storeRuns(runs, readTo);
    for (const [key, id] of readTo) this.cursors.set(key, id);
    this.deps.onStored?.(runs);
    if (changed.size > 0) this.deps.onChange(changed);
    // What is stored goes from Redis; a failed trim is retried with the next batch's.
    const trim = this.deps.redis.pipeline();
    for (const [key, id] of readTo) trim.xtrim(key, 'MINID', '~', id);
    await trim.exec();
    return n;
  }

  /**
   * Whether entries after the stored cursor are gone: the stream starts after the cursor (the
   * coordinator's own trim always keeps the cursor's entry), or it is gone although reports were
   * read from it. Only a coordinator down far longer than its queues allow (see
   * eventStreamLength), or a Redis that lost its data, gets here.
   */
  private async lostSinceCursor(key: string): Promise<boolean> {
    const cursor = this.cursors.get(key);
    if (cursor === undefined) return false;
    let raw: unknown;
    try {
      raw = await this.deps.redis.xinfo('STREAM', key);
    } catch (err) {
      if (err instanceof Error && /no such key/i.test(err.message)) return true;
      throw err;
    }
    const info = StreamInfo.parse(raw);
    const value = (name: string) => info[info.indexOf(name) + 1];
    const first = FirstEntry.parse(value('first-entry'));
    const next = first === null ? z.string().parse(value('last-generated-id')) : first[0];
    return compareIds(next, cursor) > 0;
  }

  /** The metric, and a line per reason and episode. */
  private reportDrops(drops: Drops, what: string): void {
    for (const [reason, { n }] of drops) this.deps.onDropped?.(reason, n);
    this.dropLog.note(what, drops);
  }

  /** Looks up, checks and stores the fingerprints the agents published that are not known here yet. */
  private async resolveFingerprints(hashes: ReadonlySet<string>): Promise<void> {
    const missing = [...hashes].filter((h) => !this.fingerprints.has(h));
    if (missing.length === 0) return;
    const jsons = await this.deps.redis.hmget(fingerprintsKey(this.deps.prefix), ...missing);
    const found: { hash: string; json: string; fingerprint: MachineFingerprint }[] = [];
    missing.forEach((hash, i) => {
      const json = jsons[i];
      if (typeof json !== 'string' || fingerprintHash(json) !== hash) return;
      let parsed: unknown;
      try {
        parsed = JSON.parse(json);
      } catch {
        return;
      }
      const fingerprint = MachineFingerprint.safeParse(parsed);
      if (fingerprint.success) found.push({ hash, json, fingerprint: fingerprint.data });
    });
    // In one transaction: the first batch from 1,000 hosts brings 1,000 of them.
    this.deps.store.putFingerprints(found);
    for (const f of found) keepFingerprint(this.fingerprints, f.hash, f.fingerprint);
  }

  /** The schedule a matrix's runs record (contract/schedule.ts), looked up once per matrix and batch. */
  private scheduleInfoCheck(): (matrixId: string) => Record<string, string | number> {
    const infos = new Map<string, Record<string, string | number>>();
    return (matrixId) => {
      let info = infos.get(matrixId);
      if (info === undefined) {
        const spec = this.deps.store.getMatrix(matrixId)?.spec;
        info = spec ? scheduleInfo(spec.order, spec.seed, adaptiveRepetitions(spec)) : {};
        infos.set(matrixId, info);
      }
      return info;
    };
  }

  private fromReport(r: Report): StoredRun | null {
    const result = RunResultSansFingerprint.safeParse(r.result);
    const fingerprint = this.fingerprints.get(r.fingerprint);
    if (result.success && fingerprint && result.data.cellId === r.cellId && result.data.repetition === r.repetition) {
      return {
        kind: 'result',
        matrixId: r.matrixId,
        target: r.target,
        result: { ...result.data, fingerprint },
        attempts: r.attempts,
        fingerprintHash: r.fingerprint,
        ...(r.signedBy === undefined ? {} : { signedBy: r.signedBy }),
      };
    }
    const why = !result.success
      ? `the agent's result is invalid: ${result.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`
      : fingerprint
        ? 'the agent returned the result of another run'
        : `the agent's fingerprint ${r.fingerprint} is missing from Redis or invalid`;
    const cell = this.deps.store.cell(r.matrixId, r.cellId);
    if (!cell) return null;
    // Not abandoned: the run finished, but its report cannot be stored (an agent of another version?).
    return gaveUp(this.deps.store, 'INTERNAL', { matrixId: r.matrixId, target: r.target, cell, repetition: r.repetition }, why, r.attempts);
  }

  /** How many jobs each target's failed set holds (BullMQ keeps it as a sorted set). */
  private async failedSizes(queues: readonly QueueKeys[]): Promise<number[]> {
    const pipe = this.deps.redis.pipeline();
    for (const q of queues) pipe.zcard(q.failed);
    return PipelineCounts.parse(await pipe.exec()).map(([err, n]) => {
      if (err) throw err;
      return n;
    });
  }

  private async drainFailed(target: string): Promise<number> {
    const q = this.deps.dispatcher.queue(target);
    const jobs = await q.getJobs(['failed'], 0, FAILED_BATCH - 1, true);
    if (jobs.length === 0) return 0;
    const runs: StoredRun[] = [];
    const drops: Drops = new Map();
    const issued = issuedCheck(this.deps);
    for (const job of jobs) {
      const run = failedRun(this.deps, job, target, drops, issued);
      if (run) runs.push(run);
    }
    this.reportDrops(drops, 'failed job');
    const changed = this.deps.store.storeRuns(runs);
    this.deps.onStored?.(runs);
    // Removed only once stored, as above.
    await Promise.all(jobs.map((job) => (job.id === undefined ? Promise.resolve(0) : q.remove(job.id))));
    if (changed.size > 0) this.deps.onChange(changed);
    return jobs.length;
  }

}
