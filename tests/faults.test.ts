/**
 * Faults with real processes and a real redis-server: `kill -9` an agent in the middle of a run,
 * SIGTERM one, `kill -9` the coordinator in the middle of a matrix, restart Redis in the middle
 * of a matrix. The processes are the compiled CLI (`node dist/cli/fsbench.js`); `npm test`
 * compiles first, and this file compiles too when dist/ is older than the sources.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { CoordinatorClient } from '../cli/client.js';
import { ANY_TARGET, queueName } from '../queue/jobs.js';
import { JOB_KEY_FILE, JOB_PUBLIC_KEY_FILE, writeNewJobKey } from '../queue/signing.js';
import { preEnroll } from './helpers/enroll.js';
import { startRedis, uniquePrefix, type TestRedis } from './fixtures/redis-server.js';
import { CLI, freshCli } from './helpers/local.js';
import { useCliProcesses, type Proc } from './helpers/processes.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const JOURNAL_JS = path.join(ROOT, 'dist', 'host', 'journal.js');
/**
 * A host-wide limit the journal may restore (it accepts only the limits fsbench changes), which
 * no-op runs leave alone; raised by one, so nothing on the host runs short meanwhile.
 */
const SYSCTL = '/proc/sys/fs/inotify/max_user_instances';

const { fsbench, tempDir } = useCliProcesses();

beforeAll(async () => {
  await freshCli();
  expect(existsSync(CLI)).toBe(true);
}, 180_000);

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis.stop();
});

interface Setup {
  readonly env: Record<string, string>;
  readonly dataDir: string;
  /** The host ids whose key is enrolled, each under the machine name of its first agent. */
  readonly enrolled: Set<string>;
}

async function setup(name: string): Promise<Setup> {
  const dataDir = await tempDir('data');
  // The coordinator's key made before it starts, so agents may start first and be given it.
  await writeNewJobKey(dataDir);
  const env = {
    FSBENCH_JOB_KEY: path.join(dataDir, JOB_PUBLIC_KEY_FILE),
    REDIS_URL: redis.url,
    FSBENCH_QUEUE_PREFIX: uniquePrefix(name),
    FSBENCH_DATA_DIR: dataDir,
    FSBENCH_PORT: '0',
    FSBENCH_HEARTBEAT: '200ms',
    FSBENCH_STALL_TIMEOUT: '1s',
    FSBENCH_SCRATCH: await tempDir('scratch'),
  };
  return { env, dataDir, enrolled: new Set() };
}

async function coordinator(s: Setup): Promise<{ proc: Proc; client: CoordinatorClient }> {
  const proc = fsbench(['coordinator'], s.env);
  const m = await proc.waitFor(/listening on (http:\/\/\S+);/);
  return { proc, client: new CoordinatorClient(m[1] ?? '') };
}

async function agent(s: Setup, machine: string, hostId = 'host-1', extra: Record<string, string> = {}): Promise<Proc> {
  // One key per host, enrolled once, before its first agent starts, under that agent's machine
  // name (its agents share it, as compose's replicas do). Enrolling it again for a later agent
  // would rename the machine of every run, at whatever moment the coordinator reads the approval.
  const stateDir = path.join(s.env['FSBENCH_SCRATCH'] ?? '', 'state', hostId);
  if (!s.enrolled.has(hostId)) {
    await preEnroll(redis.url, s.env['FSBENCH_QUEUE_PREFIX'] ?? '', await readFile(path.join(s.dataDir, JOB_KEY_FILE), 'utf8'), stateDir, hostId, machine);
    s.enrolled.add(hostId);
  }
  const proc = fsbench(['agent'], { ...s.env, FSBENCH_MACHINE: machine, FSBENCH_HOST_ID: hostId, FSBENCH_STATE_DIR: stateDir, ...extra });
  await proc.waitFor(/waiting for runs/);
  return proc;
}

interface MatrixView {
  state: string;
  progress: { stored: number; expected: number };
}
interface Results {
  runs: { cellId: string; repetition: number; machine: string; state: string; attempts: number; metrics?: Record<string, number>; error?: { message: string } }[];
}

async function waitState(client: CoordinatorClient, id: string, until: (m: MatrixView) => boolean, ms = 60_000): Promise<MatrixView> {
  const end = Date.now() + ms;
  for (;;) {
    const m = (await client.json('GET', `/v1/matrices/${id}`).catch(() => null)) as MatrixView | null;
    if (m && until(m)) return m;
    if (Date.now() > end) throw new Error(`matrix ${id}: ${JSON.stringify(m)}`);
    await sleep(50);
  }
}

