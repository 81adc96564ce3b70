/**
 * Agents in-process against a real redis-server: the host lock (one measurement per kernel,
 * lapsing when its holder dies), failed workloads stored once and never retried, and job data
 * that does not parse refused without a retry.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { HostLock } from '../agent/host-lock.js';
import { CoordinatorClient } from '../cli/client.js';
import { queueName } from '../queue/jobs.js';
import { uniquePrefix } from './fixtures/redis-server.js';
import { queueEventsFromStart, useCluster } from './helpers/cluster.js';
import { waitFor } from './helpers/local.js';

const cluster = useCluster('agent');

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
    log: () => undefined,
  });
}

describe('the host lock', () => {
  it('lets one agent per host measure; the next waits, recovers the journal, then runs', async () => {
    const client = new Redis(cluster.redis().url);
    cluster.cleanup(() => client.quit().then(() => undefined));
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
    const client = new Redis(cluster.redis().url);
    cluster.cleanup(() => client.quit().then(() => undefined));
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
    const c = await cluster.coordinator({ maxBody: 65536, maxRuns: 1000, maxDuration: 3_600_000, maxQueued: 1000 });
    await cluster.agent(c.prefix, 'h-failed', 'm');
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
    // A coordinator of the prefix: agents take jobs only once they can authenticate reports to one.
    const { prefix } = await cluster.coordinator();
    await cluster.agent(prefix, 'h-bad', 'm');
    const connection = { url: cluster.redis().url };
    const q = new Queue(queueName('any'), { connection, prefix });
    const events = queueEventsFromStart(queueName('any'), connection.url, prefix);
    cluster.cleanup(async () => {
      await events.close();
      await q.close();
    });
    await events.waitUntilReady();
    let started = 0;
    const reasons: string[] = [];
    events.on('active', () => started++);
    events.on('failed', ({ failedReason }) => reasons.push(failedReason));
    await q.add('run', { matrixId: 'x', cell: { id: 'not-a-cell' } }, { attempts: 3 });
    // On a busy machine the agent may take seconds to reach the job: wait for its refusal, not a fixed 3 s.
    await waitFor(() => reasons.length > 0, 20_000, 'the agent to refuse the job');
    // Let a retry, if there were one, start.
    await sleep(300);
    expect(started).toBe(1);
    expect(reasons).toHaveLength(1);
    expect(reasons[0]).toMatch(/is not a valid run job: cell.id: /);
  });
});
