/**
 * The coordinator's HTTP API as an express app, built from its dependencies and never listening
 * by itself: tests drive it in-process, `server.ts` gives it a port.
 */
import express, { type Express } from 'express';
import { liveAgents } from '../queue/registry.js';
import { compareRouter, resultsUploadRouter } from './compare-routes.js';
import { storeResultSink, storeRunSource } from './store-adapter.js';
import { dashboardRouter } from './dashboard.js';
import type { CoordinatorMetrics } from './metrics-route.js';
import { requireRead, requireWrite } from './auth.js';
import { FsbenchError } from '../contract/errors.js';
import { errorHandler } from './errors.js';
import { matricesRouter, withDeadline, type MatricesDeps } from './matrices.js';
import { coordinatorMetrics } from './metrics.js';

export interface AppDeps extends MatricesDeps {
  /** `GET /metrics`; one reading this app's own deps when not given. */
  readonly metrics?: CoordinatorMetrics;
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

  app.get('/healthz', (_req, res) => {
    res.json({ ok: true });
  });

  app.get('/readyz', async (_req, res) => {
    const checks: Record<string, string> = {};
    try {
      d.store.ping();
      checks['sqlite'] = 'ok';
    } catch (err) {
      checks['sqlite'] = err instanceof Error ? err.message : String(err);
    }
    try {
      await withDeadline(d.redis.ping(), 'ping', READY_DEADLINE_MS);
      checks['redis'] = 'ok';
    } catch (err) {
      checks['redis'] = err instanceof Error ? err.message : String(err);
    }
    const ready = Object.values(checks).every((v) => v === 'ok');
    res.status(ready ? 200 : 503).json({ ready, checks });
  });

  app.use('/v1/matrices', matricesRouter(d));

  app.get('/v1/agents', requireRead(d.auth), async (_req, res) => {
    const agents = await withDeadline(liveAgents(d.redis, d.prefix), 'reading the live agents');
    res.json({ hosts: new Set(agents.map((a) => a.hostId)).size, agents });
  });

  const read = requireRead(d.auth);
  app.use(compareRouter({ source: storeRunSource(d.store), read }));
  app.use(resultsUploadRouter({ sink: storeResultSink(d.store), write: requireWrite(d.auth), maxBody: Math.max(d.limits.maxBody, MAX_UPLOAD_BYTES) }));
  app.use((d.metrics ?? coordinatorMetrics(d)).router);
  app.use(dashboardRouter({ read }));

  app.use((req) => {
    throw new FsbenchError('NOT_FOUND', `no route ${req.method} ${req.path}`);
  });
  app.use(errorHandler(d.log));
  return app;
}
