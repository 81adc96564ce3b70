/**
 * A small client of the coordinator's REST API, for the CLI, the tests and the benchmark. Error
 * answers become FsbenchErrors with the coordinator's code and message, so the CLI's one exit
 * point prints them like any other error, with the code unchanged and the catalog's exit code.
 * It never sends the token where the network could read it, unless told to (FSBENCH_INSECURE_TOKEN).
 */
import { BlockList, isIPv4, isIPv6 } from 'node:net';
import { z } from 'zod';
import { FsbenchError, isErrorCode, type ErrorCode } from '../contract/errors.js';
import type { Command } from 'commander';
import { loadSettings, settingOptions, type SettingName } from '../settings/index.js';

export interface ServerSentEvent {
  readonly event: string;
  readonly data: string;
  readonly id: string | undefined;
}

const ErrorJson = z.object({
  error: z
    .object({
      code: z.string().optional(),
      message: z.string().optional(),
      issues: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
    })
    .loose(),
});

/**
 * The code of an answer without an fsbench error body: something between the CLI and the
 * coordinator (a proxy, another server on that port) answered, and only its status says anything.
 */
function codeOfStatus(status: number): ErrorCode {
  if (status === 401) return 'UNAUTHORIZED';
  if (status === 403) return 'FORBIDDEN';
  if (status === 404) return 'NOT_FOUND';
  if (status === 413) return 'PAYLOAD_TOO_LARGE';
  if (status === 502 || status === 503 || status === 504) return 'UNAVAILABLE';
  return 'INTERNAL';
}

async function failure(res: Response, what: string): Promise<FsbenchError> {
  const parsed = ErrorJson.safeParse(await res.json().catch(() => null));
  const error = parsed.success ? parsed.data.error : {};
  const issues = error.issues ?? [];
  const message = `${what}: ${error.message ?? `HTTP ${res.status} ${res.statusText}`}`;
  // Messages such as the matrix parser's list their issues already: each bad field once.
  const unsaid = issues.map((i) => `${i.path}: ${i.message}`).filter((line) => !message.includes(line));
  const detail = unsaid.map((line) => `\n  ${line}`).join('');
  const retry = res.headers.get('retry-after');
  const headers: Record<string, string> = retry === null ? {} : { 'Retry-After': retry };
  const { code } = error;
  if (isErrorCode(code)) return new FsbenchError(code, `${message}${detail}`, issues, headers);
  if (code === undefined) return new FsbenchError(codeOfStatus(res.status), `${message}${detail}`, issues, headers);
  // A newer coordinator's code: kept in the message, so that it is not lost, until this fsbench is upgraded.
  return new FsbenchError('INTERNAL', `${message} (the coordinator answered HTTP ${res.status} ${code}, a code this fsbench does not know: upgrade it)${detail}`, issues, headers);
}

/** Parses a text/event-stream body into events (the subset of the format the coordinator writes). */
export async function* readEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<ServerSentEvent> {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true }).replace(/\r\n?/g, '\n');
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = 'message';
      let id: string | undefined;
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'event') event = value;
        else if (field === 'data') data.push(value);
        else if (field === 'id') id = value;
      }
      if (data.length > 0) yield { event, data: data.join('\n'), id };
    }
  }
}

/** 127.0.0.0/8 and ::1; BlockList also matches their IPv4-mapped form (::ffff:7f00:1). */
const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/** A URL's host that is this machine by definition: nothing sent there crosses a network. */
function isLoopbackHost(hostname: string): boolean {
  if (hostname === 'localhost') return true;
  // A URL keeps an IPv6 address in brackets, normalised (::ffff:127.0.0.1 is ::ffff:7f00:1).
  const bare = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
  if (isIPv4(bare)) return LOOPBACK.check(bare, 'ipv4');
  return isIPv6(bare) && LOOPBACK.check(bare, 'ipv6');
}

/**
 * Refuses a token bound for plain HTTP off this machine: whoever reads it on the way (a shared
 * network, a Wi-Fi, a compromised router) can submit matrices, which agents run as root.
 */
