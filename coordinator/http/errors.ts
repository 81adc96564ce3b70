/**
 * The one error handler of the HTTP API. Every error leaves as `{ error: { code, message,
 * issues? } }` with a code and status from the contract's catalog: FsbenchErrors as they are,
 * zod errors as 400 BODY_INVALID with each bad field's path, body-parser errors keeping their 4xx
 * meaning (too large: 413; a media type, charset or encoding a route does not take is body.ts's
 * one 415 answer, before this), and anything unexpected as a 500 INTERNAL whose details stay in the
 * log. Never a stack.
 */
import type { ErrorRequestHandler } from 'express';
import { ZodError } from 'zod';
import { ERRORS, FsbenchError, type ErrorCode, type Issue } from '../../contract/errors.js';

export interface ErrorBody {
  readonly error: { readonly code: ErrorCode; readonly message: string; readonly issues?: readonly Issue[] };
}

interface BodyParserError {
  readonly type: string;
  readonly status: number;
  readonly message: string;
}

function isBodyParserError(err: unknown): err is BodyParserError {
  if (typeof err !== 'object' || err === null) return false;
  const e = err as Record<string, unknown>;
  return typeof e['type'] === 'string' && typeof e['status'] === 'number';
}

export interface DescribedError {
  readonly status: number;
  readonly body: ErrorBody;
  readonly headers: Readonly<Record<string, string>>;
  /** Worth the stack in the log: a bug, or the machine failing, rather than a refused request. */
  readonly unexpected: boolean;
}

/** Status and body for anything thrown by a route. */
export function describeError(err: unknown): DescribedError {
  const answer = (
    code: ErrorCode,
    message: string,
    issues: readonly Issue[] = [],
    headers: Readonly<Record<string, string>> = {},
    status: number = ERRORS[code].status,
  ): DescribedError => ({
    status,
    body: { error: issues.length > 0 ? { code, message, issues } : { code, message } },
    headers,
    // 503s (queue full, Redis away) say all there is to say; other 5xx deserve the stack.
    unexpected: status >= 500 && status !== 503,
  });
  if (err instanceof FsbenchError) return answer(err.code, err.message, err.issues, err.headers);
  if (err instanceof ZodError) {
    const issues = err.issues.map((i) => ({ path: i.path.map(String).join('.') || '(body)', message: i.message }));
    return answer('BODY_INVALID', 'the request is invalid', issues);
  }
  if (isBodyParserError(err)) {
    if (err.type === 'entity.too.large') return answer('PAYLOAD_TOO_LARGE', 'the request body is larger than the coordinator accepts (FSBENCH_MAX_BODY)');
    if (err.type === 'entity.parse.failed') return answer('BODY_INVALID', `the body is not valid JSON: ${err.message}`);
    // Any other 4xx of body-parser (a bad Content-Length, an aborted body) keeps its status.
    if (err.status >= 400 && err.status < 500) return answer('BODY_INVALID', err.message, [], {}, err.status);
  }
  return answer('INTERNAL', "internal error: the coordinator's log has the details");
}

/**
 * The one answer when a part of the coordinator a route needs is not there (a router mounted
 * without it, as the API's tests do): 503 UNAVAILABLE, saying what is missing, what needs it and
 * how to have it, rather than a 500 that reads like a bug.
 */
export function absent(missing: string, neededFor: string, enable: string): FsbenchError {
  return new FsbenchError('UNAVAILABLE', `this coordinator keeps no ${missing}, which ${neededFor} needs: ${enable}`);
}

export function errorHandler(log: (line: string) => void): ErrorRequestHandler {
  return (err: unknown, req, res, next) => {
    if (res.headersSent) {
      // Part of a streamed answer is out: Express's own handler cuts the connection, the only
      // honest signal left, and logs the error.
      next(err);
      return;
    }
    const d = describeError(err);
    if (d.unexpected) {
      // The path without its query: a query may hold what a client should not have sent in one.
      log(`${req.method} ${req.baseUrl}${req.path}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    }
    res.status(d.status).set(d.headers).json(d.body);
  };
}
