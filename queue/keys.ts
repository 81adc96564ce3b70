/**
 * Every Redis key fsbench uses besides BullMQ's own queues, under the installation's prefix
 * (FSBENCH_QUEUE_PREFIX), in one place: agents write some, the coordinator reads them, and a
 * key spelled twice is a key that drifts.
 */

/** The key of one piece of fsbench state in Redis, under the installation's prefix. */
export function redisKey(prefix: string, ...parts: string[]): string {
  return [prefix, ...parts].join(':');
}

/**
 * Where agents put their fingerprints (a hash: fingerprint hash -> JSON), each before the first
 * report that names it. Fingerprints change rarely (an agent's start, a new kernel, another
 * target filesystem), so this stays small; it has no expiry because a report can wait in a
 * stream for as long as the coordinator is down.
 */
export function fingerprintsKey(prefix: string): string {
  return redisKey(prefix, 'fingerprints');
}

/** The agent registry (a hash: agent id -> AgentStatus JSON), see registry.ts. */
export function agentsKey(prefix: string): string {
  return redisKey(prefix, 'agents');
}

/** The lock that keeps two measurements off one kernel (see agent/host-lock.ts). */
export function hostLockKey(prefix: string, hostId: string): string {
  return redisKey(prefix, 'host-lock', hostId);
}

/**
 * The cells of a matrix a host has warmed up (a set of `<hostId> <cellId>`): agents run a cell's
 * warmups once per host, before the first of its repetitions that host takes, whichever of the
 * host's agents takes it and however the repetitions of other cells come in between.
 */
export function warmedKey(prefix: string, matrixId: string): string {
  return redisKey(prefix, 'warmed', matrixId);
}

/**
 * Agents' public keys as they announce them (a hash: key fingerprint -> signed announcement,
 * queue/enrollment.ts), which the coordinator enrolls when an operator approves them or they
 * present an enrollment token.
 */
export function agentKeysKey(prefix: string): string {
  return redisKey(prefix, 'agent-keys');
}

/** The coordinator's signed approvals of agent keys (a hash: key fingerprint -> approval): agents start working once theirs is there. */
export function agentApprovalsKey(prefix: string): string {
  return redisKey(prefix, 'agent-approvals');
}

/** Set (with the job lifetime as expiry) when a matrix is cancelled: agents refuse its jobs (JOB_CANCELLED). */
export function cancelledKey(prefix: string, matrixId: string): string {
  return redisKey(prefix, 'cancelled', matrixId);
}

/** Jobs agents refused, by code (a hash: code -> count), for the coordinator's /metrics. */
export function refusalsKey(prefix: string): string {
  return redisKey(prefix, 'refusals');
}

/** The coordinator's X25519 report key, signed with its job key (queue/enrollment.ts): agents agree their report secrets from it. */
export function reportKeyKey(prefix: string): string {
  return redisKey(prefix, 'report-key');
}
