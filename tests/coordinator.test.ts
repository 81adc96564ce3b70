/**
 * The coordinator in-process against a real redis-server: the REST API's shapes, validation,
 * auth and limits, placement fan-out, cancellation, results and progress events. Agents here run
 * in the test process (startAgent); the fault tests run them as real processes.
 */
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Queue } from 'bullmq';
import type { Request, Response } from 'express';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { requireWrite } from '../coordinator/http/index.js';
import { CoordinatorClient, readEvents } from '../cli/client.js';
import { queueName } from '../queue/jobs.js';
import { Store } from '../coordinator/store/index.js';
import { FsbenchError } from '../contract/errors.js';
import { FSBENCH_VERSION } from '../host/version.js';
import { expandMatrix, parseMatrix } from '../contract/matrix.js';
import { uniquePrefix } from './fixtures/redis-server.js';
import { useCluster } from './helpers/cluster.js';

const TOKEN = 'a-test-token-0123456789';
const cluster = useCluster('coord');
const coordinator = (over: Parameters<typeof cluster.coordinator>[0] = {}) => cluster.coordinator(over);
const agent = (prefix: string, hostId: string, machine: string, labels: string[] = []) => cluster.agent(prefix, hostId, machine, labels);

async function post(url: string, body: string, type = 'application/json', token?: string): Promise<{ status: number; json: Record<string, unknown>; headers: Headers }> {
  const headers: Record<string, string> = { 'content-type': type };
  if (token !== undefined) headers['authorization'] = `Bearer ${token}`;
  const res = await fetch(`${url}/v1/matrices`, { method: 'POST', headers, body });
  return { status: res.status, json: (await res.json()) as Record<string, unknown>, headers: res.headers };
}

const noop = (extra: Record<string, unknown> = {}) =>
  JSON.stringify({ name: 'noop-test', workload: 'noop', repetitions: 2, warmup: 0, params: { value: [1, 2, 3] }, ...extra });

async function waiting(prefix: string, target: string): Promise<number> {
  const q = new Queue(queueName(target), { connection: { url: cluster.redis().url }, prefix });
  try {
    return await q.getJobCountByTypes('wait', 'delayed', 'prioritized');
  } finally {
    await q.close();
  }
}

