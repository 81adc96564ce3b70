/**
 * Heavy readers against a real coordinator (and redis-server): results pages that return every
 * run exactly once, the caps on concurrent downloads and event streams (a slot held open by a
 * client that stops reading, freed when it goes away), /metrics behind the read token, and the
 * bound on repetitions per cell in uploads and compare. Matrices are written into the
 * coordinator's database directly (its Store on the same file), as the collector would.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { readEvents } from '../cli/client.js';
import { expandMatrix, parseMatrix, type Cell } from '../contract/matrix.js';
import type { RunResult } from '../contract/result.js';
import { renderReport, runJson, runView } from '../coordinator/reports/index.js';
import { RESULTS_PAGE_DEFAULT } from '../coordinator/routes/index.js';
import { Store, type StoredRun } from '../coordinator/store/index.js';
import { syntheticRunStream } from './fixtures/synthetic.js';
import { uniquePrefix } from './fixtures/redis-server.js';
import { useCluster } from './helpers/cluster.js';

const TOKEN = 'a-readers-token-0123456789';
const CLI = path.resolve(import.meta.dirname, '..', 'dist', 'cli', 'fsbench.js');
const cluster = useCluster('readers');

const Page = z
  .object({
    matrix: z.object({ id: z.string() }).loose(),
    report: z.object({ cells: z.array(z.unknown()) }).loose().optional(),
    runs: z.array(z.object({ cellId: z.string(), machine: z.string(), repetition: z.number(), histograms: z.record(z.string(), z.unknown()).optional() }).loose()),
    next: z.string().nullable(),
  })
  .strict();
const ErrorBody = z.object({ error: z.object({ code: z.string(), message: z.string(), issues: z.array(z.object({ path: z.string(), message: z.string() })).optional() }) });

function cellsOf(n: number): Cell[] {
  return expandMatrix(parseMatrix({ name: 'readers', workload: 'inotify', repetitions: 1, warmup: 0, params: { files: Array.from({ length: n }, (_, i) => 64 * (i + 1)) } }));
}

/**
 * A finished matrix of `cells` x `repetitions` runs on each machine (one target per machine),
 * stored into the coordinator's database. `buckets` widens each run's latency histogram.
 */
function storeMatrix(dataDir: string, id: string, o: { cells: number; repetitions: number; machines: readonly string[]; buckets?: number }): number {
  const store = Store.open(dataDir);
  try {
    const cells = cellsOf(o.cells);
    const spec = parseMatrix({ name: id, workload: 'inotify', repetitions: Math.min(o.repetitions, 1000), warmup: 0, placement: 'all' });
    const targets = o.machines.map((machine) => ({ target: `host-${machine}`, machine }));
    const expected = cells.length * o.repetitions * targets.length;
    store.createMatrix({ id, spec, targets, cells, expectedRuns: expected, estimatedMs: 0 });
    store.markEnqueued(id);
    for (const [i, t] of targets.entries()) {
      const batch: StoredRun[] = [];
      for (const result of syntheticRunStream(cells, o.repetitions, { matrixId: id, machine: { machine: t.machine }, seed: i + 1 })) {
        const wide = o.buckets === undefined ? result : withBuckets(result, o.buckets);
        batch.push({ kind: 'result', matrixId: id, target: t.target, result: wide, attempts: 1 });
      }
      store.storeRuns(batch);
    }
    return expected;
  } finally {
    store.close();
  }
}

function withBuckets(r: RunResult, n: number): RunResult {
  const buckets = Array.from({ length: n }, (_, i): [number, number, number] => [1000 * (i + 1), 1000 * (i + 2), 1 + (i % 7)]);
  return r.state === 'ok' ? { ...r, histograms: { writeToEventLatency: { unit: 'ns', buckets } } } : r;
}

async function page(url: string): Promise<z.infer<typeof Page>> {
  const res = await fetch(url);
  expect(res.status).toBe(200);
  return Page.parse(await res.json());
}

