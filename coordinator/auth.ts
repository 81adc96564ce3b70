/**
 * Who may do what. Mutating endpoints need `Authorization: Bearer <FSBENCH_TOKEN>`; reads need
 * it only with FSBENCH_READ_AUTH=token. With no token configured there is no open write API:
 * mutating requests are refused unless they come from a program on this machine (the CLI, curl),
 * which takes a loopback socket, a Host header naming localhost and no cross-site Origin. A web
 * page can open a loopback socket too (a form posted cross-site, or a name of its own rebound to
 * 127.0.0.1), but it cannot forge those headers. Missing credentials are 401, wrong ones 403,
 * each saying what to send.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Request, RequestHandler } from 'express';
import { FsbenchError } from '../contract/errors.js';

export interface AuthConfig {
  readonly token: string | undefined;
  readonly readAuth: 'open' | 'token';
}

/** Who made a request, as the access log names it: never the token itself. */
export type Principal = 'token' | 'loopback' | 'anonymous';

/** What of a request identifies its sender: an express Request or a bare IncomingMessage. */
interface Sender {
  readonly headers: { readonly authorization?: string | undefined };
  readonly socket: { readonly remoteAddress?: string | undefined };
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

function bearer(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m?.[1] ?? '';
}

/** `token` when the request carries the right bearer token, else where its socket comes from. */
export function principalOf(config: AuthConfig, req: Sender): Principal {
  const sent = bearer(req.headers.authorization);
  if (config.token !== undefined && sent !== undefined && sameSecret(sent, config.token)) return 'token';
  // The socket's peer, never X-Forwarded-For: a header is not an address.
  return isLoopback(req.socket.remoteAddress) ? 'loopback' : 'anonymous';
}

/** Host headers of this machine by name or loopback address, with any port. */
const LOCAL_HOST = /^(?:localhost|127\.0\.0\.1|\[::1\])(?::\d{1,5})?$/i;
const NO_TOKEN = 'a coordinator without FSBENCH_TOKEN takes it only from programs on its own machine';
const USE_TOKEN = 'or set FSBENCH_TOKEN on the coordinator and send it as a bearer token';

/** Attacker-chosen text quoted in a message: bounded and printable. */
function quoted(value: string): string {
  const clean = value.replace(/[^\x20-\x7e]/g, '?');
  return JSON.stringify(clean.length > 80 ? `${clean.slice(0, 80)}...` : clean);
}

/**
 * Why a guarded request to a coordinator without a token is refused, or undefined when it may go
 * on. The loopback socket keeps other machines out; the headers keep out the browsers on this one.
 */
function localRefusal(req: Request, what: string): string | undefined {
  if (!isLoopback(req.socket.remoteAddress)) {
    return `${what} is only allowed from loopback while the coordinator has no token: set FSBENCH_TOKEN on the coordinator and send it as a bearer token`;
  }
  const host = req.get('host');
  if (host === undefined || !LOCAL_HOST.test(host)) {
    // What a page served from a name the attacker rebound to 127.0.0.1 (DNS rebinding) sends.
    return (
      `${what} refused: its Host header ${host === undefined ? 'is missing' : `${quoted(host)} does not name this machine`}, and ${NO_TOKEN}: ` +
      `send it to http://127.0.0.1:<port> or http://localhost:<port>, ${USE_TOKEN}`
    );
  }
  const origin = req.get('origin');
  if (origin !== undefined && !sameOrigin(origin, host)) {
    return `${what} refused: it comes from the web page at ${quoted(origin)}, and ${NO_TOKEN}: send it with the fsbench CLI or curl, ${USE_TOKEN}`;
  }
  if (req.get('sec-fetch-site')?.toLowerCase() === 'cross-site') {
    return `${what} refused: the browser says another site sent it (Sec-Fetch-Site: cross-site), and ${NO_TOKEN}: send it with the fsbench CLI or curl, ${USE_TOKEN}`;
  }
  return undefined;
}

/** Whether a browser's Origin is the coordinator's own page, reached by the same Host. */
function sameOrigin(origin: string, host: string): boolean {
  try {
    const page = new URL(origin);
    return (page.protocol === 'http:' || page.protocol === 'https:') && page.origin === new URL(`${page.protocol}//${host}`).origin;
  } catch {
    // `null` (a sandboxed frame, a file) and anything unparsable are no origin of ours.
    return false;
  }
}

function check(config: AuthConfig, req: Request, what: string): void {
  const { token } = config;
  if (token === undefined) {
    const refusal = localRefusal(req, what);
    if (refusal !== undefined) throw new FsbenchError('FORBIDDEN', refusal);
    return;
  }
  const sent = bearer(req.get('authorization'));
  if (sent === undefined) {
    throw new FsbenchError('UNAUTHORIZED', `${what} needs the header 'Authorization: Bearer <FSBENCH_TOKEN>'`, [], {
      'WWW-Authenticate': 'Bearer realm="fsbench"',
    });
  }
  if (!sameSecret(sent, token)) {
    throw new FsbenchError('FORBIDDEN', 'the bearer token is not the one the coordinator was started with (FSBENCH_TOKEN)');
  }
}

/** `POST /v1/matrices`: the whole path (a router's own req.path lacks its mount point), no query. */
function described(req: Request): string {
  const path = `${req.baseUrl}${req.path}`;
  return `${req.method} ${path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path}`;
}

/** Guards a mutating route. */
export function requireWrite(config: AuthConfig): RequestHandler {
  return (req, _res, next) => {
    check(config, req, described(req));
    next();
  };
}

/** Guards a read route when reads are not open. */
export function requireRead(config: AuthConfig): RequestHandler {
  return (req, _res, next) => {
    if (config.readAuth === 'token') check(config, req, described(req));
    next();
  };
}

/** The line the coordinator logs at start, so nobody is surprised by a refused write. */
export function describeAuth(config: AuthConfig): string {
  if (config.token === undefined) {
    return 'no FSBENCH_TOKEN: mutating requests are accepted only from loopback, addressed to localhost and not sent by another site; reads are open';
  }
  return `mutating requests need the bearer token; reads are ${config.readAuth === 'open' ? 'open' : 'token-protected too'}`;
}