async function waitDone(client: CoordinatorClient, id: string, ms = 20_000): Promise<Record<string, unknown>> {
  const end = Date.now() + ms;
  for (;;) {
    const m = (await client.json('GET', `/v1/matrices/${id}`)) as Record<string, unknown>;
    if (m['state'] === 'done' || m['state'] === 'cancelled') return m;
    if (Date.now() > end) throw new Error(`matrix ${id} still ${String(m['state'])}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('submitting a matrix', () => {
  it('answers 202 with id, cells, runs and an estimate, and queues every run', async () => {
    const c = await coordinator();
    const r = await post(c.url, noop({ params: { value: [1, 2, 3], sleep: '100ms' } }));
    expect(r.status).toBe(202);
    expect(r.json).toMatchObject({ state: 'queued', cells: 3, runs: 6, estimatedDurationMs: 600, estimatedDuration: '600ms' });
    expect(r.headers.get('location')).toBe(`/v1/matrices/${String(r.json['id'])}`);
    expect(r.json['warnings']).toEqual(['no agent is live: the runs wait in the queue until one starts']);
    expect(await waiting(c.prefix, 'any')).toBe(6);
  });

  it('accepts YAML', async () => {
    const c = await coordinator();
    const yaml = 'name: y\nworkload: noop\nrepetitions: 1\nwarmup: 0\nparams:\n  value: [5, 6]\n';
    const r = await post(c.url, yaml, 'application/yaml');
    expect(r.status).toBe(202);
    expect(r.json).toMatchObject({ name: 'y', cells: 2, runs: 2 });
  });

  it('refuses an invalid matrix with the path of each bad field and what is allowed', async () => {
    const c = await coordinator();
    const shape = await post(c.url, JSON.stringify({ name: 'x', workload: 'noop', repetitions: 0, extra: 1 }));
    expect(shape.status).toBe(400);
    const issues = (shape.json['error'] as { issues: { path: string }[] }).issues.map((i) => i.path);
    expect(issues).toEqual(expect.arrayContaining(['repetitions', '(matrix)']));

    const values = await post(c.url, noop({ params: { value: [1, -5], bogus: 2 } }));
    expect(values.status).toBe(400);
    expect(values.json['error']).toMatchObject({
      code: 'MATRIX_INVALID',
      issues: expect.arrayContaining([
        { path: 'params.value[1]', message: expect.stringContaining('allowed: an integer from 0 to 1000000000') as string },
        { path: 'params.bogus', message: expect.stringContaining('unknown parameter') as string },
      ]) as unknown,
    });
  });

  it('maps body errors to 400, 413 and 415 without a stack', async () => {
    const c = await coordinator({ maxBody: 2048 });
    const badJson = await post(c.url, '{"name": ');
    expect(badJson.status).toBe(400);
    expect(badJson.json['error']).toMatchObject({ code: 'BODY_INVALID' });
    const badYaml = await post(c.url, 'name: [unclosed', 'application/yaml');
    expect(badYaml.status).toBe(400);
    expect((badYaml.json['error'] as { message: string }).message).toMatch(/not valid YAML/);
    const big = await post(c.url, noop({ description: 'x'.repeat(4000) }));
    expect(big.status).toBe(413);
    expect(big.json['error']).toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
    const other = await post(c.url, 'name=x', 'application/x-www-form-urlencoded');
    expect(other.status).toBe(415);
    for (const r of [badJson, badYaml, big, other]) expect(JSON.stringify(r.json)).not.toMatch(/\n\s+at /);
  });

  it('refuses matrices over the limits on runs, duration and queue length, and placements no agent matches', async () => {
    const c = await coordinator({ maxRuns: 5, maxDuration: 1000, maxQueued: 6 });
    expect((await post(c.url, noop())).json['error']).toMatchObject({ code: 'MATRIX_TOO_LARGE' });
    const long = await post(c.url, noop({ repetitions: 1, params: { value: 1, sleep: '2s' } }));
    expect(long.status).toBe(422);
    expect(long.json['error']).toMatchObject({ code: 'MATRIX_TOO_LONG' });
    expect((await post(c.url, noop({ repetitions: 1 }))).status).toBe(202);
    const full = await post(c.url, noop({ repetitions: 2, params: { value: [1, 2] } }));
    expect(full.status).toBe(503);
    expect(full.headers.get('retry-after')).toBe('60');
    const all = await post(c.url, noop({ placement: 'all' }));
    expect(all.status).toBe(409);
    expect(all.json['error']).toMatchObject({ code: 'NO_MATCHING_AGENTS' });
  });
});

describe('auth', () => {
  it('with a token: 401 without it, 403 with another, reads open unless asked', async () => {
    const c = await coordinator({ token: TOKEN });
    const none = await post(c.url, noop());
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expect((await post(c.url, noop(), 'application/json', 'wrong-token-0123456789')).status).toBe(403);
    const ok = await post(c.url, noop(), 'application/json', TOKEN);
    expect(ok.status).toBe(202);
    expect((await fetch(`${c.url}/v1/matrices`)).status).toBe(200);
    expect((await fetch(`${c.url}/v1/matrices/${String(ok.json['id'])}`, { method: 'DELETE' })).status).toBe(401);

    const closed = await coordinator({ token: TOKEN, readAuth: 'token' });
    expect((await fetch(`${closed.url}/v1/matrices`)).status).toBe(401);
    expect((await fetch(`${closed.url}/v1/agents`, { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(200);
    expect((await fetch(`${closed.url}/healthz`)).status).toBe(200);
  });

  it('without a token, accepts writes from loopback only', async () => {
    const c = await coordinator();
    expect((await post(c.url, noop())).status).toBe(202);
    const guard = requireWrite({ token: undefined, readAuth: 'open' });
    const from = (address: string, extra: Record<string, string> = {}) => {
      const headers: Record<string, string> = { host: '127.0.0.1:8080', ...extra };
      return { socket: { remoteAddress: address }, method: 'POST', path: '/v1/matrices', httpVersion: '1.1', headers, get: (name: string) => headers[name.toLowerCase()] } as unknown as Request;
    };
    const res = null as unknown as Response;
    let passed = 0;
    guard(from('::ffff:127.0.0.1'), res, () => passed++);
    expect(passed).toBe(1);
    expect(() => guard(from('10.1.2.3'), res, () => passed++)).toThrow(FsbenchError);
    expect(() => guard(from('10.1.2.3'), res, () => passed++)).toThrow(/only allowed from loopback/);
    // Loopback, but through a proxy on this machine.
    expect(() => guard(from('127.0.0.1', { 'x-forwarded-for': '198.51.100.7' }), res, () => passed++)).toThrow(/carries X-Forwarded-For/);
    expect(passed).toBe(1);
  });
});

describe('running matrices on agents', () => {
  it('stores every run and answers runs, per-cell aggregates, CSV, Markdown and progress events', async () => {
    const c = await coordinator();
    await agent(c.prefix, 'host-a', 'alpha');
    const client = new CoordinatorClient(c.url);
    const r = await post(c.url, noop({ repetitions: 6, warmup: 1, params: { value: [10, 20] } }));
    const id = String(r.json['id']);
    const events = await fetch(`${c.url}/v1/matrices/${id}/events`, { headers: { accept: 'text/event-stream' } });
    expect(events.headers.get('content-type')).toMatch(/text\/event-stream/);
    const seen: { event: string; data: Record<string, unknown> }[] = [];
    if (events.body) for await (const e of readEvents(events.body)) seen.push({ event: e.event, data: JSON.parse(e.data) as Record<string, unknown> });
    expect(seen.at(-1)).toMatchObject({ event: 'end', data: { id, state: 'done', expectedRuns: 12, storedRuns: 12, okRuns: 12 } });
    expect(seen.filter((e) => e.event === 'progress').length).toBeGreaterThanOrEqual(2);

    const results = (await client.json('GET', `/v1/matrices/${id}/results`)) as { runs: Record<string, unknown>[]; report: { cells: Record<string, unknown>[] } };
    expect(results.runs).toHaveLength(12);
    expect(results.runs[0]).toMatchObject({ machine: 'alpha', state: 'ok', repetition: expect.any(Number) as number, metrics: { value: 10 } });
    expect(results.report.cells).toHaveLength(2);
    expect(results.report.cells[1]).toMatchObject({
      machine: 'alpha',
      ok: 6,
      metrics: { value: { n: 6, median: 20, mean: 20, stddev: 0, min: 20, max: 20, ciLow: 20, ciHigh: 20 } },
    });
    const csv = await client.text(`/v1/matrices/${id}/results?format=csv`);
    expect(csv.split('\r\n')[0]).toBe(
      'matrix,cellId,machine,workload,label,sleep,value,jitter,spin,slowdown,runs,ok,failed,skipped,problem,metric,unit,direction,n,median,mean,stddev,cv,min,max,ciLow,ciHigh,ciLevel,outliers,noisy,noise,cellNoisy,notes',
    );
    expect(csv).toContain(',alpha,noop,value=20,0,20,0,0,0,6,6,0,0,,value,1,neither,6,20,20,0,0,20,20,20,20,');
    const runsCsv = await client.text(`/v1/matrices/${id}/results?format=csv&table=runs`);
    expect(runsCsv.trim().split('\r\n')).toHaveLength(13);
    const md = await client.text(`/v1/matrices/${id}/results?format=md`);
    expect(md).toContain('| value=20 | value | 6 | 20 | 20 | 20 | 0.0% | 20..20 |');
    const bad = await fetch(`${c.url}/v1/matrices/${id}/results?format=xml`);
    expect(bad.status).toBe(400);
    const detail = await waitDone(client, id);
    expect(detail).toMatchObject({ state: 'done', machines: [{ machine: 'alpha', target: 'any', stored: 12, ok: 12 }], failures: [] });
  });

  it('fans `all` out per host, not per agent, and `labels` to the hosts whose agents carry them', async () => {
    const c = await coordinator();
    await agent(c.prefix, 'host-a', 'alpha', ['xfs', 'big']);
    await agent(c.prefix, 'host-a', 'alpha2');
    await agent(c.prefix, 'host-b', 'beta', ['ext4']);
    const client = new CoordinatorClient(c.url);
    // An agent is listed from its first heartbeat, which may come after its start returned.
    type Listed = { hosts: number; agents: Record<string, unknown>[] };
    let listed = (await client.json('GET', '/v1/agents')) as Listed;
    for (const end = Date.now() + 10_000; listed.agents.length < 3 && Date.now() < end; ) {
      await new Promise((r) => setTimeout(r, 50));
      listed = (await client.json('GET', '/v1/agents')) as Listed;
    }
    expect(listed.hosts).toBe(2);
    expect(listed.agents).toHaveLength(3);
    expect(listed.agents[0]).toMatchObject({ hostId: 'host-a', labels: ['xfs', 'big'], currentRun: null, fingerprint: { machine: 'alpha' } });

    // A workload that measures the kernel, so agents take the host lock (no-op runs do not).
    const metadata = { name: 'meta', workload: 'metadata', repetitions: 2, warmup: 0, placement: 'all', params: { fs: 'none', dirs: [1, 2], filesPerDir: 3, fileSize: 0, fsync: 'none', cache: 'warm' } };
    const all = await post(c.url, JSON.stringify(metadata));
    expect(all.json).toMatchObject({ runs: 8 });
    const allDone = await waitDone(client, String(all.json['id']));
    const targets = (allDone['machines'] as { target: string; stored: number; expected: number }[]).map((m) => [m.target, m.expected]);
    expect(new Set(targets.map((t) => t[0]))).toEqual(new Set(['host-a', 'host-b']));
    const results = (await client.json('GET', `/v1/matrices/${String(all.json['id'])}/results`)) as { runs: { target: string; machine: string; state: string; startedAt: string; finishedAt: string }[] };
    expect(results.runs).toHaveLength(8);
    expect(results.runs.every((r) => r.state === 'ok')).toBe(true);
    const onB = results.runs.filter((r) => r.target === 'host-b');
    expect(onB).toHaveLength(4);
    expect(onB.every((r) => r.machine === 'beta')).toBe(true);
    // Two agents serve host-a, but no-op runs take no host lock: "never two runs at once on one
    // host" is tests/host-lock.test.ts, with runs that measure the kernel and agents that contend.
    const onA = results.runs.filter((r) => r.target === 'host-a').sort((x, y) => x.startedAt.localeCompare(y.startedAt));
    for (let i = 1; i < onA.length; i++) expect(Date.parse(onA[i]?.startedAt ?? '')).toBeGreaterThanOrEqual(Date.parse(onA[i - 1]?.finishedAt ?? ''));

    const labelled = await post(c.url, noop({ placement: { labels: ['xfs'] } }));
    expect(labelled.json).toMatchObject({ runs: 6 });
    const labelledDone = await waitDone(client, String(labelled.json['id']));
    // Both agents of host-a may have taken some: one target, named by whichever machine ran each run.
    expect(new Set((labelledDone['machines'] as { target: string }[]).map((m) => m.target))).toEqual(new Set(['host-a']));
    expect((await post(c.url, noop({ placement: { labels: ['zfs'] } }))).status).toBe(409);
  });

  it('cancels what has not started', async () => {
    const c = await coordinator();
    const r = await post(c.url, noop());
    const id = String(r.json['id']);
    const del = await fetch(`${c.url}/v1/matrices/${id}`, { method: 'DELETE' });
    expect(del.status).toBe(200);
    expect(await del.json()).toMatchObject({ state: 'cancelled', removedRuns: 6 });
    expect(await waiting(c.prefix, 'any')).toBe(0);
    expect((await fetch(`${c.url}/v1/matrices/${id}`, { method: 'DELETE' })).status).toBe(409);
    const list = (await new CoordinatorClient(c.url).json('GET', '/v1/matrices?state=cancelled')) as { matrices: { id: string }[] };
    expect(list.matrices.map((m) => m.id)).toEqual([id]);
  });

  it('finishes enqueueing a matrix a dead coordinator had stored but not fully queued', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'fsbench-coord-'));
    const spec = parseMatrix({ name: 'half', workload: 'noop', repetitions: 2, warmup: 0, params: { value: [1, 2, 3] } });
    const store = Store.open(dataDir);
    store.createMatrix({ id: 'deadbeef', spec, targets: [{ target: 'any', machine: null }], cells: expandMatrix(spec), expectedRuns: 6, estimatedMs: 0 });
    store.close();
    const prefix = uniquePrefix('reenqueue');
    await coordinator({ dataDir, queuePrefix: prefix });
    expect(await waiting(prefix, 'any')).toBe(6);
  });
});

describe('the rest of the API', () => {
  it('answers 404 with a clear body, health and readiness', async () => {
    const c = await coordinator();
    const missing = await fetch(`${c.url}/v1/matrices/nope`);
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ error: { code: 'NOT_FOUND', message: 'no matrix nope' } });
    expect((await fetch(`${c.url}/v2/whatever`)).status).toBe(404);
    expect(await (await fetch(`${c.url}/healthz`)).json()).toEqual({ ok: true, version: FSBENCH_VERSION });
    expect(await (await fetch(`${c.url}/readyz`)).json()).toEqual({ ready: true, checks: { sqlite: 'ok', redis: 'ok' } });
    const direct = new Redis(cluster.redis().url);
    expect(await direct.hlen(`${c.prefix}:agents`)).toBe(0);
    direct.disconnect();
  });
});

describe("an agent's health file", () => {
  it('is rewritten while the agent reaches Redis and removed when it stops: a healthcheck needs no token', async () => {
    const c = await coordinator();
    const dir = await mkdtemp(path.join(os.tmpdir(), 'fsbench-coord-health-'));
    cluster.cleanup(() => rm(dir, { recursive: true, force: true }));
    const file = path.join(dir, 'health');
    const a = await cluster.agent(c.prefix, 'health-host', 'health-machine', [], { healthFile: file });
    const first = (await stat(file)).mtimeMs;
    expect(Date.now() - first).toBeLessThan(5_000);
    // The cluster's agents beat every 100 ms: the file follows.
    await new Promise((r) => setTimeout(r, 400));
    expect((await stat(file)).mtimeMs).toBeGreaterThan(first);
    expect(JSON.parse(await readFile(file, 'utf8'))).toMatchObject({ pid: process.pid });
    await a.stop();
    await expect(stat(file)).rejects.toThrow(/ENOENT/);
  });
});
