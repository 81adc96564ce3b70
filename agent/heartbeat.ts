/**
 * The agent's pulse: every beat rewrites its registry entry (fingerprint, labels, current run),
 * which Redis stamps with its own time (liveness never depends on this machine's clock), and
 * extends its host lock. A beat that cannot reach Redis is retried at the next one (RedisHealth
 * logs the outage); the host lock's local deadline decides when a run must be abandoned meanwhile.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { RedisConnection } from '../queue/redis.js';
import { removeStatus, writeStatus, type AgentStatus } from '../queue/registry.js';
import type { HostLock } from './host-lock.js';
import { messageOf } from '../contract/errors.js';
import { isConnectionError } from '../queue/redis-health.js';

export interface HeartbeatOptions {
  readonly redis: RedisConnection;
  readonly prefix: string;
  readonly intervalMs: number;
  readonly lock: HostLock;
  /** The entry to write now. */
  readonly status: () => AgentStatus;
  readonly busy: () => boolean;
  readonly log: (line: string) => void;
}

/**
 * A clock further off the Redis server's than this is logged: liveness does not care, but the
 * timestamps in this agent's results are off by as much.
 */
const SKEW_WARNING_MS = 60_000;

export class Heartbeat {
  private timer: NodeJS.Timeout | undefined;
  private beating: Promise<void> | undefined;
  private failing = false;
  private skewLogged = false;

  constructor(private readonly opts: HeartbeatOptions) {}

  /** Writes a first entry at once, so the agent is listed before its first run. */
  async start(): Promise<void> {
    await this.beat();
    this.timer = setInterval(() => {
      // While Redis is away a beat waits for the reconnect; the deadline is checked regardless.
      this.opts.lock.checkDeadline(this.opts.busy());
      this.beating ??= this.beat().finally(() => {
        this.beating = undefined;
      });
    }, this.opts.intervalMs);
  }

  private async beat(): Promise<void> {
    const { redis, prefix, lock } = this.opts;
    try {
      await lock.refresh(this.opts.busy());
      const status = this.opts.status();
      const serverMs = await writeStatus(redis, prefix, status);
      const skew = Date.parse(status.lastHeartbeat) - serverMs;
      if (Math.abs(skew) > SKEW_WARNING_MS && !this.skewLogged) {
        this.opts.log(`heartbeat: this machine's clock is ${Math.round(skew / 1000)} s off the Redis server's; liveness is judged by Redis, but results' timestamps carry this clock (run NTP)`);
        this.skewLogged = true;
      }
      if (this.failing) this.opts.log('heartbeat: working again');
      this.failing = false;
    } catch (err) {
      lock.checkDeadline(this.opts.busy());
      // Redis gone is the agent's RedisHealth's to say, once per outage.
      if (!this.failing && !isConnectionError(err)) {
        this.opts.log(`heartbeat: ${messageOf(err)}`);
        this.failing = true;
      }
    }
  }

  /** Stops beating and removes the entry, so the agent leaves the list at once. */
  async stop(agentId: string): Promise<void> {
    clearInterval(this.timer);
    // A beat stuck on an unreachable Redis must not hold the shutdown.
    if (this.beating) await Promise.race([this.beating, sleep(this.opts.intervalMs)]);
    await removeStatus(this.opts.redis, this.opts.prefix, agentId).catch(() => undefined);
  }
}