/** Polls `f` until it returns true (the coordinator sees a closed socket a moment after the client closes it). */
async function eventually(f: () => Promise<boolean>, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await f())) {
    if (Date.now() > end) throw new Error('the condition did not hold in time');
    await sleep(50);
  }
}

/**
 * A client that sends a request, takes the status line and headers, then stops reading: the
 * coordinator's writes fill the socket and it waits for a drain that never comes.
 */
async function stalledClient(port: number, path: string): Promise<{ head: string; socket: net.Socket }> {
  const socket = net.connect(port, '127.0.0.1');
  await once(socket, 'connect');
  socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
  const [first] = (await once(socket, 'data')) as [Buffer];
  socket.pause();
  return { head: first.toString('latin1', 0, 200), socket };
}

describe('results pages', () => {
  it('returns every run exactly once across pages, the report on the first page only, and next null at the end', async () => {
    const c = await cluster.coordinator();
    const total = storeMatrix(c.dataDir, 'paged', { cells: 30, repetitions: 3, machines: ['alpha', 'beta'] });
    expect(total).toBe(180);
    const keys: string[] = [];
    let url = `${c.url}/v1/matrices/paged/results?limit=7`;
    let pages = 0;
    for (;;) {
      const p = await page(url);
      pages++;
      expect(p.report !== undefined).toBe(pages === 1);
      expect(p.runs.length).toBeLessThanOrEqual(7);
      keys.push(...p.runs.map((r) => `${r.cellId}/${r.machine}/${r.repetition}`));
      if (p.next === null) break;
      url = `${c.url}/v1/matrices/paged/results?limit=7&cursor=${encodeURIComponent(p.next)}`;
    }
    expect(pages).toBe(Math.ceil(total / 7));
    expect(keys).toHaveLength(total);
    expect(new Set(keys).size).toBe(total);
    // In the matrix's cell order, as the unpaged answer always was.
    const order = cellsOf(30).map((cell) => cell.id);
    const positions = keys.map((k) => order.indexOf(k.split('/')[0] ?? ''));
    expect(positions).toEqual([...positions].sort((a, b) => a - b));

    // A page that ends exactly at the last run says so.
    const whole = await page(`${c.url}/v1/matrices/paged/results?limit=${total}`);
    expect(whole.runs).toHaveLength(total);
    expect(whole.next).toBeNull();
    const half = await page(`${c.url}/v1/matrices/paged/results?limit=${total / 2}`);
    expect(half.next).not.toBeNull();
    const rest = await page(`${c.url}/v1/matrices/paged/results?limit=${total / 2}&cursor=${encodeURIComponent(half.next ?? '')}`);
    expect(rest.runs).toHaveLength(total / 2);
    expect(rest.next).toBeNull();
    // Without limit, a page holds RESULTS_PAGE_DEFAULT runs, more than this matrix has.
    expect((await page(`${c.url}/v1/matrices/paged/results`)).runs).toHaveLength(Math.min(total, RESULTS_PAGE_DEFAULT));

    // The raw runs as CSV stream whole: a header and one line per run.
    const csv = await (await fetch(`${c.url}/v1/matrices/paged/results?format=csv&table=runs`)).text();
    expect(csv.trimEnd().split('\r\n')).toHaveLength(total + 1);
  });

  it('refuses a cursor it did not give out, and a limit out of range or off JSON, with 400', async () => {
    const c = await cluster.coordinator();
    storeMatrix(c.dataDir, 'cursors', { cells: 2, repetitions: 1, machines: ['alpha'] });
    for (const q of ['cursor=not-a-cursor', `cursor=${Buffer.from('{"a":1}').toString('base64url')}`, 'limit=0', 'limit=10001', 'format=csv&table=runs&limit=5']) {
      const res = await fetch(`${c.url}/v1/matrices/cursors/results?${q}`);
      expect(res.status, q).toBe(400);
      const body = ErrorBody.parse(await res.json());
      expect(body.error.code).toBe('BODY_INVALID');
      expect(body.error.issues?.map((i) => i.path), q).toEqual([q.startsWith('cursor') ? 'cursor' : 'limit']);
    }
  });
});

