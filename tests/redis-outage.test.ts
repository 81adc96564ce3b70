/**
 * Redis gone is a state, not a flood (issue 21, item 3): a real redis-server, a real coordinator
 * and agent (the compiled CLI, as a user runs them), Redis stopped for 10 s in the middle of a
 * matrix. Before this, the coordinator printed a multi-line ECONNREFUSED dump outside its JSON
 * log at every reconnect attempt (243 non-JSON lines in 20 s), the agent a JSON line per attempt
 * and worker (108 in 20 s), and neither stopped on SIGTERM while Redis was away (killed after
 * 30 s). The tests print what they measure.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CoordinatorClient } from '../cli/client.js';
import { JOB_KEY_FILE, JOB_PUBLIC_KEY_FILE, writeNewJobKey } from '../queue/signing.js';
import { startRedis, uniquePrefix, type TestRedis } from './fixtures/redis-server.js';
import { preEnroll } from './helpers/enroll.js';
import { freshCli } from './helpers/local.js';
import { FSBENCH_VERSION } from '../host/version.js';
import { useCliProcesses, type Proc } from './helpers/processes.js';

/** How long Redis stays away: longer than the first "still unreachable" line (10 s after the loss). */
const OUTAGE_MS = 11_000;
/** The lines of queue/redis-health.ts: an outage's states. */
const HEALTH_EVENTS = new Set(['redis.lost', 'redis.down', 'redis.back']);
/** What a stop may take with Redis gone. */
const STOP_BOUND_MS = 10_000;

let redis: TestRedis;
/** Set while a test has the server stopped, so that the next one gets it back. */
let stopped = false;

const { fsbench, tempDir } = useCliProcesses();

beforeAll(async () => {
  await freshCli();
  redis = await startRedis();
}, 180_000);
afterAll(async () => {
  await redis.stop();
});
afterEach(async () => {
  // A test that failed with the server stopped gives it back to the next.
  if (stopped) await startRedisAgain();
});

async function stopRedis(): Promise<void> {
  stopped = true;
  await redis.stopServer();
}
async function startRedisAgain(): Promise<void> {
  await redis.startServer();
  stopped = false;
}

interface Stack {
  readonly coordinator: Proc;
  readonly agent: Proc;
  readonly client: CoordinatorClient;
  readonly url: string;
  readonly healthFile: string;
}

