/**
 * Whether this process reaches Redis, kept in one place for the coordinator and the agent.
 *
 * Why one place: with Redis stopped, every connection (ours, BullMQ's duplicates for blocking
 * reads, the collector's reader) fails each reconnect attempt, and each of their users used to
 * say so, a line or a stack dump per attempt: 243 non-JSON lines from a coordinator and 142
 * lines from an agent in 20 s. An outage is one state with a start and an end, so it is logged
 * as such: one line when Redis is lost, one "still unreachable" at growing intervals, one when
 * it is back. Everything else stays quiet about connection errors (isConnectionError) and leaves
 * them to this module; /healthz and the agent's health file read the state from here.
 *
 * The state follows the main connection's events, and a PING every `probeMs` catches a Redis
 * that keeps the connection open but answers nothing (paused, swapping, a network partition
 * that drops packets instead of refusing them); with `reconnectSilentMs` (the coordinator), a
 * main connection silent that long is re-made, as the agent's watchdog re-makes its own.
 */
import type { RedisConnection } from './redis.js';
import { messageOf } from '../contract/errors.js';

/** A line for people, fields for machines: what log/index.ts's Log takes (this layer cannot import it). */
export type HealthLog = (message: string, fields?: Readonly<Record<string, unknown>>) => void;

export interface RedisHealthView {
  readonly reachable: boolean;
  /** Since when it is (un)reachable, ISO 8601. */
  readonly since: string;
  /** Why it is unreachable, one line naming Redis; null while reachable. */
  readonly reason: string | null;
}

export interface RedisHealthOptions {
  /** The URL as it may be shown (shownUrl). */
  readonly url: string;
  /** Redis back. */
  readonly log: HealthLog;
  /** Redis lost, and still unreachable (default: `log`). */
  readonly warn?: HealthLog;
  /** How often the main connection is probed with a PING. */
  readonly probeMs: number;
  /**
   * Re-make the main connection when its PINGs have gone unanswered this long while it stays
   * open: ioredis never re-makes a connection that has not closed, so one whose packets vanish
   * (a partition that drops them, a NAT that forgot it) would stay stuck for good. Unset: never
   * (the agent's watchdog re-makes all of its connections instead).
   */
  readonly reconnectSilentMs?: number;
  /** Told each time the main connection was re-made for its silence (a metric). */
  readonly onSilentReconnect?: () => void;
}

/** A PING unanswered this long counts as Redis gone, even on an open connection. */
const PROBE_TIMEOUT_MS = 5_000;
/** The first "still unreachable" line; then twice as long each time, up to the cap. */
const FIRST_REMINDER_MS = 10_000;
const MAX_REMINDER_MS = 15 * 60_000;

/** Network errors (Node's codes) that a reconnect may cure. */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'EHOSTDOWN', 'ENETUNREACH', 'ENETDOWN']);
/** ioredis's and Redis's words for a connection that is gone or a server not serving yet. */
const CONNECTION_MESSAGES = /Connection is closed|Stream isn't writeable|connect ETIMEDOUT|^LOADING |^MASTERDOWN |^TRYAGAIN /;

/** True for an error that says only that Redis cannot be reached now: RedisHealth's to report. */
export function isConnectionError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = 'code' in err && typeof err.code === 'string' ? err.code : '';
  return NETWORK_CODES.has(code) || CONNECTION_MESSAGES.test(err.message);
}

/** An error as one bounded line (ioredis's messages can carry a whole server reply). */
const oneLine = (err: unknown): string => messageOf(err).replace(/\s+/g, ' ').slice(0, 200);

/** What a bounded wait ended with: the work settled, Redis is unreachable, or the time ran out. */
export type Settled = 'done' | 'unreachable' | 'timeout';

export class RedisHealth {
  private reachable = true;
  private since = Date.now();
  /** `cause` with the URL, as /healthz shows it. */
  private reason: string | null = null;
  /** The last error while unreachable. */
  private cause = '';
  private reminderAt = 0;
  private reminderEvery = FIRST_REMINDER_MS;
  private probing = false;
  /** Since when PINGs go unanswered on the open main connection; null when they do not. */
  private silentSince: number | null = null;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  /** Called on every change of state: bounded waits end early when Redis goes. */
  private readonly watchers = new Set<() => void>();

  constructor(private readonly o: RedisHealthOptions) {}

  /** Follows the main connection (`primary`) or another one (a duplicate: only its errors count). */
  watch(redis: RedisConnection, primary: boolean): void {
    redis.on('error', (err: unknown) => {
      this.observe(err);
    });
    if (!primary) return;
    redis.on('close', () => {
      this.lost('the connection closed');
    });
    redis.on('ready', () => {
      this.back();
    });
  }

