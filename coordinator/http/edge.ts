/**
 * The edge every request passes before its route, in order: an access line in the log (and the
 * request's own logger for what is logged while it is answered), security headers (helmet), a
 * rate limit on writes, and for open reads a Host header that names this machine (auth.ts,
 * against DNS rebinding); after every route, 404 for what none answered and the one error handler.
 * The rate limit on costly reads (readLimiter) is put by their routes before them.
 */
import { randomUUID } from 'node:crypto';
import type { ErrorRequestHandler, Request, RequestHandler, Response } from 'express';
import { rateLimit } from 'express-rate-limit';
import helmet from 'helmet';
import type { Logger, SerializedRequest, SerializedResponse } from 'pino';
import { pinoHttp } from 'pino-http';
import { FsbenchError } from '../../contract/errors.js';
import { principalOf, requireKnownHost, type AuthConfig } from './auth.js';
import { errorHandler } from './errors.js';
import { logTo, pathOf, withRequestLogger } from './request-log.js';

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
 * Requests per client address per minute, of those `counts` picks; more are refused with 429
 * RATE_LIMITED and Retry-After, naming `what` and the `setting` that raises the limit. The
 * socket's address is the client: forwarded headers are not believed, so behind a proxy all
 * clients share one budget.
 */
function clientLimiter(limit: number, what: string, setting: string, counts: (req: Request) => boolean): RequestHandler {
  return rateLimit({
    windowMs: RATE_WINDOW_MS,
    limit,
    skip: (req) => !counts(req),
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
          `${req.method} ${pathOf(req.originalUrl)} refused: more than ${limit} ${what} in a minute from ${req.ip ?? 'this client'} (${setting} on the coordinator); try again in ${retryAfter} s`,
          [],
          { 'Retry-After': retryAfter },
        ),
      );
    },
  });
}

/** Writes (any method but GET, HEAD, OPTIONS), counted before auth so that guessing the token is bounded too. */
function writeLimiter(limit: number): RequestHandler {
  return clientLimiter(limit, 'writes', 'FSBENCH_WRITE_LIMIT', (req) => !SAFE_METHODS.has(req.method));
}

/**
 * Reads that cost the coordinator CPU and memory (comparisons, gates, history), per client
 * address per minute, in one budget for every route it is put before; unlimited when 0.
 */
export function readLimiter(limit: number): RequestHandler {
  if (limit <= 0) {
    return (_req, _res, next) => {
      next();
    };
  }
  return clientLimiter(limit, 'comparisons, gates and history reads', 'FSBENCH_READ_LIMIT', () => true);
}

export interface EdgeOptions {
  readonly auth: AuthConfig;
  /** Gets an access line per request, and is what logTo writes through while a request is answered; no access lines when not given. */
  readonly logger?: Logger | undefined;
  /** Most writes per client address per minute (FSBENCH_WRITE_LIMIT); unlimited when not given or 0. */
  readonly writeLimit?: number | undefined;
}

/** What every request passes before its route. */
export function edgeIn(o: EdgeOptions): RequestHandler[] {
  return [
    ...(o.logger !== undefined ? [accessLog(o.logger, o.auth), withRequestLogger()] : []),
    securityHeaders(),
    ...(o.writeLimit !== undefined && o.writeLimit > 0 ? [writeLimiter(o.writeLimit)] : []),
    // Before every route, those added later too; /livez, /healthz and /readyz are exempt inside.
    requireKnownHost(o.auth),
  ];
}

/**
 * After every route: 404 for a request none answered, and the error handler, which logs only what
 * is unexpected (a bug, the machine failing), at level error.
 */
export function edgeOut(logger: Logger | undefined, log: (line: string) => void): [RequestHandler, ErrorRequestHandler] {
  return [
    (req) => {
      throw new FsbenchError('NOT_FOUND', `no route ${req.method} ${req.path}`);
    },
    errorHandler(logger !== undefined ? logTo(logger, 'error') : log),
  ];
}