describe('runs as a page writes them', () => {
  it('are the JSON of runView, byte for byte, with and without histograms, for ok, failed and skipped runs', () => {
    const store = Store.open(':memory:');
    try {
      const cells = cellsOf(3);
      const spec = parseMatrix({ name: 'views', workload: 'inotify', repetitions: 2, warmup: 0 });
      store.createMatrix({ id: 'views', spec, targets: [{ target: 'any', machine: null }], cells, expectedRuns: 6, estimatedMs: 0 });
      const [ok, skipped] = syntheticRunStream(cells.slice(0, 1), 2, { matrixId: 'views', machine: { machine: 'alpha' } });
      const [, , failedCell] = cells;
      if (!ok || !skipped || !failedCell) throw new Error('no runs');
      const skippedRun: RunResult = {
        matrix: skipped.matrix, cellId: skipped.cellId, workload: skipped.workload, repetition: skipped.repetition, params: skipped.params,
        startedAt: skipped.startedAt, finishedAt: skipped.finishedAt, fingerprint: skipped.fingerprint, limits: null,
        state: 'skipped', reason: 'a "quoted" reason\n',
      };
      store.storeRuns([
        { kind: 'result', matrixId: 'views', target: 'any', result: withBuckets(ok, 40), attempts: 1 },
        { kind: 'result', matrixId: 'views', target: 'any', result: skippedRun, attempts: 2 },
        { kind: 'gave-up', code: 'ABANDONED', matrixId: 'views', target: 'any', cell: failedCell, repetition: 0, machine: 'beta', message: 'gone', attempts: 3 },
      ]);
      const rows = store.runsPage('views', null, 10);
      expect(rows.map((r) => r.state)).toEqual(['ok', 'skipped', 'failed']);
      for (const row of rows) {
        for (const h of [false, true]) expect(runJson(row, h)).toBe(JSON.stringify(runView(row, h)));
      }
    } finally {
      store.close();
    }
  });
});

