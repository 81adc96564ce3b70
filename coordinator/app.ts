/**
 * The coordinator's HTTP API as an express app, built from its dependencies and never listening
 * by itself: tests drive it in-process, `server.ts` gives it a port. Every answer passes the edge
 * first: an access line in the log, security headers (helmet), a rate limit on writes, and for
 * open reads a Host header that names this machine (auth.ts, against DNS rebinding).
 */
import { randomUUID } from 'node:crypto';
import express, { type Express, type Request, type RequestHandler, type Response } from 'express';
import { rateLimit } from 'express-rate-limit';
import helmet from 'helmet';
import type { Logger, SerializedRequest, SerializedResponse } from 'pino';
import { pinoHttp } from 'pino-http';
import { compareRouter, resultsUploadRouter } from './compare-routes.js';
import { History } from './history.js';
import { historyRouter } from './history-routes.js';
import { storeResultSink, storeRunSource } from './store/index.js';
import { dashboardRouter } from './dashboard.js';
import type { CoordinatorMetrics } from './metrics-route.js';
import { principalOf, requireKnownHost, requireRead, requireWrite, errorHandler, logTo, pathOf, withRequestLogger, withDeadline, type AuthConfig } from './http/index.js';
import { FsbenchError, messageOf } from '../contract/errors.js';
import { matricesRouter, type MatricesDeps } from './matrices.js';
import { agentsRouter } from './agents.js';
import { coordinatorMetrics } from './metrics.js';
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
const RATE_WINDOW_MS = 60_000;
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * The dashboard is same-origin files only (scripts, modules, one stylesheet), reads the API with
 * fetch and EventSource, and draws on canvas, which needs no source. Nothing may frame it.
 * No `upgrade-insecure-requests`: the coordinator speaks plain HTTP, also to other machines.
 */
function securityHeaders(): RequestHandler {
  return helmet({
    contentSecurityPolicy: {
      useDefaults: false,
      directives: {
        defaultSrc: ["'self'"],
        scriptSrc: ["'self'"],
        scriptSrcAttr: ["'none'"],
        styleSrc: ["'self'"],
        // The page's favicon is `data:,`, so that browsers do not ask for /favicon.ico.
        imgSrc: ["'self'", 'data:'],
        connectSrc: ["'self'"],
        fontSrc: ["'self'"],
        objectSrc: ["'none'"],
        baseUri: ["'none'"],
        formAction: ["'self'"],
        frameAncestors: ["'none'"],
      },
    },
    // Plain HTTP: whoever terminates TLS in front decides whether the name is HTTPS-only.
    strictTransportSecurity: false,
    xFrameOptions: { action: 'deny' },
  });
}

/** One line per request, when it ends: method, path without the query, status, duration, principal. */
function accessLog(logger: Logger, auth: AuthConfig): RequestHandler {
  return pinoHttp<Request, Response>({
    logger,
    genReqId: (_req, res) => {
      const id = randomUUID();
      // Quoted in a bug report, it finds the request's lines in the log.
      res.setHeader('X-Request-Id', id);
      return id;
    },
    // Not the standard serializers: they log every header and the query string.
    serializers: {
      req: (r: SerializedRequest) => ({ id: r.id, method: r.method, path: pathOf(r.url), remoteAddress: r.remoteAddress }),
      res: (r: SerializedResponse) => ({ statusCode: r.statusCode }),
    },
    customAttributeKeys: { responseTime: 'durationMs' },
    customProps: (req) => ({ principal: principalOf(auth, req) }),
    // A 503 answers "not now" (Redis unreachable, the queue full): a state the log has told already, not a failure.
    customLogLevel: (_req, res, err) => (err !== undefined || (res.statusCode >= 500 && res.statusCode !== 503) ? 'error' : res.statusCode >= 400 ? 'warn' : 'info'),
    customSuccessMessage: (req, res, ms) => `${req.method} ${pathOf(req.originalUrl)} ${res.statusCode} ${ms}ms`,
    customErrorMessage: (req, res, err) => `${req.method} ${pathOf(req.originalUrl)} ${res.statusCode}: ${err.message}`,
  });
}

/**
 * Writes (any method but GET, HEAD, OPTIONS) per client address, counted before auth so that
 * guessing the token is bounded too. The socket's address is the client: forwarded headers are
 * not believed, so behind a proxy all clients share one budget.
 */
function writeLimiter(limit: number): RequestHandler {
  return rateLimit({
    windowMs: RATE_WINDOW_MS,
    limit,
    skip: (req) => SAFE_METHODS.has(req.method),
    standardHeaders: 'draft-7',
    legacyHeaders: false,
    validate: { xForwardedForHeader: false },
    handler: (req, res, next) => {
      // Set by the limiter from the client's window; the error handler writes the JSON body.
      const header = res.getHeader('Retry-After');
      const retryAfter = typeof header === 'number' || typeof header === 'string' ? String(header) : String(RATE_WINDOW_MS / 1000);
      next(
        new FsbenchError(
          'RATE_LIMITED',
          `${req.method} ${pathOf(req.originalUrl)} refused: more than ${limit} writes in a minute from ${req.ip ?? 'this client'} (FSBENCH_WRITE_LIMIT on the coordinator); try again in ${retryAfter} s`,
          [],
          { 'Retry-After': retryAfter },
        ),
      );
    },
  });
}

export function buildApp(d: AppDeps): Express {
  const app = express();
  app.disable('x-powered-by');
  // The peer address decides loopback trust; forwarded headers are never believed.
  app.set('trust proxy', false);
  app.set('json spaces', 0);

  if (d.logger !== undefined) app.use(accessLog(d.logger, d.auth), withRequestLogger());
  app.use(securityHeaders());
  if (d.writeLimit !== undefined && d.writeLimit > 0) app.use(writeLimiter(d.writeLimit));
  // Before every route, those added later too; /livez, /healthz and /readyz are exempt inside.
  app.use(requireKnownHost(d.auth));

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

  app.use((req) => {
    throw new FsbenchError('NOT_FOUND', `no route ${req.method} ${req.path}`);
  });
  // The error handler logs only what is unexpected (a bug, the machine failing): at level error.
  app.use(errorHandler(d.logger !== undefined ? logTo(d.logger, 'error') : d.log));
  return app;
}
