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
 *
 * Its value names its owner (`<agent id>/<uuid>`) and only the owner extends it, never beyond
 * MAX_LEASE_MS. Anyone who can write to Redis could otherwise SET the key without an expiry (or
 * with a long one) and stop the host measuring for good: a lock no agent would have taken (no
 * expiry, an expiry past the longest lease, a value that is not an owner's, not a string) is
 * foreign, and an agent that finds one logs it and takes it over. Legitimate agents never hold
 * such a lock, so between them "one measurement per kernel" holds as before.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RedisConnection } from '../queue/redis.js';
import { z } from 'zod';
import { hostLockKey } from '../queue/keys.js';

/**
 * The longest lease an agent ever asks for: 5 heartbeats at the longest FSBENCH_HEARTBEAT
 * (60 s). A fixed bound, not this agent's own TTL, so that agents of one host with different
 * heartbeats never take each other's locks for foreign ones.
 */
export const MAX_LEASE_MS = 300_000;

/** An owner's lock value: its agent id, a slash, a random UUID. */
const LockValue = z.string().regex(/^[A-Za-z0-9._-]{1,100}\/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);

/**
 * Takes a free lock, or re-takes our own one whose local deadline passed before Redis expired
 * it: {1}. Otherwise {0, value, PTTL} for the caller to judge ('' and -3 for a key that is not
 * a string).
 */
const ACQUIRE = `local t = redis.call('TYPE', KEYS[1]).ok
if t == 'none' then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return {1} end
if t ~= 'string' then return {0, '', -3} end
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return {1} end
return {0, v, redis.call('PTTL', KEYS[1])}`;
const AcquireReply = z.union([z.tuple([z.literal(1)]), z.tuple([z.literal(0), z.string(), z.number().int()])]);
/**
 * Replaces a foreign lock, only if it is still the one judged foreign: of two agents that both
 * found it, one takes it and the other then finds the first one's lock.
 */
const TAKE_OVER = `local t = redis.call('TYPE', KEYS[1]).ok
if t == 'string' then
  if redis.call('GET', KEYS[1]) ~= ARGV[3] then return 0 end
elseif t ~= 'none' then
  if ARGV[3] ~= '' then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1`;
/** Extends the TTL only if the lock is still ours: a lapsed lock must never be revived. */
const REFRESH = `if redis.call('TYPE', KEYS[1]).ok == 'string' and redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end`;
const RELEASE = `if redis.call('TYPE', KEYS[1]).ok == 'string' and redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`;

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
  /** Told of a foreign lock taken over. */
  readonly log: (line: string) => void;
}

export class HostLock {
  private readonly key: string;
  private readonly token: string;
  private heldSince: number | null = null;
  /** Local deadline: past it, another agent may have the lock, whatever Redis says later. */
  private validUntil = 0;
  private yieldedAt = 0;

  constructor(
    private readonly redis: RedisConnection,
    private readonly opts: HostLockOptions,
  ) {
    this.key = hostLockKey(opts.prefix, opts.hostId);
    this.token = `${opts.owner}/${randomUUID()}`;
    // Our own lock must never look foreign to the other agents of the host.
    if (!LockValue.safeParse(this.token).success) throw new Error(`host lock owner ${JSON.stringify(opts.owner)} must be 1-100 letters, digits, dots, dashes or underscores`);
    if (opts.ttlMs > MAX_LEASE_MS) throw new Error(`host lock TTL ${opts.ttlMs} ms is longer than the longest lease, ${MAX_LEASE_MS} ms`);
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
    const reply = AcquireReply.parse(await this.redis.eval(ACQUIRE, 1, this.key, this.token, String(this.opts.ttlMs)));
    if (reply[0] === 0) {
      const [, value, pttl] = reply;
      const why = foreignBecause(value, pttl);
      if (why === null) return false;
      const took = await this.redis.eval(TAKE_OVER, 1, this.key, this.token, String(this.opts.ttlMs), value);
      if (took !== 1) return false;
      this.opts.log(`host lock ${this.key} was held by ${JSON.stringify(value.slice(0, 80))}, which ${why}: not an agent's lock, taken over`);
    }
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

/** Why a lock found in Redis is not one an agent holds (null when it may be). */
function foreignBecause(value: string, pttl: number): string | null {
  if (pttl === -3) return 'is not a string';
  if (pttl === -1) return 'has no expiry';
  if (pttl > MAX_LEASE_MS) return `expires in ${Math.round(pttl / 1000)} s, beyond the longest lease (${MAX_LEASE_MS / 1000} s)`;
  if (!LockValue.safeParse(value).success) return 'is not an owner/lease value';
  return null;
}
