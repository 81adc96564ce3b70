/**
 * The coordinator's HTTP API as an express app, built from its dependencies and never listening
 * by itself: tests drive it in-process, `server.ts` gives it a port. Every request passes the
 * edge first (http/edge.ts: access log, security headers, write limit, Host check), then its route.
 */
import express, { type Express } from 'express';
import type { Logger } from 'pino';
import { compareRouter, resultsUploadRouter, historyRouter, dashboardRouter, matricesRouter, agentsRouter, type MatricesDeps } from './routes/index.js';
import { History } from './history/index.js';
import { storeResultSink, storeRunSource } from './store/index.js';
import { coordinatorMetrics, type CoordinatorMetrics } from './metrics/index.js';
import { edgeIn, edgeOut, requireRead, requireWrite, withDeadline } from './http/index.js';
import { messageOf } from '../contract/errors.js';
import type { RedisHealthView } from '../queue/redis-health.js';
import { FSBENCH_VERSION } from '../host/version.js';

export interface AppDeps extends MatricesDeps {
  /** `GET /metrics`; one reading this app's own deps when not given. */
  readonly metrics?: CoordinatorMetrics;
  /** Gets an access line per request, and is what `log` writes through while a request is answered; no access lines when not given. */
  readonly logger?: Logger;
  /** Most writes per client address per minute (FSBENCH_WRITE_LIMIT); unlimited when not given or 0. */
  readonly writeLimit?: number;
  /** Whether Redis is reachable, for /healthz; always healthy when not given (tests that embed an app). */
  readonly redisHealth?: () => RedisHealthView;
}

/** Uploaded result files may be far larger than a matrix; they are still bounded. */
const MAX_UPLOAD_BYTES = 64 * 1024 ** 2;
const READY_DEADLINE_MS = 2000;

export function buildApp(d: AppDeps): Express {
  const app = express();
  app.disable('x-powered-by');
  // The peer address decides loopback trust; forwarded headers are never believed.
  app.set('trust proxy', false);
  app.set('json spaces', 0);

  app.use(edgeIn({ auth: d.auth, logger: d.logger, writeLimit: d.writeLimit }));

  // Liveness only: a restart cures nothing that /healthz reports (Redis away), so a liveness
  // probe asks this one.
  app.get('/livez', (_req, res) => {
    res.json({ ok: true });
  });

  // Unhealthy while Redis is unreachable, saying so: without Redis no run is queued or
  // collected, and a probe (or a person) should learn why without reading the log.
  app.get('/healthz', (_req, res) => {
    const redis = d.redisHealth?.();
    if (redis === undefined || redis.reachable) {
      res.json({ ok: true, version: FSBENCH_VERSION });
      return;
    }
    res.status(503).json({ ok: false, version: FSBENCH_VERSION, reason: redis.reason ?? 'Redis is unreachable', since: redis.since });
  });

  app.get('/readyz', async (_req, res) => {
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

  app.use('/v1/matrices', matricesRouter(d));

  app.use(agentsRouter(d));

  const read = requireRead(d.auth);
  const history = new History(d.store);
  app.use(compareRouter({ source: storeRunSource(d.store), history, read }));
  app.use(historyRouter({ history, read }));
  app.use(resultsUploadRouter({ sink: storeResultSink(d.store), write: requireWrite(d.auth), maxBody: Math.max(d.limits.maxBody, MAX_UPLOAD_BYTES) }));
  app.use((d.metrics ?? coordinatorMetrics(d)).router);
  app.use(dashboardRouter({ read }));

  app.use(edgeOut(d.logger, d.log));
  return app;
}
