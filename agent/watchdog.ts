/**
 * A watchdog on progress, not on connection state. BullMQ's tracker has several ways for a
 * worker to report itself running while it consumes nothing (a blocking connection stuck after
 * a Sentinel switch-over or a long outage: bullmq #3088, #4378, #4479, #4585), and no connection
 * event says so. What does: runs wait on this agent's queues, the agent is idle, and it has taken
 * none for a while. Then the agent recreates its workers, and with them their blocking
 * connections.
 *
 * It also ends what nothing else would: connections that stay open while Redis answers nothing
 * on them (a partition that drops packets), which ioredis never re-makes by itself.
 *
 * Measured here (BullMQ 6.7, Redis 7.0, tests/watchdog.test.ts): CLIENT KILL of both blocking
 * connections, Redis frozen 8 s (longer than the 5 s drain delay), and blocking connections
 * whose packets vanish were all recovered by BullMQ itself (its blocking read has a timer of its
 * own); all of an agent's connections falling silent was not, and is what the watchdog ends.
 */
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Runs seen waiting for this long, none taken as long, and the agent idle: the watchdog recreates
 * the workers: twice the stall timeout (within which BullMQ itself notices a job whose worker
 * died), at least 10 s (a healthy idle worker takes a waiting job within milliseconds; BullMQ's
 * blocking read returns at least every 5 s, its drain delay).
 */
export function watchdogBound(stallTimeoutMs: number): number {
  return Math.max(10_000, 2 * stallTimeoutMs);
}

export interface WatchdogOptions {
  /** No run taken for this long, and runs seen waiting for as long, the agent idle: recreate. */
  readonly boundMs: number;
  readonly intervalMs: number;
  /** Runs waiting (not started) on this agent's queues. */
  readonly waiting: () => Promise<number>;
  /** No job in the agent's hands (one being checked, waiting for the host lock or measured). */
  readonly idle: () => boolean;
  /** When the agent last took or finished a job (ms since the epoch). */
  readonly lastActivity: () => number;
  /** While Redis is unreachable nothing can be taken, and RedisHealth says so already. */
  readonly reachable: () => boolean;
  /**
   * How long Redis has not answered on a connection that still counts as open (0 otherwise):
   * ioredis reconnects when a connection closes, never when it only falls silent (packets
   * dropped by a partition or a lost NAT entry), so nothing else would ever end this.
   */
  readonly silentFor: () => number;
  /** `waiting` is -1 when Redis was silent (runs waiting could not be counted). */
  readonly restart: (waiting: number, idleMs: number) => Promise<void>;
  readonly log: (line: string) => void;
}

export class Watchdog {
  private timer: NodeJS.Timeout | undefined;
  private checking = false;
  /** A restart counts as activity: the next is at least boundMs later. */
  private restartedAt = 0;
  /** When this idle agent first saw runs waiting (`at`), seen at every look since, none taken since `since`. */
  private seenWaiting: { readonly since: number; readonly at: number } | undefined;

  constructor(private readonly o: WatchdogOptions) {}

  start(): void {
    this.timer = setInterval(() => {
      if (this.checking) return;
      this.checking = true;
      this.check()
        // The count itself failed: Redis is away, which RedisHealth reports.
        .catch(() => undefined)
        .finally(() => {
          this.checking = false;
        });
    }, this.o.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private async check(): Promise<void> {
    const since = Math.max(this.o.lastActivity(), this.restartedAt);
    if (!this.o.reachable()) {
      this.seenWaiting = undefined;
      if (this.o.silentFor() >= this.o.boundMs && Date.now() - this.restartedAt >= this.o.boundMs) {
        this.restartedAt = Date.now();
        await this.o.restart(-1, this.o.silentFor());
      }
      return;
    }
    if (!this.o.idle()) {
      this.seenWaiting = undefined;
      return;
    }
    const looked = Date.now();
    // Not answered within the interval: connections silent while Redis still counts as reachable.
    // The next looks go on meanwhile, and find it unreachable once RedisHealth does (above).
    const waiting = await Promise.race([this.o.waiting(), sleep(this.o.intervalMs, undefined, { ref: false })]);
    if (waiting === undefined) return;
    // Looked at again after the await: a job may have been taken meanwhile.
    if (waiting === 0 || !this.o.idle() || this.o.lastActivity() > since) {
      this.seenWaiting = undefined;
      return;
    }
    // Runs queued just now to an agent idle for long are not late: they must have waited the
    // bound untaken. A worker that wakes after its process was starved or stopped finds the runs
    // and this check at once, and recreating it then would drop the run it is taking.
    if (this.seenWaiting?.since !== since) this.seenWaiting = { since, at: looked };
    if (Date.now() - this.seenWaiting.at < this.o.boundMs || Date.now() - since < this.o.boundMs) return;
    this.seenWaiting = undefined;
    this.restartedAt = Date.now();
    await this.o.restart(waiting, Date.now() - since);
  }
}
