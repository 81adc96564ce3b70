/**
 * Comparisons, gates and history reads within limits, against real coordinators (the compiled
 * CLI, a real redis-server) holding two stored matrices of 1,500 cells: 40 comparisons at once
 * computed on the read threads while `/livez` stays quick, side by side with the same burst
 * computed on the event loop; the 41st beyond FSBENCH_MAX_READS + FSBENCH_READ_QUEUE refused
 * with 429 and Retry-After; a comparison over FSBENCH_MAX_READ_RUNS refused before it reads; and
 * the per-client rate limit of such reads (FSBENCH_READ_LIMIT).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ERRORS } from '../contract/errors.js';
import { uniquePrefix } from './fixtures/redis-server.js';
import { useCluster } from './helpers/cluster.js';
import { CLI } from './helpers/local.js';
import { useCliProcesses } from './helpers/processes.js';
import { storeMatrix } from './helpers/stored-matrix.js';

const cluster = useCluster('reads');
const { fsbench, tempDir } = useCliProcesses();
const ErrorBody = z.object({ error: z.object({ code: z.string(), message: z.string() }).strict() }).strict();

/** The limits of the burst: 2 computed at once and 38 in line, so 40 are taken and the 41st is not. */
const MAX_READS = 2;
const READ_QUEUE = 38;
const BURST = MAX_READS + READ_QUEUE;
/** 2 x 1,500 cells x 2 runs: 6,000 runs a comparison reads; the cost cap sits between that and the oversized one's 9,000. */
const CELLS = 1500;
const MAX_READ_RUNS = 8000;
const LIVEZ_P99_MS = 250;

/** A coordinator started from a script of the compiled modules: what the CLI starts, with reads on the event loop. */
const children: ChildProcess[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) {
    if (c.exitCode === null && c.signalCode === null) {
      c.kill('SIGKILL');
      await new Promise((r) => c.once('exit', r));
    }
  }
});

async function coordinatorOnEventLoop(dataDir: string, prefix: string): Promise<{ url: string; pid: number }> {
  const server = path.join(path.dirname(CLI), '..', 'coordinator', 'server.js');
  const settings = {
    redisUrl: cluster.redis().url, queuePrefix: prefix, port: 0, host: '127.0.0.1', token: undefined, readAuth: 'open', dataDir,
    maxAttempts: 3, maxBody: 1024 ** 2, maxRuns: 100_000, maxDuration: 86_400_000, maxQueued: 200_000, hostTimeout: 600_000,
    maxReads: MAX_READS, readQueue: READ_QUEUE, readLimit: 0, maxReadRuns: MAX_READ_RUNS, readsOnEventLoop: true,
  };
  const script = `const { startCoordinator } = await import(${JSON.stringify(server)});
const c = await startCoordinator(${JSON.stringify(settings)}, () => undefined);
console.log('listening on ' + c.url + ';');`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const end = Date.now() + 20_000;
  for (;;) {
    const m = /listening on (http:\/\/\S+);/.exec(output);
    if (m?.[1] !== undefined && child.pid !== undefined) return { url: m[1], pid: child.pid };
    if (child.exitCode !== null || Date.now() > end) throw new Error(`the coordinator did not start:\n${output}`);
    await sleep(20);
  }
}

/** The OS threads of process `pid` (Node's own, and each worker thread's). */
function threadsOf(pid: number): number {
  return Number(/^Threads:\s+(\d+)$/m.exec(readFileSync(`/proc/${String(pid)}/status`, 'utf8'))?.[1] ?? NaN);
}

interface Burst {
  /** `/livez` latencies while the burst ran, in ms. */
  readonly livez: number[];
  readonly statuses: number[];
  readonly ms: number;
  /** The most OS threads the coordinator had meanwhile. */
  readonly threads: number;
  /** The answer to one more comparison, sent once the coordinator had read the burst's. */
  readonly extra: { readonly status: number; readonly retryAfter: string | null; readonly body: string };
}

