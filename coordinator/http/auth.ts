/**
 * Who may do what. Mutating endpoints need `Authorization: Bearer <FSBENCH_TOKEN>`; reads need
 * it only with FSBENCH_READ_AUTH=token. With no token configured there is no open write API:
 * mutating requests are refused unless they come from a program on this machine (the CLI, curl),
 * which takes a loopback socket, a Host header naming localhost, no cross-site Origin and nothing
 * a reverse proxy adds. A web page can open a loopback socket too (a form posted cross-site, or a
 * name of its own rebound to 127.0.0.1), but it cannot forge those headers; a proxy on this
 * machine would make every network client look local, so whatever betrays one refuses the write.
 *
 * Open reads check the Host header (requireKnownHost): a page whose DNS name was rebound to this
 * machine reads with the browser's credentials-free same-origin access, and only its Host header,
 * which names the attacker's domain, gives it away. Missing credentials are 401, wrong ones 403,
 * each saying what to send.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { isIPv4, isIPv6 } from 'node:net';
import type { Request, RequestHandler } from 'express';
import { FsbenchError } from '../../contract/errors.js';

export interface AuthConfig {
  readonly token: string | undefined;
  readonly readAuth: 'open' | 'token';
  /** FSBENCH_ALLOWED_HOSTS: names besides localhost and IP addresses that an open read's Host may name (lower case). */
  readonly allowedHosts?: readonly string[];
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

/**
 * Headers that only a proxy adds (RFC 7239 `Forwarded`, the de-facto `X-Forwarded-*` and
 * `X-Real-IP`, RFC 9110 `Via`): a request carrying one came from somewhere else through a proxy
 * on this machine, whatever its socket and Host say.
 */
function proxyHeader(req: Request): string | undefined {
  const name = Object.keys(req.headers).find((h) => h === 'forwarded' || h === 'via' || h === 'x-real-ip' || h.startsWith('x-forwarded-'));
  // Node gives header names in lower case; the message names them as people write them.
  return name?.replace(/(^|-)([a-z])/g, (_m, dash: string, c: string) => `${dash}${c.toUpperCase()}`).replace(/^X-Real-Ip$/, 'X-Real-IP');
}

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
  const proxied = proxyHeader(req);
  if (proxied !== undefined) {
    return (
      `${what} refused: it carries ${proxied}, so a proxy on this machine passed it on from elsewhere, and ${NO_TOKEN}: ` +
      'behind a reverse proxy set FSBENCH_TOKEN on the coordinator and send it as a bearer token'
    );
  }
  // nginx's proxy_pass speaks HTTP/1.0 unless told otherwise, and adds no header of its own; the
  // CLI, curl and browsers speak 1.1 or later.
  if (req.httpVersion === '1.0') {
    return (
      `${what} refused: it came over HTTP/1.0, as a reverse proxy such as nginx passes requests on by default, and ${NO_TOKEN}: ` +
      'behind a reverse proxy set FSBENCH_TOKEN on the coordinator and send it as a bearer token; otherwise send it with the fsbench CLI or curl'
    );
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

/**
 * A Host header's name (lower case, an IPv6 address in its brackets) without the port; undefined
 * for anything that is no `host[:port]`.
 */
function hostName(header: string): string | undefined {
  return /^(\[[0-9a-f:.]+\]|[^:[\]]+)(?::\d{1,5})?$/i.exec(header)?.[1]?.toLowerCase();
}

/**
 * Whether a Host header can name this coordinator for an open read: localhost, any IP literal (a
 * rebinding page is always reached by a DNS name of its attacker's, which its Host carries), or
 * a name in FSBENCH_ALLOWED_HOSTS. No Host at all comes from no browser (HTTP/1.0; Node answers
 * HTTP/1.1 requests without one with 400 itself).
 */
function knownHost(config: AuthConfig, header: string | undefined): boolean {
  if (header === undefined) return true;
  const name = hostName(header);
  if (name === undefined) return false;
  if (name === 'localhost' || isIPv4(name)) return true;
  if (name.startsWith('[')) return isIPv6(name.slice(1, -1));
  return (config.allowedHosts ?? []).includes(name);
}

/** Probes answer whatever Host a load balancer or orchestrator sends, and say nothing worth reading. */
const UNCHECKED_PATHS = new Set(['/livez', '/healthz', '/readyz']);
const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Guards every open read (the API, /metrics, /openapi.json, the dashboard's files, event
 * streams) against DNS rebinding: a web page at a name its owner points at this machine's
 * address reads the answers as its own, so each read must name this machine in its Host header.
 * Not with FSBENCH_READ_AUTH=token, nor for a request with the token: no rebinding page has it.
 * Writes are guarded by the token, or without one by localRefusal.
 */
export function requireKnownHost(config: AuthConfig): RequestHandler {
  return (req, _res, next) => {
    if (config.readAuth === 'token' || !READ_METHODS.has(req.method) || UNCHECKED_PATHS.has(req.path)) {
      next();
      return;
    }
    const host = req.get('host');
    if (knownHost(config, host)) {
      next();
      return;
    }
    const sent = bearer(req.get('authorization'));
    if (config.token !== undefined && sent !== undefined && sameSecret(sent, config.token)) {
      next();
      return;
    }
    throw new FsbenchError(
      'FORBIDDEN',
      `${described(req)} refused: its Host header ${quoted(host ?? '')} names neither this machine (localhost, an IP address) nor a name in ` +
        'FSBENCH_ALLOWED_HOSTS, as a web page reading through a DNS name rebound to this machine would: add the name clients use to ' +
        'FSBENCH_ALLOWED_HOSTS on the coordinator, or set FSBENCH_READ_AUTH=token and send the bearer token',
    );
  };
}

/** The guard of a router built without the coordinator's (tests of a router alone): lets every request through. */
export const unguarded: RequestHandler = (_req, _res, next) => {
  next();
};

/** Guards a read route when reads are not open. */
export function requireRead(config: AuthConfig): RequestHandler {
  return (req, _res, next) => {
    if (config.readAuth === 'token') check(config, req, described(req));
    next();
  };
}

/** The line the coordinator logs at start, so nobody is surprised by a refused write. */
export function describeAuth(config: AuthConfig): string {
  const hosts = ['localhost', 'IP addresses', ...(config.allowedHosts ?? [])].join(', ');
  const reads = config.readAuth === 'open' ? `reads are open to requests whose Host is one of ${hosts} (FSBENCH_ALLOWED_HOSTS)` : 'reads need the bearer token too';
  if (config.token === undefined) {
    return `no FSBENCH_TOKEN: mutating requests are accepted only from loopback, addressed to localhost, not sent by another site nor through a proxy; ${reads}`;
  }
  return `mutating requests need the bearer token; ${reads}`;
}
