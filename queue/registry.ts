/**
 * The registry of agents in Redis: one hash field per agent, rewritten by its heartbeat, and
 * beside it the Redis server's own time of that beat. Liveness is judged by the server's clock
 * alone: the beat's time is stamped by Redis (TIME, inside the script that writes the entry) and
 * readers compare it with Redis TIME read in the same transaction, so neither the agent's clock
 * nor the reader's can make an agent look live or dead. This module owns both hashes; agents
 * write their own entry, the coordinator reads the live ones.
 */
import type { RedisConnection } from './redis.js';
import { z } from 'zod';
import { MachineFingerprint } from '../contract/fingerprint.js';
import { agentsKey } from './keys.js';

export const CurrentRun = z
  .object({
    matrixId: z.string(),
    cellId: z.string(),
    repetition: z.number().int().nonnegative(),
    startedAt: z.iso.datetime(),
  })
  .strict();
export type CurrentRun = z.infer<typeof CurrentRun>;

export const AgentStatus = z
  .object({
    agentId: z.string(),
    /** The kernel this agent runs on (boot id, or FSBENCH_HOST_ID): the unit of placement and locking. */
    hostId: z.string(),
    machine: z.string(),
    labels: z.array(z.string()),
    pid: z.number().int(),
    startedAt: z.iso.datetime(),
    /**
     * As the agent writes it: its own clock at the beat. As read back (liveAgents, the API): the
     * Redis server's time of the beat, which is what liveness is judged by.
     */
    lastHeartbeat: z.iso.datetime(),
    /** The agent counts as gone once this long has passed, by the Redis server's clock, since its last heartbeat. */
    ttlMs: z.number().int().positive(),
    holdsHostLock: z.boolean(),
    currentRun: CurrentRun.nullable(),
    runsDone: z.number().int().nonnegative(),
    /** Warmup runs made and thrown away: once per cell and host. */
    warmupsDone: z.number().int().nonnegative().default(0),
    /** Times its watchdog recreated its workers: runs waited, the agent idle, none taken (agent/watchdog.ts); absent from older agents. */
    workerRestarts: z.number().int().nonnegative().optional(),
    /**
     * Read back only: the agent's clock minus the Redis server's at the last beat (plus the
     * beat's trip to Redis). Its results' timestamps are off by as much.
     */
    clockSkewMs: z.number().int().optional(),
    fingerprint: MachineFingerprint,
  })
  .strict();
export type AgentStatus = z.infer<typeof AgentStatus>;

/** Entries silent for this long are deleted by readers, so the hashes do not grow forever. */
const FORGET_AFTER_MS = 24 * 3_600_000;

/**
 * Agent id -> Redis server time (ms) of its last beat. Only the write script sets it; an entry
 * without one (written straight into the registry hash) is never live.
 */
function beatsKey(prefix: string): string {
  return `${agentsKey(prefix)}:beats`;
}

/** Milliseconds as a decimal string, built from TIME's parts: Lua's number formatting would round them. */
const WRITE = `
local t = redis.call('TIME')
local ms = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ms)
return ms`;

const ServerMs = z.coerce.number().int().positive();
const Time = z.tuple([z.string(), z.string()]).transform(([s, us]) => Number(s) * 1000 + Math.floor(Number(us) / 1000));
const Hash = z.record(z.string(), z.string());
/** A transaction's replies: [error, value] each. */
const Replies = z.tuple([z.tuple([z.null(), Time]), z.tuple([z.null(), Hash]), z.tuple([z.null(), Hash])]);

/** Writes the agent's entry and stamps it with the Redis server's time; returns that time (ms). */
export async function writeStatus(redis: RedisConnection, prefix: string, status: AgentStatus): Promise<number> {
  return ServerMs.parse(await redis.eval(WRITE, 2, agentsKey(prefix), beatsKey(prefix), status.agentId, JSON.stringify(status)));
}

export async function removeStatus(redis: RedisConnection, prefix: string, agentId: string): Promise<void> {
  await redis.multi().hdel(agentsKey(prefix), agentId).hdel(beatsKey(prefix), agentId).exec();
}

export interface RegistrySnapshot {
  /** The Redis server's time (ms) when the registry was read. */
  readonly serverNow: number;
  /** Live agents, sorted by host then machine name. */
  readonly live: AgentStatus[];
}

/**
 * The live agents and the Redis server's time they were judged at, read in one transaction.
 * Long-dead entries are deleted; malformed ones (from another fsbench version, say) are skipped
 * but left for their owner.
 */
export async function readRegistry(redis: RedisConnection, prefix: string): Promise<RegistrySnapshot> {
  const [[, serverNow], [, entries], [, beats]] = Replies.parse(await redis.multi().time().hgetall(agentsKey(prefix)).hgetall(beatsKey(prefix)).exec());
  const live: AgentStatus[] = [];
  const forget = new Set<string>();
  for (const [field, raw] of Object.entries(entries)) {
    const beat = ServerMs.safeParse(beats[field]);
    if (!beat.success) continue;
    if (beat.data + FORGET_AFTER_MS < serverNow) {
      forget.add(field);
      continue;
    }
    let parsed: z.ZodSafeParseResult<AgentStatus>;
    try {
      parsed = AgentStatus.safeParse(JSON.parse(raw));
    } catch {
      continue;
    }
    if (!parsed.success || beat.data + parsed.data.ttlMs <= serverNow) continue;
    const written = Date.parse(parsed.data.lastHeartbeat);
    live.push({ ...parsed.data, lastHeartbeat: new Date(beat.data).toISOString(), clockSkewMs: written - beat.data });
  }
  // Beats whose entry is gone (removed between the two writes of an older version, say).
  for (const field of Object.keys(beats)) if (!(field in entries)) forget.add(field);
  if (forget.size > 0) await redis.multi().hdel(agentsKey(prefix), ...forget).hdel(beatsKey(prefix), ...forget).exec();
  live.sort((a, b) => a.hostId.localeCompare(b.hostId) || a.machine.localeCompare(b.machine) || a.agentId.localeCompare(b.agentId));
  return { serverNow, live };
}

/** Live agents, judged by the Redis server's clock, sorted by host then machine name. */
export async function liveAgents(redis: RedisConnection, prefix: string): Promise<AgentStatus[]> {
  return (await readRegistry(redis, prefix)).live;
}
