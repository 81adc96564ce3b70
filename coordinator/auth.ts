/**
 * Who may do what. Mutating endpoints need `Authorization: Bearer <FSBENCH_TOKEN>`; reads need
 * it only with FSBENCH_READ_AUTH=token. With no token configured there is no open write API:
 * mutating requests are refused unless they come from loopback (the CLI on the same machine).
 * Missing credentials are 401, wrong ones 403, each saying what to send.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Request, RequestHandler } from 'express';
import { FsbenchError } from '../contract/errors.js';

export interface AuthConfig {
  readonly token: string | undefined;
  readonly readAuth: 'open' | 'token';
}

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Constant-time comparison of two secrets of any length. */
function sameSecret(a: string, b: string): boolean {
  return timingSafeEqual(digest(a), digest(b));
}

export function isLoopback(address: string | undefined): boolean {
  if (address === undefined) return false;
  return address === '::1' || address.startsWith('127.') || address.startsWith('::ffff:127.');
}

function bearer(req: Request): string | undefined {
  const header = req.get('authorization');
  if (header === undefined) return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m?.[1] ?? '';
}

function check(config: AuthConfig, req: Request, what: string): void {
  const { token } = config;
  if (token === undefined) {
    // The socket's peer, never X-Forwarded-For: a header is not an address.
    if (isLoopback(req.socket.remoteAddress)) return;
    throw new FsbenchError(
      'FORBIDDEN',
      `${what} is only allowed from loopback while the coordinator has no token: set FSBENCH_TOKEN on the coordinator and send it as a bearer token`,
    );
  }
  const sent = bearer(req);
  if (sent === undefined) {
    throw new FsbenchError('UNAUTHORIZED', `${what} needs the header 'Authorization: Bearer <FSBENCH_TOKEN>'`, [], {
      'WWW-Authenticate': 'Bearer realm="fsbench"',
    });
  }
  if (!sameSecret(sent, token)) {
    throw new FsbenchError('FORBIDDEN', 'the bearer token is not the one the coordinator was started with (FSBENCH_TOKEN)');
  }
}

/** Guards a mutating route. */
export function requireWrite(config: AuthConfig): RequestHandler {
  return (req, _res, next) => {
    check(config, req, `${req.method} ${req.path}`);
    next();
  };
}

/** Guards a read route when reads are not open. */
export function requireRead(config: AuthConfig): RequestHandler {
  return (req, _res, next) => {
    if (config.readAuth === 'token') check(config, req, `${req.method} ${req.path}`);
    next();
  };
}

/** The line the coordinator logs at start, so nobody is surprised by a refused write. */
export function describeAuth(config: AuthConfig): string {
  if (config.token === undefined) {
    return 'no FSBENCH_TOKEN: mutating requests are accepted from loopback only; reads are open';
  }
  return `mutating requests need the bearer token; reads are ${config.readAuth === 'open' ? 'open' : 'token-protected too'}`;
}