/** Every (cell, repetition) of the results exactly once. */
function expectEachRunOnce(results: Results, cells: number, repetitions: number): void {
  const keys = results.runs.map((r) => `${r.cellId}#${r.repetition}`);
  expect(new Set(keys).size).toBe(keys.length);
  expect(keys).toHaveLength(cells * repetitions);
  expect(results.runs.every((r) => r.state === 'ok')).toBe(true);
}

/** The Redis key of the shared `any` queue (BullMQ's layout: prefix, queue name, part). */
const anyQueue = (s: Setup) => `${s.env.FSBENCH_QUEUE_PREFIX}:${queueName(ANY_TARGET)}`;

/** Waits until the agents have taken and finished every run on the `any` queue. */
async function untilAnyQueueDrained(client: Redis, s: Setup, ms: number): Promise<void> {
  const queue = anyQueue(s);
  for (let end = Date.now() + ms; (await client.llen(`${queue}:wait`)) + (await client.llen(`${queue}:active`)) > 0; ) {
    if (Date.now() > end) throw new Error('the agent did not finish the runs');
    await sleep(100);
  }
}

const noop = (name: string, values: number, repetitions: number, sleepMs: number) => ({
  name,
  workload: 'noop',
  repetitions,
  warmup: 0,
  params: { value: Array.from({ length: values }, (_, i) => i), sleep: `${sleepMs}ms` },
});

describe('an agent killed in the middle of a run', () => {
  it('has its run retried elsewhere, stored once, and what it changed on the host restored', async () => {
    const s = await setup('kill-agent');
    const { client } = await coordinator(s);
    const a1 = await agent(s, 'a1');
    const a2 = await agent(s, 'a2');
    const original = await readFile(SYSCTL, 'utf8');
    const changed = `${Number(original) + 1}\n`;
    const { id } = (await client.json('POST', '/v1/matrices', noop('kill-agent', 1, 1, 2000))) as { id: string };

    // Both agents of host-1 share its key, so both run under the machine name the key was
    // enrolled with (a1's): the agent holding the run is told by its process id.
    let victim: Proc | undefined;
    for (let i = 0; i < 200 && !victim; i++) {
      const { agents } = (await client.json('GET', '/v1/agents')) as { agents: { pid: number; currentRun: unknown }[] };
      const busy = agents.find((a) => a.currentRun !== null)?.pid;
      victim = busy === a1.child.pid ? a1 : busy === a2.child.pid ? a2 : undefined;
      if (!victim) await sleep(25);
    }
    if (!victim) throw new Error('no agent started the run');
    // The run's change to a host limit, made under the host lock and journaled first as every
    // workload that measures the kernel does, by a process that then dies with the agent: the
    // survivor must restore it once the lock lapses, though no-op runs never take the lock.
    // The lock as the victim's heartbeat would hold it, lapsing a while after the victim dies.
    const direct = new Redis(redis.url);
    await direct.set(`${s.env.FSBENCH_QUEUE_PREFIX ?? ''}:host-lock:host-1`, `${victim === a1 ? 'a1' : 'a2'}-1-00000000/6f9619ff-8b86-4011-b42d-00c04fc964ff`, 'PX', 3000);
    direct.disconnect();
    const change = `
      import { writeFileSync } from 'node:fs';
      import { Journal } from ${JSON.stringify(JOURNAL_JS)};
      const journal = await Journal.open(${JSON.stringify(path.join(s.env.FSBENCH_SCRATCH ?? '', 'journal'))});
      await journal.record({ kind: 'sysctl', path: ${JSON.stringify(SYSCTL)}, original: ${JSON.stringify(original)} });
      writeFileSync(${JSON.stringify(SYSCTL)}, ${JSON.stringify(changed)});
      process.kill(process.pid, 'SIGKILL');`;
    const helper = spawn(process.execPath, ['--input-type=module', '-e', change], { stdio: 'inherit', cwd: ROOT });
    await new Promise((r) => helper.once('exit', r));
    expect(await readFile(SYSCTL, 'utf8')).toBe(changed);
    victim.child.kill('SIGKILL');

    const done = await waitState(client, id, (m) => m.state === 'done', 30_000);
    expect(done.progress).toMatchObject({ stored: 1, expected: 1 });
    const results = (await client.json('GET', `/v1/matrices/${id}/results`)) as Results;
    expectEachRunOnce(results, 1, 1);
    // The second attempt, the victim dead, was the survivor's.
    expect(results.runs[0]).toMatchObject({ machine: 'a1', attempts: 2 });
    // Restored by the survivor while idle, within a few heartbeats of the lock lapsing.
    for (let i = 0; i < 100 && (await readFile(SYSCTL, 'utf8')) !== original; i++) await sleep(50);
    expect(await readFile(SYSCTL, 'utf8')).toBe(original);
  });
});

