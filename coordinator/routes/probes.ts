/**
 * The probes an orchestrator or a person asks whether the coordinator lives (`/livez`), is
 * healthy (`/healthz`: Redis reachable) and ready (`/readyz`: SQLite and Redis answer). None is
 * checked for the Host or a token (http/auth.ts), and none says more than that.
 */
import { Router } from 'express';
import { messageOf } from '../../contract/errors.js';
import { FSBENCH_VERSION } from '../../host/version.js';
import type { RedisHealthView } from '../../queue/redis-health.js';
import { withDeadline } from '../http/index.js';
import type { CoordinatorParts } from '../matrices/index.js';

const READY_DEADLINE_MS = 2000;

export interface ProbeDeps extends Pick<CoordinatorParts, 'store' | 'redis'> {
  /** Whether Redis is reachable, for /healthz; always healthy when not given (tests that embed an app). */
  readonly redisHealth?: (() => RedisHealthView) | undefined;
}

export function probesRouter(d: ProbeDeps): Router {
  const router = Router();

  // Liveness only: a restart cures nothing that /healthz reports (Redis away), so a liveness
  // probe asks this one.
  router.get('/livez', (_req, res) => {
    res.json({ ok: true });
  });

  // Unhealthy while Redis is unreachable, saying so: without Redis no run is queued or
  // collected, and a probe (or a person) should learn why without reading the log.
  router.get('/healthz', (_req, res) => {
    const redis = d.redisHealth?.();
    if (redis === undefined || redis.reachable) {
      res.json({ ok: true, version: FSBENCH_VERSION });
      return;
    }
    res.status(503).json({ ok: false, version: FSBENCH_VERSION, reason: redis.reason ?? 'Redis is unreachable', since: redis.since });
  });

  router.get('/readyz', async (_req, res) => {
    const checks: Record<string, string> = {};
    try {
      d.store.ping();
      checks['sqlite'] = 'ok';
    } catch (err) {
      checks['sqlite'] = messageOf(err);
    }
    try {
      await withDeadline(d.redis.ping(), 'ping', READY_DEADLINE_MS);
      checks['redis'] = 'ok';
    } catch (err) {
      checks['redis'] = messageOf(err);
    }
    const ready = Object.values(checks).every((v) => v === 'ok');
    res.status(ready ? 200 : 503).json({ ready, checks });
  });
  return router;
}
