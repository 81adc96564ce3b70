/**
 * Whatever the coordinator logs while it answers a request (a submission, a cancellation, an
 * unexpected error) goes through that request's logger, so the line carries the request's id,
 * method, path and principal without the route passing them along.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { RequestHandler } from 'express';
import type { Logger } from 'pino';
import type { Log } from '../../log/index.js';

const requestLogger = new AsyncLocalStorage<Logger>();

/** A `Log` writing through `logger`, or through the logger of the request being answered. */
export function logTo(logger: Logger, level: 'info' | 'warn' | 'error' = 'info'): Log {
  return (message, fields = {}) => {
    (requestLogger.getStore() ?? logger)[level](fields, message);
  };
}

/** Runs the rest of a request with its own logger (pino-http's `req.log`) as the one `logTo` uses. */
export function withRequestLogger(): RequestHandler {
  return (req, _res, next) => {
    requestLogger.run(req.log, () => {
      next();
    });
  };
}

/** A request target without its query, whose values may carry anything; bounded. */
export function pathOf(url: string | undefined): string {
  const path = (url ?? '').split('?', 1)[0] ?? '';
  return path.length > 512 ? `${path.slice(0, 512)}...` : path;
}
