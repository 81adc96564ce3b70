/**
 * Redis ACL users (Redis 6.2 and later) for each kind of client, so that an agent's credentials
 * reach only what an agent does in Redis. An agent is root on its host, so whatever its Redis
 * user may do, whoever takes over that host may do too: with the one shared password it could
 * empty another host's queue, write approvals, run CONFIG SET or FLUSHALL.
 *
 * What an agent does, key by key (each module is the one that names the key):
 * - BullMQ's worker on the shared `any` queue and on its own host's queue (`<prefix>:<queue>:*`,
 *   jobs.ts); its Lua scripts run with the caller's ACL, so every key a script touches is checked;
 * - its entry in the registry and the beats beside it (registry.ts), a Lua script too;
 * - its host's lock (agent/host-lock.ts), one key per host;
 * - its key's announcement (HSET) and its approval (HGET only), the coordinator's report key
 *   (GET only) (enrollment.ts, agent/identity.ts);
 * - fingerprints, warmed cells and refusal counts, shared by all agents (keys.ts), and whether a
 *   matrix is cancelled (read only).
 * Reports go back as the return value of BullMQ's completion script, into the queue's own event
 * stream: no key of their own. No pub/sub.
 *
 * Commands: the data and scripting commands BullMQ and ioredis use, less every @dangerous and
 * @admin one (CONFIG, FLUSHALL, FLUSHDB, KEYS, DEBUG, SHUTDOWN, CLIENT KILL, MONITOR, ...), less
 * the key-space walks that ignore key patterns (SCAN, RANDOMKEY), SCRIPT FLUSH and FUNCTION; INFO,
 * which ioredis's ready check and BullMQ's version check need, is given back.
 */
import { createHash, randomBytes } from 'node:crypto';
import { z } from 'zod';
import { Target, queueName, ANY_TARGET } from './jobs.js';
import { agentApprovalsKey, agentKeysKey, agentsKey, cancelledKey, fingerprintsKey, hostLockKey, redisKey, refusalsKey, reportKeyKey, warmedKey } from './keys.js';

/** An ACL user name as fsbench makes them: what `ACL SETUSER` takes as one argument. */
export const AclUserName = z.string().regex(/^[A-Za-z0-9._{}-]{1,128}$/, 'must be 1-128 letters, digits, dots, dashes, underscores or braces');

/** The installation's prefix: never a glob character in it (FSBENCH_QUEUE_PREFIX's schema), checked again here since a pattern is built from it. */
const Prefix = z.string().regex(/^[A-Za-z0-9_{}-]{1,34}$/);

/** Commands every client needs to connect (ioredis: AUTH or HELLO, CLIENT SETNAME, the ready check's INFO, SELECT) and to follow a Cluster. */
const CONNECTION = ['+@connection', '-client', '+client|setname', '+client|getname', '+client|id', '+acl|whoami', '+info', '+select', '+cluster|slots', '+cluster|shards', '+cluster|nodes', '+cluster|keyslot', '+cluster|info', '+readonly', '+readwrite'];

/** Scripts only by EVAL and EVALSHA (BullMQ's and fsbench's): never SCRIPT FLUSH or KILL, nor FUNCTION, which would outlive the caller. */
const SCRIPTS = ['-@scripting', '+eval', '+evalsha', '+eval_ro', '+evalsha_ro', '+script|load', '+script|exists'];

/** Walks of the key space that no key pattern limits. */
const NO_WALKS = ['-scan', '-randomkey', '-keys'];

/** The rules of an agent on host `hostId`, after `user NAME on <password>`. */
export function agentAclRules(prefix: string, hostId: string): string[] {
  const p = Prefix.parse(prefix);
  const host = Target.parse(hostId);
  const rw = [
    `${p}:${queueName(ANY_TARGET)}:*`,
    `${p}:${queueName(host)}:*`,
    hostLockKey(p, host),
    agentsKey(p),
    `${agentsKey(p)}:beats`,
    fingerprintsKey(p),
    warmedKey(p, '*'),
    refusalsKey(p),
    agentKeysKey(p),
  ];
  const readOnly = [cancelledKey(p, '*'), reportKeyKey(p), agentApprovalsKey(p)];
  return [
    'resetkeys',
    'resetchannels',
    ...rw.map((k) => `~${k}`),
    ...readOnly.map((k) => `%R~${k}`),
    '-@all',
    '+@read',
    '+@write',
    '+@transaction',
    '+@blocking',
    '+@fast',
    '-@dangerous',
    '-@admin',
    '-@pubsub',
    ...SCRIPTS,
    ...CONNECTION,
    ...NO_WALKS,
  ];
}

/**
 * The coordinator's rules: every key of the installation, no other; the commands of the agents
 * and the coordinator's own reads of the server's settings (CONFIG GET, queue/redis-settings.ts),
 * never CONFIG SET, FLUSHALL or ACL.
 */
export function coordinatorAclRules(prefix: string): string[] {
  const p = Prefix.parse(prefix);
  return ['resetkeys', 'resetchannels', `~${redisKey(p, '*')}`, '-@all', '+@read', '+@write', '+@transaction', '+@blocking', '+@fast', '+@slow', '-@dangerous', '-@admin', '-@pubsub', ...SCRIPTS, ...CONNECTION, ...NO_WALKS, '+config|get'];
}

/**
 * What a sentinel needs on the data nodes (`sentinel auth-user`), as Redis's Sentinel
 * documentation lists it: no key at all.
 */
export function sentinelDataAclRules(): string[] {
  return ['resetkeys', 'resetchannels', '&__sentinel__:hello', '-@all', '+multi', '+slaveof', '+replicaof', '+ping', '+exec', '+subscribe', '+config|rewrite', '+role', '+publish', '+info', '+client|setname', '+client|kill', '+script|kill'];
}

/**
 * What a client of the sentinels (coordinator, agents) may ask them: where the primary is and
 * who the other sentinels are, nothing that changes them (SENTINEL FAILOVER, REMOVE, SET,
 * MONITOR, RESET, CONFIG). Set on each sentinel, whose own password (requirepass) stays theirs.
 */
export function sentinelClientAclRules(): string[] {
  return [
    'resetkeys',
    'resetchannels',
    '-@all',
    '+ping',
    '+auth',
    '+hello',
    '+client|setname',
    '+client|getname',
    '+sentinel|get-master-addr-by-name',
    '+sentinel|sentinels',
    '+sentinel|replicas',
    '+sentinel|slaves',
  ];
}

/** A new password for an ACL user: 32 random bytes in hex, which needs no quoting anywhere. */
export function newAclPassword(): string {
  return randomBytes(32).toString('hex');
}

/** The password as an ACL rule holds it (`#<sha256 hex>`): a file of rules then reveals no password. */
export function passwordRule(password: string): string {
  return `#${createHash('sha256').update(password).digest('hex')}`;
}

/** One line of an ACL file (or of redis.conf): `user NAME on #HASH RULES...`. */
export function aclFileLine(user: string, password: string, rules: readonly string[]): string {
  return ['user', AclUserName.parse(user), 'on', passwordRule(password), ...rules].join(' ');
}

/** `ACL SETUSER`'s arguments for the same user: its rules reset first, so that nothing granted before survives. */
export function aclSetUserArgs(user: string, password: string, rules: readonly string[]): string[] {
  return [AclUserName.parse(user), 'reset', 'on', passwordRule(password), ...rules];
}

/** The default name of host `hostId`'s agent user. */
export function agentUserName(hostId: string): string {
  return `fsbench-agent-${Target.parse(hostId)}`;
}
