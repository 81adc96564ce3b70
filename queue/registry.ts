/**
 * The registry of agents in Redis: one hash field per agent, rewritten by its heartbeat. This
 * module owns that hash; agents write their own entry, the coordinator reads the live ones.
 */
import type { Redis } from 'ioredis';
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
    lastHeartbeat: z.iso.datetime(),
    /** The agent counts as gone once this long has passed since its last heartbeat. */
    ttlMs: z.number().int().positive(),
    holdsHostLock: z.boolean(),
    currentRun: CurrentRun.nullable(),
    runsDone: z.number().int().nonnegative(),
    /** Warmup runs made and thrown away: once per cell and host. */
    warmupsDone: z.number().int().nonnegative().default(0),
    fingerprint: MachineFingerprint,
  })
  .strict();
export type AgentStatus = z.infer<typeof AgentStatus>;

/** Entries silent for this long are deleted by readers, so the hash does not grow forever. */
const FORGET_AFTER_MS = 24 * 3_600_000;

export async function writeStatus(redis: Redis, prefix: string, status: AgentStatus): Promise<void> {
  await redis.hset(agentsKey(prefix), status.agentId, JSON.stringify(status));
}

export async function removeStatus(redis: Redis, prefix: string, agentId: string): Promise<void> {
  await redis.hdel(agentsKey(prefix), agentId);
}

export function isLive(status: AgentStatus, now: number): boolean {
  return Date.parse(status.lastHeartbeat) + status.ttlMs > now;
}

/**
 * Live agents, sorted by host then machine name. Long-dead entries are deleted; malformed ones
 * (from another fsbench version, say) are skipped but left for their owner.
 */
export async function liveAgents(redis: Redis, prefix: string, now = Date.now()): Promise<AgentStatus[]> {
  const entries = await redis.hgetall(agentsKey(prefix));
  const live: AgentStatus[] = [];
  const forget: string[] = [];
  for (const [field, raw] of Object.entries(entries)) {
    let parsed: z.ZodSafeParseResult<AgentStatus>;
    try {
      parsed = AgentStatus.safeParse(JSON.parse(raw));
    } catch {
      continue;
    }
    if (!parsed.success) continue;
    if (isLive(parsed.data, now)) {
      live.push(parsed.data);
    } else if (Date.parse(parsed.data.lastHeartbeat) + FORGET_AFTER_MS < now) {
      forget.push(field);
    }
  }
  if (forget.length > 0) await redis.hdel(agentsKey(prefix), ...forget);
  return live.sort((a, b) => a.hostId.localeCompare(b.hostId) || a.machine.localeCompare(b.machine) || a.agentId.localeCompare(b.agentId));
}
