/**
 * The coordinator's HTTP API as an express app, built from its dependencies and never listening
 * by itself: tests drive it in-process, `server.ts` gives it a port. Every request passes the
 * edge first (http/edge.ts: access log, security headers, write limit, Host check), then its route.
 */
import express, { type Express } from 'express';
import type { Logger } from 'pino';
import { History } from './history/index.js';
import { edgeIn, edgeOut, requireRead, requireWrite } from './http/index.js';
import { coordinatorMetrics, type CoordinatorMetrics } from './metrics/index.js';
import {
  agentsRouter, compareRouter, dashboardRouter, historyRouter, matricesRouter, probesRouter, Reads, resultsUploadRouter, type MatricesDeps, type ProbeDeps,
  type ReadSettings,
} from './routes/index.js';
import { storeResultSink, storeRunSource } from './store/index.js';

export interface AppDeps extends MatricesDeps, ProbeDeps {
  /** `GET /metrics`; one reading this app's own deps when not given. */
  readonly metrics?: CoordinatorMetrics;
  /** Gets an access line per request, and is what `log` writes through while a request is answered; no access lines when not given. */
  readonly logger?: Logger;
  /** Most writes per client address per minute (FSBENCH_WRITE_LIMIT); unlimited when not given or 0. */
  readonly writeLimit?: number;
  /** How many comparisons, gates and history reads are computed at once, wait, and may be asked for (routes/reads.ts); the defaults, without a rate limit, when not given. */
  readonly reads?: ReadSettings;
}

/** Uploaded result files may be far larger than a matrix; they are still bounded. */
const MAX_UPLOAD_BYTES = 64 * 1024 ** 2;

export function buildApp(d: AppDeps): Express {
  const app = express();
  app.disable('x-powered-by');
  // The peer address decides loopback trust; forwarded headers are never believed.
  app.set('trust proxy', false);
  app.set('json spaces', 0);

  app.use(edgeIn({ auth: d.auth, logger: d.logger, writeLimit: d.writeLimit }));

  app.use(probesRouter(d));
  app.use('/v1/matrices', matricesRouter(d));
  app.use(agentsRouter(d));

  const read = requireRead(d.auth);
  const history = new History(d.store);
  // Costly reads: off the event loop, a few at once, rate-limited per client.
  const reads = new Reads(d.store, d.reads);
  app.use(compareRouter({ source: storeRunSource(d.store), history, read, reads }));
  app.use(historyRouter({ history, read, reads }));
  app.use(resultsUploadRouter({ sink: storeResultSink(d.store), write: requireWrite(d.auth), maxBody: Math.max(d.limits.maxBody, MAX_UPLOAD_BYTES) }));
  app.use((d.metrics ?? coordinatorMetrics(d)).router);
  app.use(dashboardRouter({ read }));

  app.use(edgeOut(d.logger, d.log));
  return app;
}
