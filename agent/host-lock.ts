/**
 * Never two measurements on one kernel at once: a Redis lock keyed by the host id (the kernel's
 * boot id), held by one agent, with a TTL its heartbeat refreshes.
 *
 * Why Redis and not a file lock under the scratch directory: agents sharing a kernel may run in
 * different containers that share neither a filesystem nor a pid namespace, and Node has no
 * flock(); the boot id is what they surely share, and Redis is what every agent already
 * reaches. A dead agent's lock lapses by itself after the TTL. Whoever takes the lock then runs
 * the journal recovery before measuring, so limits a dead agent changed are restored first.
 *
 * The lock is held across consecutive runs (no round trip per run) and let go when the agent
 * goes idle, or after `maxHoldMs` so other agents on the host get their turn.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { hostLockKey } from '../queue/keys.js';

/** Takes a free lock, or re-takes our own one whose local deadline passed before Redis expired it. */
const ACQUIRE = `local v = redis.call('GET', KEYS[1])
if v == false then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end
if v == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
return 0`;
/** Extends the TTL only if the lock is still ours: a lapsed lock must never be revived. */
const REFRESH = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end`;
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`;

export interface HostLockOptions {
  readonly prefix: string;
  readonly hostId: string;
  /** Who holds it, as shown in the lock's value. */
  readonly owner: string;
  readonly ttlMs: number;
  /** How often a waiting agent tries again. */
  readonly pollMs: number;
  /** Let go after holding this long while others may be waiting. */
  readonly maxHoldMs: number;
  /** Called after each acquisition, before any run: the journal recovery. */
  readonly onAcquired: () => Promise<void>;
  /** Called when a refresh finds the lock taken or lapsed while a run may be going on. */
  readonly onLost: () => void;
}

export class HostLock {
  private readonly key: string;
  private readonly token: string;
  private heldSince: number | null = null;
  /** Local deadline: past it, another agent may have the lock, whatever Redis says later. */
  private validUntil = 0;
  private yieldedAt = 0;

  constructor(
    private readonly redis: Redis,
    private readonly opts: HostLockOptions,
  ) {
    this.key = hostLockKey(opts.prefix, opts.hostId);
    this.token = `${opts.owner}/${randomUUID()}`;
  }

  get held(): boolean {
    return this.heldSince !== null && Date.now() < this.validUntil;
  }

  /** Waits until this agent holds the lock (or `signal` aborts, which throws). */
  async acquire(signal: AbortSignal): Promise<void> {
    if (this.held) return;
    this.heldSince = null;
    for (;;) {
      signal.throwIfAborted();
      // Right after yielding, give the others a full poll interval to take their turn.
      const sinceYield = Date.now() - this.yieldedAt;
      if (sinceYield < 2 * this.opts.pollMs) await sleep(2 * this.opts.pollMs - sinceYield, undefined, { signal });
      if (await this.tryOnce()) return;
      await sleep(this.opts.pollMs, undefined, { signal });
    }
  }

  /** One attempt; true when the lock is now ours (and the journal recovered). */
  async tryOnce(): Promise<boolean> {
    const started = Date.now();
    const ok = await this.redis.eval(ACQUIRE, 1, this.key, this.token, String(this.opts.ttlMs));
    if (ok !== 1) return false;
    this.heldSince = started;
    this.validUntil = started + this.opts.ttlMs;
    await this.opts.onAcquired();
    return true;
  }

  /** True when the holder should let others have a turn before its next run. */
  get shouldYield(): boolean {
    return this.heldSince !== null && Date.now() - this.heldSince > this.opts.maxHoldMs;
  }

  /** Heartbeat: extends the TTL; a lock found lost is reported once. Redis errors are thrown. */
  async refresh(busy: boolean): Promise<void> {
    if (this.heldSince === null) return;
    const started = Date.now();
    const r = await this.redis.eval(REFRESH, 1, this.key, this.token, String(this.opts.ttlMs));
    if (r === 1) {
      this.validUntil = started + this.opts.ttlMs;
      return;
    }
    this.heldSince = null;
    if (busy) this.opts.onLost();
  }

  /** Called when Redis cannot be reached: past the local deadline the lock must count as lost. */
  checkDeadline(busy: boolean): void {
    if (this.heldSince !== null && Date.now() >= this.validUntil) {
      this.heldSince = null;
      if (busy) this.opts.onLost();
    }
  }

  async release(yielding = false): Promise<void> {
    if (this.heldSince === null) return;
    this.heldSince = null;
    this.validUntil = 0;
    if (yielding) this.yieldedAt = Date.now();
    await this.redis.eval(RELEASE, 1, this.key, this.token);
  }
}