describe('a run whose agents keep dying', () => {
  it('is retried a bounded number of times, then stored as failed', async () => {
    const s = await setup('give-up');
    const { client } = await coordinator(s);
    const once = { FSBENCH_MAX_ATTEMPTS: '1' };
    const victim = await agent(s, 'a1', 'host-1', once);
    const { id } = (await client.json('POST', '/v1/matrices', noop('give-up', 1, 1, 1500))) as { id: string };
    for (let i = 0; i < 200; i++) {
      const { agents } = (await client.json('GET', '/v1/agents')) as { agents: { currentRun: unknown }[] };
      if (agents[0]?.currentRun) break;
      await sleep(25);
    }
    victim.child.kill('SIGKILL');
    // The survivor's stalled-job check finds the dead agent's run; with one attempt allowed it gives up.
    await agent(s, 'a2', 'host-1', once);
    await waitState(client, id, (m) => m.state === 'done', 30_000);
    const results = (await client.json('GET', `/v1/matrices/${id}/results`)) as Results & { runs: { error?: { code: string; message: string } }[] };
    expect(results.runs).toHaveLength(1);
    expect(results.runs[0]).toMatchObject({ state: 'failed', error: { code: 'ABANDONED' } });
    expect(results.runs[0]?.error?.message).toBe('the run was given up after 1 attempt(s) (1 by agents that died): job stalled more than allowable limit');
  });
});

describe('an agent told to stop', () => {
  it('abandons a run that outlasts the grace period, cleanly, and the run is retried once', async () => {
    const s = await setup('sigterm');
    const { client } = await coordinator(s);
    const a1 = await agent(s, 'a1', 'host-1', { FSBENCH_STOP_GRACE: '300ms' });
    const { id } = (await client.json('POST', '/v1/matrices', noop('sigterm', 1, 1, 2500))) as { id: string };
    await a1.waitFor(/./, 1000);
    for (let i = 0; i < 200; i++) {
      const { agents } = (await client.json('GET', '/v1/agents')) as { agents: { currentRun: unknown }[] };
      if (agents[0]?.currentRun) break;
      await sleep(25);
    }
    const t = Date.now();
    a1.child.kill('SIGTERM');
    expect((await a1.exited()).code).toBe(0);
    expect(Date.now() - t).toBeLessThan(3000);
    expect(a1.output).toMatch(/abandoning it/);
    expect(((await client.json('GET', '/v1/agents')) as { agents: unknown[] }).agents).toEqual([]);

    // Another host, with a key and a machine name of its own.
    await agent(s, 'a2', 'host-2');
    await waitState(client, id, (m) => m.state === 'done', 30_000);
    const results = (await client.json('GET', `/v1/matrices/${id}/results`)) as Results;
    expectEachRunOnce(results, 1, 1);
    expect(results.runs[0]).toMatchObject({ machine: 'a2', attempts: 2 });
  });
});

describe('a host whose agents are gone', () => {
  it('has its runs given up after FSBENCH_HOST_TIMEOUT, stored as failed saying why, and the matrix finishes', async () => {
    const s = await setup('host-gone');
    const { client } = await coordinator({ ...s, env: { ...s.env, FSBENCH_HOST_TIMEOUT: '2s' } });
    await agent(s, 'a1', 'host-1');
    const b1 = await agent(s, 'b1', 'host-2');
    const { id } = (await client.json('POST', '/v1/matrices', { ...noop('host-gone', 20, 1, 100), placement: 'all' })) as { id: string };
    await waitState(client, id, (m) => m.progress.stored >= 6);
    b1.child.kill('SIGKILL');
    await b1.exited();

    const done = await waitState(client, id, (m) => m.state === 'done');
    expect(done.progress).toMatchObject({ stored: 40, expected: 40 });
    const results = (await client.json('GET', `/v1/matrices/${id}/results`)) as Results;
    const keys = results.runs.map((r) => `${r.machine}:${r.cellId}#${r.repetition}`);
    expect(new Set(keys).size).toBe(40);
    const onA = results.runs.filter((r) => r.machine === 'a1');
    const onB = results.runs.filter((r) => r.machine === 'b1');
    expect(onA.every((r) => r.state === 'ok')).toBe(true);
    expect(onA).toHaveLength(20);
    const gaveUp = onB.filter((r) => r.state === 'failed');
    expect(gaveUp.length).toBeGreaterThan(0);
    expect(gaveUp.length).toBeLessThan(20);
    for (const r of gaveUp) {
      expect(r.error).toMatchObject({ code: 'ABANDONED' });
      expect(r.error?.message).toMatch(/no agent of host b1 \(host-2\) was live for 2s \(FSBENCH_HOST_TIMEOUT\)/);
    }
  }, 60_000);
});