function refuseCleartextToken(baseUrl: string): void {
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    // The settings check FSBENCH_URL; a bad URL here fails at the first request, saying so.
    return;
  }
  if (url.protocol !== 'http:' || isLoopbackHost(url.hostname)) return;
  throw new FsbenchError(
    'CONFIG_INVALID',
    `refusing to send FSBENCH_TOKEN over plain http:// to ${url.host}, where anyone on the network path can read it: ` +
      `use https:// (a TLS proxy in front of the coordinator) or an SSH tunnel (ssh -L 8080:127.0.0.1:8080 ${url.hostname}, then FSBENCH_URL=http://127.0.0.1:8080); ` +
      'on a network you trust, FSBENCH_INSECURE_TOKEN=1 (--insecure-token) sends it anyway',
  );
}

export interface ClientOptions {
  /** Send the token over plain HTTP to another machine too (FSBENCH_INSECURE_TOKEN). */
  readonly insecureToken?: boolean;
}

export class CoordinatorClient {
  constructor(
    readonly baseUrl: string,
    private readonly token?: string,
    options: ClientOptions = {},
  ) {
    if (token !== undefined && token !== '' && options.insecureToken !== true) refuseCleartextToken(baseUrl);
  }

  /** `init.what` names the request in error messages (default: the method and path). */
  async fetch(method: string, path: string, init: { body?: string; contentType?: string; accept?: string; what?: string } = {}): Promise<Response> {
    const headers: Record<string, string> = { accept: init.accept ?? 'application/json' };
    if (init.contentType) headers['content-type'] = init.contentType;
    if (this.token) headers['authorization'] = `Bearer ${this.token}`;
    const url = new URL(path, this.baseUrl);
    let res: Response;
    try {
      res = await fetch(url, { method, headers, ...(init.body === undefined ? {} : { body: init.body }) });
    } catch (err) {
      const cause = err instanceof Error && err.cause instanceof Error ? err.cause.message : String(err);
      throw new FsbenchError('UNAVAILABLE', `cannot reach the coordinator at ${this.baseUrl}: ${cause}; start it, or point FSBENCH_URL (--url) at it`);
    }
    if (!res.ok) throw await failure(res, init.what ?? `${method} ${url.pathname}`);
    return res;
  }

  async json(method: string, path: string, body?: unknown): Promise<unknown> {
    const res = await this.fetch(method, path, body === undefined ? {} : { body: JSON.stringify(body), contentType: 'application/json' });
    return res.json();
  }

  async text(path: string, accept = '*/*'): Promise<string> {
    return (await this.fetch('GET', path, { accept })).text();
  }

  /** Streams a matrix's progress events until the coordinator ends the stream. */
  async *events(matrixId: string): AsyncGenerator<ServerSentEvent> {
    const res = await this.fetch('GET', `/v1/matrices/${encodeURIComponent(matrixId)}/events`, { accept: 'text/event-stream' });
    if (!res.body) return;
    yield* readEvents(res.body);
  }
}

/** What the CLI's commands that talk to a coordinator take: where it is, the token, and whether plain HTTP may carry it. */
/** A command's flags for these settings; a secret's file flag (--token-file) comes with it. */
export function withSettings(cmd: Command, names: readonly SettingName[]): Command {
  for (const o of names.flatMap(settingOptions)) cmd.option(o.flags, o.description);
  return cmd;
}

export const CLIENT_SETTINGS = ['url', 'token', 'insecureToken'] as const satisfies readonly SettingName[];

/** The CLI's client of the coordinator, from a command's flags and the environment. */
export function clientFromSettings(flags: Readonly<Record<string, unknown>>, env: NodeJS.ProcessEnv = process.env): CoordinatorClient {
  const s = loadSettings(CLIENT_SETTINGS, flags, env);
  return new CoordinatorClient(s.url, s.token, { insecureToken: s.insecureToken });
}
