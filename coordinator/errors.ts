/**
 * The one error handler of the HTTP API. Every error leaves as `{ error: { code, message,
 * issues? } }` with a stable code and a status: FsbenchError codes map through the contract,
 * zod errors become 400 with each bad field's path, body-parser errors keep their 4xx meaning
 * (too large: 413), and anything unexpected is a 500 whose details stay in the log. Never a stack.
 */
import type { ErrorRequestHandler } from 'express';
import { ZodError } from 'zod';
import { FsbenchError } from '../contract/errors.js';

/** Codes of the HTTP layer itself; the contract's codes cover what the matrix and runs can get wrong. */
export const HTTP_ERRORS = {
  BODY_INVALID: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  CONFLICT: 409,
  NO_MATCHING_AGENTS: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  MATRIX_TOO_LONG: 422,
  QUEUE_FULL: 503,
  UNAVAILABLE: 503,
} as const;
export type HttpErrorCode = keyof typeof HTTP_ERRORS;

export interface Issue {
  readonly path: string;
  readonly message: string;
}

export class HttpError extends Error {
  override readonly name = 'HttpError';
  constructor(
    readonly code: HttpErrorCode,
    message: string,
    readonly issues: readonly Issue[] = [],
    /** Extra headers, such as WWW-Authenticate or Retry-After. */
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
  }

  get status(): number {
    return HTTP_ERRORS[this.code];
  }
}

export interface ErrorBody {
  readonly error: { readonly code: string; readonly message: string; readonly issues?: readonly Issue[] };
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

/** Status and body for anything thrown by a route. */
export function describeError(err: unknown): { status: number; body: ErrorBody; headers: Readonly<Record<string, string>>; unexpected: boolean } {
  const body = (code: string, message: string, issues: readonly Issue[] = []): ErrorBody => ({
    error: issues.length > 0 ? { code, message, issues } : { code, message },
  });
  if (err instanceof HttpError) return { status: err.status, body: body(err.code, err.message, err.issues), headers: err.headers, unexpected: false };
  if (err instanceof FsbenchError) {
    return { status: err.httpStatus, body: body(err.code, err.message, err.issues), headers: {}, unexpected: err.httpStatus >= 500 };
  }
  if (err instanceof ZodError) {
    const issues = err.issues.map((i) => ({ path: i.path.map(String).join('.') || '(body)', message: i.message }));
    return { status: 400, body: body('BODY_INVALID', 'the request is invalid', issues), headers: {}, unexpected: false };
  }
  if (isBodyParserError(err)) {
    if (err.type === 'entity.too.large') {
      return { status: 413, body: body('PAYLOAD_TOO_LARGE', 'the request body is larger than the coordinator accepts (FSBENCH_MAX_BODY)'), headers: {}, unexpected: false };
    }
    if (err.type === 'entity.parse.failed') {
      return { status: 400, body: body('BODY_INVALID', `the body is not valid JSON: ${err.message}`), headers: {}, unexpected: false };
    }
    if (err.type === 'encoding.unsupported' || err.type === 'charset.unsupported') {
      return { status: 415, body: body('UNSUPPORTED_MEDIA_TYPE', err.message), headers: {}, unexpected: false };
    }
    if (err.status >= 400 && err.status < 500) {
      return { status: err.status, body: body('BODY_INVALID', err.message), headers: {}, unexpected: false };
    }
  }
  return {
    status: 500,
    body: body('INTERNAL', "internal error: the coordinator's log has the details"),
    headers: {},
    unexpected: true,
  };
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
      log(`${req.method} ${req.originalUrl}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    }
    res.status(d.status).set(d.headers).json(d.body);
  };
}
