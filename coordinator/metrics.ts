/**
 * The coordinator's Prometheus snapshot: read from the store, the queues and the agent registry
 * at scrape time, so the gauges are never stale or double-counted.
 */
import type { Redis } from 'ioredis';
import { liveAgents } from '../queue/registry.js';
import { createMetrics, type CoordinatorMetrics, type MetricsSnapshot } from './metrics-route.js';
import type { Dispatcher } from './dispatch.js';
import { ANY_TARGET } from '../queue/jobs.js';
import type { Store } from './store.js';

/** Matrices summed into the gauges; far above what one coordinator holds. */
const MAX_MATRICES = 100_000;

export interface MetricsSources {
  readonly store: Store;
  readonly dispatcher: Dispatcher;
  readonly redis: Redis;
  readonly prefix: string;
}

async function snapshot(s: MetricsSources): Promise<MetricsSnapshot> {
  const matrices = s.store.listMatrices(MAX_MATRICES);
  const runsByState = { ok: 0, failed: 0, skipped: 0 };
  const matricesByState: Record<string, number> = {};
  for (const m of matrices) {
    runsByState.ok += m.okRuns;
    runsByState.failed += m.failedRuns;
    runsByState.skipped += m.skippedRuns;
    matricesByState[m.state] = (matricesByState[m.state] ?? 0) + 1;
  }
  return {
    queueDepth: await s.dispatcher.waiting([ANY_TARGET, ...s.store.activeTargets(0)]),
    runsByState,
    matricesByState,
    liveAgents: (await liveAgents(s.redis, s.prefix)).length,
  };
}

export function coordinatorMetrics(s: MetricsSources): CoordinatorMetrics {
  return createMetrics({ snapshot: () => snapshot(s) });
}
