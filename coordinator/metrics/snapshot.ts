/**
 * The coordinator's Prometheus snapshot: read from the store, the queues and the agent registry
 * at scrape time, so the gauges are never stale or double-counted. The store's part is one SQL
 * aggregate over the counters each matrix row keeps, so a scrape costs the same with ten
 * matrices or a hundred thousand, and parses none of them.
 */
import { liveAgents } from '../../queue/registry.js';
import { requireRead, type AuthConfig } from '../http/index.js';
import { createMetrics, type CoordinatorMetrics, type MetricsSnapshot } from './registry.js';
import type { CoordinatorParts } from '../matrices/index.js';
import { ANY_TARGET } from '../../queue/jobs.js';
import { z } from 'zod';
import { FSBENCH_VERSION } from '../../host/version.js';
import { refusalsKey } from '../../queue/keys.js';
import { isErrorCode } from '../../contract/errors.js';
import type { Enrollment } from '../enrollment/index.js';

/** The label that counts refusals under a code the error catalog does not have. */
const OTHER_REFUSAL = 'other';

/**
 * Agents count their refusals by error code (agent/admission.ts), in a hash every agent may
 * write: a label value is a refusal code of the catalog, and whatever else is there is summed
 * under OTHER_REFUSAL, so an agent cannot make /metrics grow a series per name it writes.
 */
const RefusalCounts = z.record(z.string(), z.string()).transform((counts) => {
  const out: Record<string, number> = {};
  for (const [code, n] of Object.entries(counts)) {
    if (!/^\d{1,15}$/.test(n)) continue;
    const label = isErrorCode(code) && code.startsWith('JOB_') ? code : OTHER_REFUSAL;
    out[label] = (out[label] ?? 0) + Number(n);
  }
  return out;
});

/**
 * Queues of matrices finished this long ago are no longer counted: a finished matrix has no
 * waiting run (done ones ran them all, cancelling removes them), and counting every host ever
 * seen would cost a Redis call per host per scrape.
 */
const FINISHED_TARGETS_MS = 3_600_000;

export interface MetricsSources extends CoordinatorParts {
  /** Who may scrape: /metrics follows FSBENCH_READ_AUTH like every read. Open when omitted. */
  readonly auth?: AuthConfig;
  /** Agent keys enrolled and waiting; not counted when omitted. */
  readonly enrollment?: Enrollment;
}

async function snapshot(s: MetricsSources): Promise<MetricsSnapshot> {
  const runsByState = { ok: 0, failed: 0, skipped: 0 };
  const matricesByState: Record<string, number> = {};
  for (const t of s.store.matrixTotals()) {
    runsByState.ok += t.ok;
    runsByState.failed += t.failed;
    runsByState.skipped += t.skipped;
    matricesByState[t.state] = t.matrices;
  }
  const agents = await liveAgents(s.redis, s.prefix);
  return {
    queueDepth: await s.dispatcher.waiting([ANY_TARGET, ...s.store.activeTargets(FINISHED_TARGETS_MS)]),
    runsByState,
    matricesByState,
    liveAgents: agents.length,
    liveAgentsOtherVersion: agents.filter((a) => a.fingerprint.fsbench !== FSBENCH_VERSION).length,
    workerRestarts: agents.reduce((n, a) => n + (a.workerRestarts ?? 0), 0),
    refusedJobs: RefusalCounts.parse(await s.redis.hgetall(refusalsKey(s.prefix))),
    ...(s.enrollment ? { agentKeys: s.enrollment.counts() } : {}),
  };
}

export function coordinatorMetrics(s: MetricsSources): CoordinatorMetrics {
  return createMetrics({ snapshot: () => snapshot(s), version: FSBENCH_VERSION, ...(s.auth ? { read: requireRead(s.auth) } : {}) });
}