/**
 * BURST comparisons at once, `/livez` polled back to back until they are all answered, and one
 * more comparison sent after the first `/livez` answer: the coordinator reads the burst's
 * requests before this later connection's, and takes them (a slot, or a place in line) before it
 * answers it, so the one more is the BURST + 1st.
 */
async function burst(url: string, pid: number): Promise<Burst> {
  const compare = `${url}/v1/compare?baseline=a&candidate=b&metric=eventsPerSec&format=csv`;
  const started = Date.now();
  let threads = threadsOf(pid);
  const answers = Array.from({ length: BURST }, () => fetch(compare).then(async (r) => ({ status: r.status, body: await r.text() })));
  const state = { done: false };
  const all = Promise.all(answers).finally(() => {
    state.done = true;
  });
  const livez: number[] = [];
  const extras: Promise<Burst['extra']>[] = [];
  while (!state.done) {
    const t = performance.now();
    const r = await fetch(`${url}/livez`);
    await r.text();
    livez.push(performance.now() - t);
    expect(r.status).toBe(200);
    if (extras.length === 0) extras.push(fetch(compare).then(async (a) => ({ status: a.status, retryAfter: a.headers.get('retry-after'), body: await a.text() })));
    threads = Math.max(threads, threadsOf(pid));
    await sleep(10);
  }
  const results = await all;
  for (const r of results) if (r.status === 200) expect(r.body.slice(0, 16)).toBe('metric,direction');
  const [extra] = await Promise.all(extras);
  if (!extra) throw new Error('the burst was answered before /livez');
  return { livez, statuses: results.map((r) => r.status), ms: Date.now() - started, threads, extra };
}

function p99(ms: readonly number[]): number {
  const sorted = [...ms].sort((x, y) => x - y);
  return sorted[Math.ceil(sorted.length * 0.99) - 1] ?? NaN;
}

