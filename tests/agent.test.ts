/**
 * Agents in-process against a real redis-server: the host lock (one measurement per kernel,
 * lapsing when its holder dies), failed workloads stored once and never retried, and job data
 * that does not parse refused without a retry.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startAgent } from '../agent/agent.js';
import { HostLock } from '../agent/host-lock.js';
import { CoordinatorClient } from '../coordinator/client.js';
import { queueName } from '../queue/jobs.js';
import { startCoordinator } from '../coordinator/server.js';
import { startRedis, uniquePrefix, type TestRedis } from './fixtures/redis-server.js';

let redis: TestRedis;
const cleanups: (() => Promise<void>)[] = [];
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis.stop();
});
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function lock(client: Redis, prefix: string, owner: string, events: string[], ttlMs = 400): HostLock {
  return new HostLock(client, {
    prefix,
    hostId: 'h1',
    owner,
    ttlMs,
    pollMs: 20,
    maxHoldMs: 10_000,
    onAcquired: () => {
      events.push(`${owner} recovered`);
      return Promise.resolve();
    },
    onLost: () => events.push(`${owner} lost`),
  });
}

describe('the host lock', () => {
  it('lets one agent per host measure; the next waits, recovers the journal, then runs', async () => {
    const client = new Redis(redis.url);
    cleanups.push(() => client.quit().then(() => undefined));
    const prefix = uniquePrefix('lock');
    const events: string[] = [];
    const a = lock(client, prefix, 'a', events);
    const b = lock(client, prefix, 'b', events);
    const never = new AbortController().signal;
    await a.acquire(never);
    let bHas = false;
    const waiting = b.acquire(never).then(() => (bHas = true));
    await sleep(100);
    expect(bHas).toBe(false);
    await a.refresh(true);
    await a.release();
    await waiting;
    expect(events).toEqual(['a recovered', 'b recovered']);
    await b.release();
  });

  it('lapses when its holder stops beating, and the old holder learns it lost it', async () => {
    const client = new Redis(redis.url);
    cleanups.push(() => client.quit().then(() => undefined));
    const prefix = uniquePrefix('lapse');
    const events: string[] = [];
    const dead = lock(client, prefix, 'dead', events, 300);
    const next = lock(client, prefix, 'next', events, 300);
    await dead.acquire(new AbortController().signal);
    const t = Date.now();
    await next.acquire(new AbortController().signal);
    expect(Date.now() - t).toBeGreaterThanOrEqual(250);
    await dead.refresh(true);
    expect(events).toEqual(['dead recovered', 'next recovered', 'dead lost']);
    expect(dead.held).toBe(false);
  });
});

describe('runs on an agent', () => {
  it('stores a run that fails in the workload once, as failed with its code, without retrying it', async () => {
    const prefix = uniquePrefix('failed');
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'fsbench-coord-'));
    const scratch = await mkdtemp(path.join(os.tmpdir(), 'fsbench-agent-'));
    const c = await startCoordinator(
      { redisUrl: redis.url, queuePrefix: prefix, port: 0, host: '127.0.0.1', token: undefined, readAuth: 'open', dataDir, maxAttempts: 3, maxBody: 65536, maxRuns: 1000, maxDuration: 3_600_000, maxQueued: 1000, hostTimeout: 600_000 },
      () => undefined,
    );
    const a = await startAgent(
      { redisUrl: redis.url, queuePrefix: prefix, machine: 'm', labels: [], scratch, hostId: 'h-failed', heartbeat: 100, stallTimeout: 2000, maxAttempts: 3, stopGrace: 1000 },
      () => undefined,
    );
    cleanups.push(async () => {
      await a.stop();
      await c.stop();
      await rm(dataDir, { recursive: true, force: true });
      await rm(scratch, { recursive: true, force: true });
    });
    const client = new CoordinatorClient(c.url);
    const matrix = { name: 'fails', workload: 'metadata', repetitions: 2, warmup: 0, params: { fs: 'none', target: '/nonexistent-fsbench/x', dirs: 1, filesPerDir: 1 } };
    const { id } = (await client.json('POST', '/v1/matrices', matrix)) as { id: string };
    let state = '';
    for (let i = 0; i < 200 && state !== 'done'; i++) {
      state = ((await client.json('GET', `/v1/matrices/${id}`)) as { state: string }).state;
      await sleep(50);
    }
    const detail = (await client.json('GET', `/v1/matrices/${id}`)) as Record<string, unknown>;
    expect(detail).toMatchObject({ state: 'done', progress: { stored: 2, failed: 2 } });
    expect(detail['failures']).toEqual([
      expect.objectContaining({ repetition: 0, machine: 'm', code: 'TARGET_UNUSABLE' }),
      expect.objectContaining({ repetition: 1, machine: 'm', code: 'TARGET_UNUSABLE' }),
    ]);
    const { runs } = (await client.json('GET', `/v1/matrices/${id}/results`)) as { runs: { attempts: number; error: { message: string } }[] };
    expect(runs.map((r) => r.attempts)).toEqual([1, 1]);
    expect(runs[0]?.error.message).toMatch(/not an existing directory/);
  });

  it('refuses job data that does not parse, without retrying it', async () => {
    const prefix = uniquePrefix('baddata');
    const scratch = await mkdtemp(path.join(os.tmpdir(), 'fsbench-agent-'));
    const a = await startAgent(
      { redisUrl: redis.url, queuePrefix: prefix, machine: 'm', labels: [], scratch, hostId: 'h-bad', heartbeat: 100, stallTimeout: 2000, maxAttempts: 3, stopGrace: 1000 },
      () => undefined,
    );
    const q = new Queue(queueName('any'), { connection: { url: redis.url }, prefix });
    cleanups.push(async () => {
      await a.stop();
      await q.close();
      await rm(scratch, { recursive: true, force: true });
    });
    const job = await q.add('run', { matrixId: 'x', cell: { id: 'not-a-cell' } }, { attempts: 3 });
    let failed = false;
    for (let i = 0; i < 100 && !failed; i++) {
      failed = (await q.getJobState(job.id ?? '')) === 'failed';
      await sleep(30);
    }
    const after = await q.getJob(job.id ?? '');
    expect(after?.attemptsMade).toBe(1);
    expect(after?.failedReason).toMatch(/is not a valid run job: cell.id: /);
  });
});
