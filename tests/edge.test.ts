/**
 * The coordinator's HTTP edge, against a real coordinator and redis-server: security headers on
 * every answer, the no-token write guard against DNS rebinding and cross-site posts, the write
 * rate limit, access logs that say who did what and never carry a secret, and a start-up error
 * that does not echo a malformed token.
 */
import { request, type IncomingHttpHeaders } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ERRORS } from '../contract/errors.js';
import { principalOf } from '../coordinator/auth.js';
import { startCoordinator } from '../coordinator/server.js';
import { uniquePrefix } from './fixtures/redis-server.js';
import { useCluster } from './helpers/cluster.js';
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
    // Reads stay open to anyone: the guard is for writes.
    expect((await send(c.url, 'GET', '/v1/matrices', { host: 'evil.example' })).status).toBe(200);
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
      const fromFlag = await runCli(['coordinator', '--token', secret], env);
      expect(fromFlag.code).toBe(ERRORS.CONFIG_INVALID.exit);
      expect(fromFlag.stderr).toMatch(/^fsbench: --token \(value not shown\b.*\[CONFIG_INVALID\]$/m);
      expect(fromFlag.stderr + fromFlag.stdout).not.toContain(secret);
      // Settings that are not secret still show what was given.
      const limit = await runCli(['coordinator'], { ...env, FSBENCH_WRITE_LIMIT: '-5' });
      expect(limit.code).toBe(ERRORS.CONFIG_INVALID.exit);
      expect(limit.stderr).toContain('FSBENCH_WRITE_LIMIT "-5" is invalid');
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