  /**
   * Starts probing `redis` (the main connection) every probeMs. Only while it is connected: a
   * PING on a connection being re-made would just wait in ioredis's queue.
   */
  start(redis: RedisConnection): void {
    this.timer = setInterval(() => {
      this.remind();
      this.reconnectIfSilent(redis);
      if (this.probing || redis.status !== 'ready') return;
      this.probing = true;
      let timeout: NodeJS.Timeout | undefined;
      const unanswered = new Promise<never>((_, reject) => {
        timeout = setTimeout(() => {
          reject(new Error(`no answer to PING within ${PROBE_TIMEOUT_MS / 1000} s`));
        }, PROBE_TIMEOUT_MS);
      });
      // A PING that outlives its timeout is still awaited (one at a time): its answer means Redis is back.
      const ping = redis.ping().then(() => {
        this.back();
      });
      Promise.race([ping, unanswered])
        .catch((err: unknown) => {
          // Unanswered on a connection still open: silent, not closed (a closed one is not ready).
          if (redis.status === 'ready') this.silentSince ??= Date.now() - PROBE_TIMEOUT_MS;
          this.lost(oneLine(err));
        })
        .finally(() => {
          clearTimeout(timeout);
        });
      ping
        .catch(() => undefined)
        .finally(() => {
          this.probing = false;
        });
    }, this.o.probeMs);
    this.timer.unref();
  }

  private reconnectIfSilent(redis: RedisConnection): void {
    const bound = this.o.reconnectSilentMs;
    if (bound === undefined || this.silentSince === null || this.stopped) return;
    if (redis.status !== 'ready') {
      // Closed meanwhile: ioredis re-makes it by itself.
      this.silentSince = null;
      return;
    }
    const silentMs = Date.now() - this.silentSince;
    if (silentMs < bound) return;
    this.silentSince = null;
    (this.o.warn ?? this.o.log)(`Redis at ${this.o.url} answered nothing for ${Math.round(silentMs / 1000)} s on a connection still open: re-making it`, {
      event: 'redis.silent-reconnect',
      url: this.o.url,
      silentMs,
    });
    this.o.onSilentReconnect?.();
    // Reconnects at once; commands sent and unanswered are sent again on the new connection.
    redis.disconnect(true);
  }

  /** No more lines or probes: the process is stopping and closes its connections on purpose. */
  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
  }

  view(): RedisHealthView {
    return { reachable: this.reachable, since: new Date(this.since).toISOString(), reason: this.reason };
  }

  get isReachable(): boolean {
    return this.reachable;
  }

  /**
   * An error from any user of Redis (a BullMQ queue or worker, a duplicate connection): a
   * connection error marks Redis lost and says nothing more; anything else is the caller's to log.
   * True when it was a connection error.
   */
  observe(err: unknown): boolean {
    if (!isConnectionError(err)) return false;
    this.lost(oneLine(err));
    return true;
  }

  /**
   * Waits for `work` (which needs Redis) while Redis is reachable, up to `ms`: a stopping process
   * must not wait for a Redis that is gone, and ioredis never settles a command queued on a
   * connection that is being re-made. A rejection of `work` counts as done (callers log their own).
   */
  async settle(work: Promise<unknown>, ms: number): Promise<Settled> {
    if (!this.reachable) {
      work.catch(() => undefined);
      return 'unreachable';
    }
    let timer: NodeJS.Timeout | undefined;
    let watcher: (() => void) | undefined;
    try {
      return await Promise.race([
        work.then(
          (): Settled => 'done',
          (): Settled => 'done',
        ),
        new Promise<Settled>((resolve) => {
          timer = setTimeout(() => {
            resolve('timeout');
          }, Math.max(0, ms));
          watcher = () => {
            if (!this.reachable) resolve('unreachable');
          };
          this.watchers.add(watcher);
        }),
      ]);
    } finally {
      clearTimeout(timer);
      if (watcher) this.watchers.delete(watcher);
    }
  }

  private lost(reason: string): void {
    // The latest reason is the one worth showing (refused, then timing out, ...).
    this.cause = reason;
    if (!this.reachable) {
      this.reason = this.describe(reason);
      return;
    }
    this.reachable = false;
    this.since = Date.now();
    this.reason = this.describe(reason);
    this.reminderEvery = FIRST_REMINDER_MS;
    this.reminderAt = this.since + this.reminderEvery;
    for (const w of [...this.watchers]) w();
    if (this.stopped) return;
    (this.o.warn ?? this.o.log)(`${this.reason}; reconnecting with backoff, runs and results wait in Redis meanwhile`, {
      event: 'redis.lost',
      url: this.o.url,
      reason,
    });
  }

  private back(): void {
    this.silentSince = null;
    if (this.reachable) return;
    const downMs = Date.now() - this.since;
    this.reachable = true;
    this.since = Date.now();
    this.reason = null;
    for (const w of [...this.watchers]) w();
    if (this.stopped) return;
    this.o.log(`Redis at ${this.o.url} reachable again after ${(downMs / 1000).toFixed(1)} s`, { event: 'redis.back', url: this.o.url, downMs });
  }

  private remind(): void {
    const now = Date.now();
    if (this.reachable || this.stopped || now < this.reminderAt) return;
    const downMs = now - this.since;
    this.reminderEvery = Math.min(MAX_REMINDER_MS, this.reminderEvery * 2);
    this.reminderAt = now + this.reminderEvery;
    (this.o.warn ?? this.o.log)(`Redis at ${this.o.url} still unreachable after ${Math.round(downMs / 1000)} s (${this.cause}); next word in ${Math.round(this.reminderEvery / 1000)} s unless it is back`, {
      event: 'redis.down',
      url: this.o.url,
      downMs,
      reason: this.cause,
    });
  }

  private describe(reason: string): string {
    return `Redis at ${this.o.url} unreachable: ${reason}`;
  }
}