describe('comparisons at once', () => {
  it('are computed off the event loop, FSBENCH_MAX_READS at once and FSBENCH_READ_QUEUE in line: /livez stays quick, the one beyond is refused with 429, an oversized one with 422', async () => {
    expect(existsSync(CLI), 'dist/ is built by `npx tsc -p tsconfig.json`').toBe(true);
    const dataDir = await tempDir('reads');
    storeMatrix(dataDir, 'a', { cells: CELLS, repetitions: 2, machines: ['alpha'], seed: 1 });
    storeMatrix(dataDir, 'b', { cells: CELLS, repetitions: 2, machines: ['alpha'], seed: 7 });
    storeMatrix(dataDir, 'big', { cells: CELLS, repetitions: 4, machines: ['alpha'], seed: 9 });

    // The same burst on a coordinator computing the reads on its event loop, for comparison.
    const slow = await coordinatorOnEventLoop(dataDir, uniquePrefix('reads-loop'));
    const onLoop = await burst(slow.url, slow.pid);
    children.splice(0).forEach((c) => c.kill('SIGKILL'));

    const proc = fsbench(['coordinator'], {
      REDIS_URL: cluster.redis().url, FSBENCH_QUEUE_PREFIX: uniquePrefix('reads'), FSBENCH_DATA_DIR: dataDir, FSBENCH_PORT: '0',
      FSBENCH_MAX_READS: String(MAX_READS), FSBENCH_READ_QUEUE: String(READ_QUEUE), FSBENCH_READ_LIMIT: '0', FSBENCH_MAX_READ_RUNS: String(MAX_READ_RUNS),
    });
    const url = (await proc.waitFor(/listening on (http:\/\/\S+);/))[1] ?? '';
    const pid = proc.child.pid ?? 0;
    const idleThreads = threadsOf(pid);
    const offLoop = await burst(url, pid);

    console.log(
      `/livez during ${String(BURST)} comparisons of 2 x ${String(CELLS)} cells: p99 ${p99(offLoop.livez).toFixed(1)} ms of ${String(offLoop.livez.length)} polls ` +
        `(max ${Math.max(...offLoop.livez).toFixed(1)} ms) off the event loop, in ${String(offLoop.ms)} ms; ` +
        `p99 ${p99(onLoop.livez).toFixed(1)} ms of ${String(onLoop.livez.length)} polls (max ${Math.max(...onLoop.livez).toFixed(1)} ms) on it, in ${String(onLoop.ms)} ms`,
    );
    // Every one of the burst answered, on both; off the event loop the one beyond was refused.
    // (On the event loop slots come free while the burst is still read, so it may not be.)
    expect(onLoop.statuses).toEqual(Array.from({ length: BURST }, () => 200));
    expect(offLoop.statuses).toEqual(Array.from({ length: BURST }, () => 200));
    expect(offLoop.extra.status).toBe(429);
    expect(offLoop.extra.retryAfter).toBe('2');
    const busy = ErrorBody.parse(JSON.parse(offLoop.extra.body)).error;
    expect(busy.code).toBe('READS_BUSY');
    expect(ERRORS.READS_BUSY.status).toBe(429);
    expect(busy.message).toMatch(/^2 comparisons, gates and history reads are being computed and 38 wait for their turn, .*\(FSBENCH_MAX_READS, FSBENCH_READ_QUEUE\): try again in 2 s$/);
    // The read threads were there: the compiled coordinator started them for the burst.
    expect(offLoop.threads).toBeGreaterThan(idleThreads);
    expect(offLoop.livez.length).toBeGreaterThanOrEqual(20);
    expect(p99(offLoop.livez)).toBeLessThan(LIVEZ_P99_MS);
    // On the event loop /livez waits for whole comparisons: the measurement can tell the two apart.
    expect(p99(onLoop.livez)).toBeGreaterThan(p99(offLoop.livez));

    // 1,500 x 4 + 1,500 x 2 runs: past FSBENCH_MAX_READ_RUNS, refused before any is read.
    for (const route of ['compare', 'gate']) {
      const t = Date.now();
      const r = await fetch(`${url}/v1/${route}?baseline=big&candidate=a`);
      expect(r.status).toBe(422);
      const e = ErrorBody.parse(await r.json()).error;
      expect(e.code).toBe('READ_TOO_LARGE');
      expect(e.message).toBe(
        `this comparison would read 9000 stored runs (big: 6000, a: 3000), more than the ${String(MAX_READ_RUNS)} one comparison or gate may read (FSBENCH_MAX_READ_RUNS on the coordinator): compare smaller matrices or fewer machines, or raise FSBENCH_MAX_READ_RUNS`,
      );
      expect(Date.now() - t).toBeLessThan(2000);
    }
  }, 90_000);
});

describe('the read rate limit', () => {
  it('answers 429 RATE_LIMITED with Retry-After past FSBENCH_READ_LIMIT, one budget for comparisons, gates and history, per client', async () => {
    const c = await cluster.coordinator({ readLimit: 3 });
    const first = [
      await fetch(`${c.url}/v1/history?name=nothing`),
      await fetch(`${c.url}/v1/compare?baseline=nothing&alpha=2`),
      await fetch(`${c.url}/v1/gate?baseline=nothing&candidate=else`),
    ];
    expect(first.map((r) => r.status)).toEqual([200, 400, 404]);
    const limited = await fetch(`${c.url}/v1/history?name=nothing`);
    expect(limited.status).toBe(429);
    const retryAfter = Number(limited.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    const e = ErrorBody.parse(await limited.json()).error;
    expect(e.code).toBe('RATE_LIMITED');
    expect(e.message).toMatch(/more than 3 comparisons, gates and history reads in a minute .*FSBENCH_READ_LIMIT.*try again in \d+ s/);
    expect((await fetch(`${c.url}/v1/compare?baseline=a&candidate=b`)).status).toBe(429);
    // Other reads are not counted.
    expect((await fetch(`${c.url}/v1/matrices`)).status).toBe(200);
    expect((await fetch(`${c.url}/livez`)).status).toBe(200);
  });
});