describe('caps on heavy readers', () => {
  it('refuses a download beyond FSBENCH_MAX_DOWNLOADS (results and HTML reports alike) with 503 and Retry-After, and frees the slot when the client goes away', async () => {
    const c = await cluster.coordinator({ maxDownloads: 1 });
    // About 40 MB of runs: far more than the kernel buffers of a socket nobody reads.
    storeMatrix(c.dataDir, 'heavy', { cells: 100, repetitions: 4, machines: ['alpha'], buckets: 4000 });
    const slow = await stalledClient(c.port, '/v1/matrices/heavy/results?histograms=1&limit=400');
    try {
      expect(slow.head).toMatch(/^HTTP\/1\.1 200 /);
      const refused = await fetch(`${c.url}/v1/matrices/heavy/results?limit=1`);
      expect(refused.status).toBe(503);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
      const body = ErrorBody.parse(await refused.json());
      expect(body.error.code).toBe('UNAVAILABLE');
      expect(body.error.message).toContain('FSBENCH_MAX_DOWNLOADS');
      // Still refused while the first is held, however often asked, and the HTML report, a
      // download too, waits for the same slots.
      expect((await fetch(`${c.url}/v1/matrices/heavy/results?format=md`)).status).toBe(503);
      const html = await fetch(`${c.url}/v1/matrices/heavy/report.html`);
      expect(html.status).toBe(503);
      expect(ErrorBody.parse(await html.json()).error.message).toContain('FSBENCH_MAX_DOWNLOADS');
    } finally {
      slow.socket.destroy();
    }
    await eventually(async () => (await fetch(`${c.url}/v1/matrices/heavy/results?limit=1`)).status === 200);
    expect((await fetch(`${c.url}/v1/matrices/heavy/report.html`)).status).toBe(200);
    // A request refused before its slot (a 404, a 400) takes none.
    expect((await fetch(`${c.url}/v1/matrices/nosuch/results`)).status).toBe(404);
    expect((await fetch(`${c.url}/v1/matrices/heavy/results?limit=0`)).status).toBe(400);
    expect((await fetch(`${c.url}/v1/matrices/heavy/results?limit=1`)).status).toBe(200);
  });

  it('refuses an event stream beyond FSBENCH_MAX_STREAMS with 503 and Retry-After, and frees the slot when the client goes away', async () => {
    const c = await cluster.coordinator({ maxStreams: 1 });
    const submitted = await fetch(`${c.url}/v1/matrices`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'streamed', workload: 'noop', repetitions: 1, warmup: 0, params: { value: [1, 2] } }),
    });
    expect(submitted.status).toBe(202);
    const { id } = z.object({ id: z.string() }).loose().parse(await submitted.json());
    const first = new AbortController();
    const open = await fetch(`${c.url}/v1/matrices/${id}/events`, { signal: first.signal });
    expect(open.status).toBe(200);
    if (!open.body) throw new Error('no body');
    const events = readEvents(open.body);
    expect((await events.next()).value).toMatchObject({ event: 'progress' });

    const refused = await fetch(`${c.url}/v1/matrices/${id}/events`);
    expect(refused.status).toBe(503);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(ErrorBody.parse(await refused.json()).error.message).toContain('FSBENCH_MAX_STREAMS');

    first.abort();
    await events.return(undefined).catch(() => undefined);
    await eventually(async () => {
      const again = await fetch(`${c.url}/v1/matrices/${id}/events`);
      await again.body?.cancel();
      return again.status === 200;
    });
  });
});

