/**
 * What starting an agent takes (its settings, from the settings table: settings/table.ts documents
 * each) and what it gives back.
 */
import type { RedisChannel } from '../queue/redis.js';

export interface AgentSettings extends RedisChannel {
  readonly queuePrefix: string;
  readonly machine: string | undefined;
  /** FSBENCH_MACHINE_FILE: a file naming the machine when FSBENCH_MACHINE does not (host/machine-name.ts). */
  readonly machineFile?: string | undefined;
  readonly labels: readonly string[];
  readonly scratch: string;
  readonly hostId: string | undefined;
  readonly heartbeat: number;
  readonly stallTimeout: number;
  readonly maxAttempts: number;
  readonly stopGrace: number;
  /** FSBENCH_JOURNAL_DIR: the host's journal, shared by every agent of the host (default: in the scratch directory). */
  readonly journalDir?: string | undefined;
  /** FSBENCH_ALLOWED_TARGETS, FSBENCH_MAX_QUEUED_EVENTS, FSBENCH_MAX_WATCHES (defaults: the settings table's). */
  readonly allowedTargets?: readonly string[];
  readonly maxQueuedEvents?: number;
  readonly maxWatches?: number;
  /** FSBENCH_WATCHERS: the file listing this host's own watchers (none when absent). */
  readonly watchers?: string | undefined;
  /** FSBENCH_MAX_STEAL, FSBENCH_MAX_OUTSIDE_CPU: when a run counts as disturbed (the settings' defaults when absent). */
  readonly maxSteal?: number;
  readonly maxOutsideCpu?: number;
  /** FSBENCH_JOB_KEY: the coordinator's public key (PEM or a file); without it the agent does not start. */
  readonly jobKey: string | undefined;
  /** FSBENCH_STATE_DIR: the agent's key and what it ran (default: `agent` in the scratch directory). */
  readonly stateDir?: string | undefined;
  /** FSBENCH_ENROLL_TOKEN: a one-time token that enrolls this agent's key without an approval. */
  readonly enrollToken?: string | undefined;
  /** FSBENCH_ENROLL_TOKEN_COPY: a file looked in for a token while the agent waits (the coordinator of this machine keeps an unused one there). */
  readonly enrollTokenCopy?: string | undefined;
  /** FSBENCH_KEY_MAX_AGE: a key older than this is rotated (0: never; the setting's default when absent). */
  readonly keyMaxAge?: number;
  /** FSBENCH_HEALTH_FILE: rewritten while Redis answers, for a healthcheck that needs no credential. */
  readonly healthFile?: string | undefined;
}

export interface RunningAgent {
  readonly agentId: string;
  readonly hostId: string;
  /** This agent's key fingerprint now (what `fsbench agents approve` accepts); a rotation changes it. */
  readonly key: string;
  /** Resolves once the key is enrolled and the agent takes jobs; rejects if it stops first. */
  readonly enrolled: Promise<void>;
  /** Whether its approval held at the last look (false once revoked): it takes jobs only then. */
  approved(): boolean;
  /** Stops as on SIGTERM; resolves once the lock is released and Redis closed. */
  stop(): Promise<void>;
}