/** A coordinator and an enrolled agent against the file's Redis, as `fsbench coordinator` and `fsbench agent`. */
async function stack(name: string): Promise<Stack> {
  const dataDir = await tempDir('data');
  await writeNewJobKey(dataDir);
  const scratch = await tempDir('scratch');
  const env = {
    FSBENCH_JOB_KEY: path.join(dataDir, JOB_PUBLIC_KEY_FILE),
    REDIS_URL: redis.url,
    FSBENCH_QUEUE_PREFIX: uniquePrefix(name),
    FSBENCH_DATA_DIR: dataDir,
    FSBENCH_PORT: '0',
    FSBENCH_HEARTBEAT: '200ms',
    FSBENCH_STALL_TIMEOUT: '2s',
    FSBENCH_STOP_GRACE: '2s',
    FSBENCH_SCRATCH: scratch,
  };
  const coordinator = fsbench(['coordinator'], env);
  const url = (await coordinator.waitFor(/listening on (http:\/\/[^\s;"]+)/))[1] ?? '';
  const stateDir = path.join(scratch, 'state');
  await preEnroll(redis.url, env.FSBENCH_QUEUE_PREFIX, await readFile(path.join(dataDir, JOB_KEY_FILE), 'utf8'), stateDir, 'host-1', 'm1');
  const healthFile = path.join(scratch, 'agent.health');
  const agent = fsbench(['agent'], { ...env, FSBENCH_MACHINE: 'm1', FSBENCH_HOST_ID: 'host-1', FSBENCH_STATE_DIR: stateDir, FSBENCH_HEALTH_FILE: healthFile });
  await agent.waitFor(/waiting for runs/);
  return { coordinator, agent, client: new CoordinatorClient(url), url, healthFile };
}

interface LogLine {
  readonly msg?: string;
  readonly event?: string;
  readonly req?: unknown;
}

/** The lines written since `from`: each must be JSON (a log pipeline reads nothing else). */
function linesSince(p: Proc, from: number): { json: LogLine[]; other: string[] } {
  const json: LogLine[] = [];
  const other: string[] = [];
  for (const line of p.output.slice(from).split('\n')) {
    if (line === '') continue;
    try {
      json.push(JSON.parse(line) as LogLine);
    } catch {
      other.push(line);
    }
  }
  return { json, other };
}

async function healthz(url: string): Promise<{ status: number; body: { ok: boolean; reason?: string } }> {
  const r = await fetch(`${url}/healthz`);
  return { status: r.status, body: (await r.json()) as { ok: boolean; reason?: string } };
}

const noop = (name: string, values: number, repetitions: number, sleepMs: number) => ({
  name,
  workload: 'noop',
  repetitions,
  warmup: 0,
  params: { value: Array.from({ length: values }, (_, i) => i), sleep: `${sleepMs}ms` },
});

interface MatrixView {
  state: string;
  progress: { stored: number; expected: number };
}

async function waitState(client: CoordinatorClient, id: string, until: (m: MatrixView) => boolean, ms = 60_000): Promise<MatrixView> {
  const end = Date.now() + ms;
  for (;;) {
    const m = (await client.json('GET', `/v1/matrices/${id}`).catch(() => null)) as MatrixView | null;
    if (m && until(m)) return m;
    if (Date.now() > end) throw new Error(`matrix ${id}: ${JSON.stringify(m)}`);
    await sleep(100);
  }
}

describe('Redis stopped for 10 s in the middle of a matrix', () => {
  it('is logged as lost, still down and back, answered by /healthz and the health file with the reason, and the matrix completes', async () => {
    const s = await stack('outage');
    const { id } = (await s.client.json('POST', '/v1/matrices', noop('outage', 30, 2, 100))) as { id: string };
    await waitState(s.client, id, (m) => m.progress.stored >= 5);
    const from = { coordinator: s.coordinator.output.length, agent: s.agent.output.length };

    await stopRedis();
    const stoppedAt = Date.now();
    const down: { status: number; reason: string }[] = [];
    while (Date.now() - stoppedAt < OUTAGE_MS) {
      const h = await healthz(s.url);
      down.push({ status: h.status, reason: h.body.reason ?? '' });
      await sleep(500);
    }
    const file = JSON.parse(await readFile(s.healthFile, 'utf8')) as { ok: boolean; reason?: string };
    await startRedisAgain();

    const done = await waitState(s.client, id, (m) => m.state === 'done');
    expect(done.progress).toMatchObject({ stored: 60, expected: 60 });
    const results = (await s.client.json('GET', `/v1/matrices/${id}/results`)) as { runs: { cellId: string; repetition: number; state: string }[] };
    expect(new Set(results.runs.map((r) => `${r.cellId}#${r.repetition}`)).size).toBe(60);
    expect(results.runs.every((r) => r.state === 'ok')).toBe(true);
    expect(await healthz(s.url)).toEqual({ status: 200, body: { ok: true, version: FSBENCH_VERSION } });
    // The agent's file follows within a few beats.
    for (let i = 0; i < 50 && !(JSON.parse(await readFile(s.healthFile, 'utf8')) as { ok: boolean }).ok; i++) await sleep(100);
    expect(JSON.parse(await readFile(s.healthFile, 'utf8'))).toMatchObject({ ok: true });

    // Within a second of the loss /healthz says so, naming Redis, until it is back.
    const late = down.filter((d, i) => i >= 2);
    expect(late.length).toBeGreaterThan(10);
    for (const d of late) {
      expect(d.status).toBe(503);
      expect(d.reason).toMatch(/^Redis at redis:\/\/127\.0\.0\.1:\d+\/? unreachable: /);
    }
    expect(file).toMatchObject({ ok: false, reason: expect.stringMatching(/^Redis at .* unreachable: /) as unknown });

    const report: Record<string, unknown> = {};
    for (const [name, p] of [['coordinator', s.coordinator], ['agent', s.agent]] as const) {
      const { json, other } = linesSince(p, from[name]);
      // Every line is JSON: no stack dump from a library's console.error.
      expect(other).toEqual([]);
      const states = json.filter((l) => l.event !== undefined && HEALTH_EVENTS.has(l.event)).map((l) => l.event);
      // Lost, still down after 10 s, back: once each.
      expect(states).toEqual(['redis.lost', 'redis.down', 'redis.back']);
      // Besides the access lines of the probes above, a handful at most: the flood was hundreds.
      const rest = json.filter((l) => l.req === undefined && !(l.event !== undefined && HEALTH_EVENTS.has(l.event)));
      expect(rest.length).toBeLessThanOrEqual(6);
      report[name] = { lines: json.length + other.length, stateLines: states.length, otherLines: rest.map((l) => l.msg) };
    }
    console.log(`redis outage of ${OUTAGE_MS / 1000} s: ${JSON.stringify(report)}`);
  }, 120_000);
});

describe('SIGTERM while Redis is gone', () => {
  it('stops the coordinator and the agent within a bound, cleanly', async () => {
    const s = await stack('sigterm');
    const { id } = (await s.client.json('POST', '/v1/matrices', noop('sigterm', 200, 1, 200))) as { id: string };
    await waitState(s.client, id, (m) => m.progress.stored >= 2);
    await stopRedis();
    // Stopped while the agent measures and Redis has been gone a while (its reconnects backing off).
    for (let i = 0; i < 50 && (await healthz(s.url)).status !== 503; i++) await sleep(100);
    await sleep(3000);
    const t = Date.now();
    s.coordinator.child.kill('SIGTERM');
    s.agent.child.kill('SIGTERM');
    const [c, a] = await Promise.all([s.coordinator.exited(t), s.agent.exited(t)]);
    console.log(`SIGTERM with Redis stopped: coordinator exited ${String(c.code)} after ${c.ms} ms, agent ${String(a.code)} after ${a.ms} ms`);
    expect(c).toMatchObject({ code: 0 });
    expect(a).toMatchObject({ code: 0 });
    expect(c.ms).toBeLessThan(STOP_BOUND_MS);
    expect(a.ms).toBeLessThan(STOP_BOUND_MS);
    expect(s.coordinator.output).toMatch(/"event":"coordinator.stop-unreachable"/);
    expect(s.agent.output).toMatch(/"event":"agent.stop-unreachable"/);
    expect(s.agent.output).toMatch(/stopped after \d+ runs/);
  }, 60_000);

  it('stops them within a bound when Redis is frozen (SIGSTOP), its connections open but silent', async () => {
    const s = await stack('frozen');
    const { id } = (await s.client.json('POST', '/v1/matrices', noop('frozen', 200, 1, 200))) as { id: string };
    await waitState(s.client, id, (m) => m.progress.stored >= 2);
    redis.pause();
    try {
      await sleep(1000);
      const t = Date.now();
      s.coordinator.child.kill('SIGTERM');
      s.agent.child.kill('SIGTERM');
      const [c, a] = await Promise.all([s.coordinator.exited(t), s.agent.exited(t)]);
      console.log(`SIGTERM with Redis frozen: coordinator exited ${String(c.code)} after ${c.ms} ms, agent ${String(a.code)} after ${a.ms} ms`);
      // The agent's grace (2 s) for its run, then at most 5 s for Redis, then 15 s more at worst.
      expect(c.ms).toBeLessThan(STOP_BOUND_MS);
      expect(a.ms).toBeLessThan(2_000 + 5_000 + 15_000 + 2_000);
    } finally {
      redis.resume();
    }
  }, 60_000);
});
