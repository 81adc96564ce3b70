/**
 * A small client of the coordinator's REST API, for the CLI, the tests and the benchmark. Error
 * answers become FsbenchErrors carrying the coordinator's message, so the CLI's one exit point
 * prints them like any other error.
 */
import { z } from 'zod';
import { ERROR_CODES, FsbenchError, type ErrorCode } from '../contract/errors.js';

export interface ServerSentEvent {
  readonly event: string;
  readonly data: string;
  readonly id: string | undefined;
}

function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === 'string' && code in ERROR_CODES;
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

async function failure(res: Response, what: string): Promise<FsbenchError> {
  const parsed = ErrorJson.safeParse(await res.json().catch(() => null));
  const error = parsed.success ? parsed.data.error : {};
  const { code } = error;
  const message = error.message ?? res.statusText;
  const issues = error.issues ?? [];
  const detail = issues.length > 0 ? `\n  ${issues.map((i) => `${i.path}: ${i.message}`).join('\n  ')}` : '';
  const text = `${what}: ${message} (HTTP ${res.status}${code === undefined ? '' : ` ${code}`})${detail}`;
  if (isErrorCode(code)) return new FsbenchError(code, text, issues);
  // The HTTP layer's own codes (NOT_FOUND, FORBIDDEN ...) are about what was asked, or the token.
  return new FsbenchError(res.status >= 500 ? 'INTERNAL' : 'CONFIG_INVALID', text, issues);
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

export class CoordinatorClient {
  constructor(
    readonly baseUrl: string,
    private readonly token?: string,
  ) {}

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
      throw new FsbenchError('CONFIG_INVALID', `cannot reach the coordinator at ${this.baseUrl} (FSBENCH_URL): ${cause}`);
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