describe('the coordinator killed in the middle of a matrix', () => {
  it('catches up on restart: every run stored exactly once, none lost', async () => {
    const s = await setup('kill-coord');
    const first = await coordinator(s);
    await agent(s, 'a1', 'host-1');
    await agent(s, 'b1', 'host-2');
    const { id } = (await first.client.json('POST', '/v1/matrices', noop('kill-coord', 60, 2, 15))) as { id: string };
    const before = await waitState(first.client, id, (m) => m.progress.stored >= 30);
    first.proc.child.kill('SIGKILL');
    await first.proc.exited();
    await sleep(1000);

    const second = await coordinator(s);
    const done = await waitState(second.client, id, (m) => m.state === 'done');
    expect(before.progress.stored).toBeLessThan(120);
    expect(done.progress).toMatchObject({ stored: 120, expected: 120 });
    const results = (await second.client.json('GET', `/v1/matrices/${id}/results`)) as Results;
    expectEachRunOnce(results, 60, 2);
    expect(new Set(results.runs.map((r) => r.machine))).toEqual(new Set(['a1', 'b1']));
    // An ordinary restart reads on from its cursor: nothing counts as lost, nothing runs twice.
    expect(second.proc.output).not.toMatch(/were lost before they were read/);
  });
});

describe('the coordinator down while thousands of runs complete', () => {
  it('stores every one when it is back, none lost to the trimming of the event streams, and empties them', async () => {
    const s = await setup('coord-down');
    const first = await coordinator(s);
    // 6000 runs make some 12,000 queue events (each waits, then completes), more than BullMQ keeps by default (10,000).
    const { id } = (await first.client.json('POST', '/v1/matrices', noop('coord-down', 1000, 6, 0))) as { id: string };
    first.proc.child.kill('SIGKILL');
    await first.proc.exited();
    await agent(s, 'a1', 'host-1');
    const client = new Redis(redis.url);
    const events = `${anyQueue(s)}:events`;
    try {
      await untilAnyQueueDrained(client, s, 60_000);
      expect(await client.xlen(events)).toBeGreaterThan(10_000);

      const second = await coordinator(s);
      const done = await waitState(second.client, id, (m) => m.state === 'done');
      expect(done.progress).toMatchObject({ stored: 6000, expected: 6000 });
      expectEachRunOnce((await second.client.json('GET', `/v1/matrices/${id}/results?limit=10000`)) as Results, 1000, 6);
      // What is stored leaves Redis (trimmed by whole stream nodes, so a few may remain).
      await sleep(500);
      expect(await client.xlen(events)).toBeLessThan(500);
    } finally {
      await client.quit();
    }
  }, 120_000);
});

describe('reports lost from Redis while the coordinator was down', () => {
  it('are noticed at start, their runs queued and run again, each stored once', async () => {
    const s = await setup('lost');
    const first = await coordinator(s);
    await agent(s, 'a1', 'host-1');
    const { id } = (await first.client.json('POST', '/v1/matrices', noop('lost', 60, 2, 15))) as { id: string };
    await waitState(first.client, id, (m) => m.progress.stored >= 30);
    first.proc.child.kill('SIGKILL');
    await first.proc.exited();
    const client = new Redis(redis.url);
    try {
      await untilAnyQueueDrained(client, s, 30_000);
      // What BullMQ's trimming, or a Redis that lost its data, would do to the unread reports.
      await client.xtrim(`${anyQueue(s)}:events`, 'MAXLEN', 0);
    } finally {
      await client.quit();
    }

    const second = await coordinator(s);
    const done = await waitState(second.client, id, (m) => m.state === 'done');
    expect(done.progress).toMatchObject({ stored: 120, expected: 120 });
    expectEachRunOnce((await second.client.json('GET', `/v1/matrices/${id}/results`)) as Results, 60, 2);
    expect(second.proc.output).toMatch(/reports on queue any were lost before they were read/);
  }, 60_000);
});

describe('Redis restarted in the middle of a matrix', () => {
  it('the matrix completes, each run stored once', async () => {
    const s = await setup('redis-restart');
    const { client } = await coordinator(s);
    await agent(s, 'a1', 'host-1');
    await agent(s, 'b1', 'host-2');
    const { id } = (await client.json('POST', '/v1/matrices', noop('redis-restart', 40, 2, 15))) as { id: string };
    await waitState(client, id, (m) => m.progress.stored >= 20);
    await redis.restart(500);
    const done = await waitState(client, id, (m) => m.state === 'done');
    expect(done.progress).toMatchObject({ stored: 80, expected: 80 });
    expectEachRunOnce((await client.json('GET', `/v1/matrices/${id}/results`)) as Results, 40, 2);
    await writeFile(path.join(s.dataDir, 'done'), '');
  });
});