describe('the report of a results page', () => {
  it('is the same from the compiled coordinator, whose report thread builds it, as built on the request thread', async () => {
    expect(existsSync(CLI), 'dist/ is built by `npx tsc -p tsconfig.json`').toBe(true);
    const c = await cluster.coordinator();
    storeMatrix(c.dataDir, 'offthread', { cells: 40, repetitions: 3, machines: ['alpha'], buckets: 64 });
    const store = Store.open(c.dataDir);
    const m = store.getMatrix('offthread');
    if (!m) throw new Error('no matrix');
    const expected: unknown = JSON.parse(renderReport(store, m, 'fragment'));
    const md = renderReport(store, m, 'md');
    store.close();
    const env = { REDIS_URL: cluster.redis().url, FSBENCH_QUEUE_PREFIX: uniquePrefix('readers-cli'), FSBENCH_DATA_DIR: c.dataDir, FSBENCH_PORT: '0' };
    const child = spawn(process.execPath, [CLI, 'coordinator'], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    try {
      await eventually(() => Promise.resolve(/listening on http:\/\/\S+;/.test(output)), 20_000);
      const url = /listening on (http:\/\/\S+);/.exec(output)?.[1] ?? '';
      const pages = await Promise.all([1, 2, 3].map(() => page(`${url}/v1/matrices/offthread/results?limit=1`)));
      for (const p of pages) expect(p.report).toEqual(expected);
      expect(await (await fetch(`${url}/v1/matrices/offthread/results?format=md`)).text()).toBe(md);
    } finally {
      child.kill('SIGTERM');
      await once(child, 'exit');
    }
  });
});

describe('fsbench compare matrix:ID', () => {
  it('reads every page of a stored matrix, not just the first', async () => {
    expect(existsSync(CLI), 'dist/ is built by `npx tsc -p tsconfig.json`').toBe(true);
    const c = await cluster.coordinator();
    const runs = storeMatrix(c.dataDir, 'manypages', { cells: 120, repetitions: 10, machines: ['alpha'] });
    storeMatrix(c.dataDir, 'otherside', { cells: 120, repetitions: 10, machines: ['alpha'] });
    expect(runs).toBeGreaterThan(RESULTS_PAGE_DEFAULT);
    const child = spawn(process.execPath, [CLI, 'compare', 'matrix:manypages', 'matrix:otherside', '--url', c.url, '-m', 'eventsPerSec', '-f', 'json'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const report = z.object({ baseline: z.object({ runs: z.number() }).loose(), candidate: z.object({ runs: z.number() }).loose() }).loose().parse(JSON.parse(stdout));
    expect(report.baseline.runs).toBe(runs);
    expect(report.candidate.runs).toBe(runs);
  });
});

describe('/metrics', () => {
  it('needs the bearer token with FSBENCH_READ_AUTH=token, and counts from the matrices without reading them', async () => {
    const c = await cluster.coordinator({ token: TOKEN, readAuth: 'token' });
    storeMatrix(c.dataDir, 'counted', { cells: 5, repetitions: 2, machines: ['alpha', 'beta'] });
    const without = await fetch(`${c.url}/metrics`);
    expect(without.status).toBe(401);
    expect(without.headers.get('www-authenticate')).toContain('Bearer');
    expect((await fetch(`${c.url}/metrics`, { headers: { authorization: 'Bearer wrong-token-0123456789' } })).status).toBe(403);
    const res = await fetch(`${c.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toMatch(/^fsbench_runs\{state="ok"\} 20$/m);
    expect(text).toMatch(/^fsbench_matrices\{state="done"\} 1$/m);
    expect(text).toMatch(/^fsbench_matrices\{state="running"\} 0$/m);
  });
});

describe('repetitions per cell', () => {
  it('refuses an upload with more than 1000 repetitions of one cell, naming the cell', async () => {
    const c = await cluster.coordinator();
    const [cell] = cellsOf(1);
    if (!cell) throw new Error('no cell');
    const runs = [...syntheticRunStream([cell], 2, { matrixId: 'too-many', machine: { machine: 'laptop' } })];
    const [r0, r1] = runs;
    if (!r0 || !r1) throw new Error('no runs');
    const body = [r0, { ...r1, repetition: 1000 }].map((r) => JSON.stringify(r)).join('\n');
    const res = await fetch(`${c.url}/v1/results`, { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body });
    expect(res.status).toBe(400);
    const error = ErrorBody.parse(await res.json()).error;
    expect(error.code).toBe('BODY_INVALID');
    expect(error.message).toContain(cell.id);
    expect(error.issues).toEqual([{ path: 'line 2', message: expect.stringContaining(`cell ${cell.id}`) as string }]);
    // Nothing was stored: the same file without the bad run is new.
    const ok = await fetch(`${c.url}/v1/results`, { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body: JSON.stringify(r0) });
    expect(ok.status).toBe(201);
  });

  it('refuses to compare a stored matrix holding more than 1000 runs of one cell on one machine', async () => {
    const c = await cluster.coordinator();
    storeMatrix(c.dataDir, 'big', { cells: 1, repetitions: 1001, machines: ['alpha'] });
    storeMatrix(c.dataDir, 'small', { cells: 1, repetitions: 5, machines: ['alpha'] });
    storeMatrix(c.dataDir, 'small2', { cells: 1, repetitions: 1000, machines: ['alpha'] });
    const res = await fetch(`${c.url}/v1/compare?baseline=small&candidate=big`);
    expect(res.status).toBe(400);
    const error = ErrorBody.parse(await res.json()).error;
    expect(error.code).toBe('MATRIX_TOO_LARGE');
    expect(error.message).toContain(`cell ${cellsOf(1)[0]?.id ?? ''}`);
    // 1000 runs of a cell, the most a matrix may ask for, are compared.
    expect((await fetch(`${c.url}/v1/compare?baseline=small&candidate=small2`)).status).toBe(200);
  });
});
