/**
 * Submitting a matrix against a real coordinator and real agents: warmups run once per cell and
 * host, and the estimate and the limits count them; a submission is atomic (a refused or timed-out
 * one leaves no job in Redis), serialised (two at once cannot both pass the queue limit), and
 * idempotent under `Idempotency-Key`.
 */
import { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { expandMatrix, parseMatrix } from '../contract/matrix.js';
import { CoordinatorClient } from '../cli/client.js';
import { planMatrix } from '../coordinator/matrices/index.js';
import { queueName } from '../queue/jobs.js';
import { useCluster } from './helpers/cluster.js';

const cluster = useCluster('submit');

async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${url}/v1/matrices`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: res.status, json: z.record(z.string(), z.unknown()).parse(await res.json()) };
}

async function waiting(prefix: string): Promise<number> {
  const q = new Queue(queueName('any'), { connection: { url: cluster.redis().url }, prefix });
  try {
    return await q.getJobCountByTypes('wait', 'delayed', 'prioritized');
  } finally {
    await q.close();
  }
}

const Listing = z.object({ matrices: z.array(z.object({ id: z.string(), state: z.string() }).loose()) });
const Agents = z.object({ agents: z.array(z.object({ hostId: z.string(), runsDone: z.number(), warmupsDone: z.number() }).loose()) });

const noop = (extra: Record<string, unknown>) => ({ name: 'submit-test', workload: 'noop', params: { value: [1, 2, 3] }, ...extra });

describe('warmups', () => {
  it('run once per cell and host, as many as the submission says, however the repetitions interleave', async () => {
    const c = await cluster.coordinator();
    await cluster.agent(c.prefix, 'host-a', 'alpha');
    await cluster.agent(c.prefix, 'host-b', 'beta');
    const client = new CoordinatorClient(c.url);
    // Repetitions are queued outermost (every cell's first run before any second), so an agent
    // that warmed up whenever the cell changed would warm up before every run: 3 x 4 x 2 per host.
    const r = await post(c.url, noop({ repetitions: 4, warmup: 2, placement: 'all' }));
    expect(r.status).toBe(202);
    expect(r.json).toMatchObject({ runs: 24, warmups: 12 });
    const id = String(r.json['id']);
    for (let i = 0; ; i++) {
      const m = z.object({ state: z.string() }).loose().parse(await client.json('GET', `/v1/matrices/${id}`));
      if (m.state === 'done') break;
      if (i > 400) throw new Error('the matrix did not finish');
      await new Promise((res) => setTimeout(res, 50));
    }
    // The registry shows what each agent did, refreshed by its heartbeat.
    let agents: z.infer<typeof Agents>['agents'] = [];
    for (let i = 0; i < 100; i++) {
      agents = Agents.parse(await client.json('GET', '/v1/agents')).agents;
      if (agents.reduce((n, a) => n + a.runsDone, 0) === 24) break;
      await new Promise((res) => setTimeout(res, 50));
    }
    expect(agents.map((a) => a.hostId).sort()).toEqual(['host-a', 'host-b']);
    expect(agents.map((a) => a.runsDone)).toEqual([12, 12]);
    // Two warmups for each of three cells on each host, and no more.
    expect(agents.map((a) => a.warmupsDone)).toEqual([6, 6]);
  });

  it('are counted by the limits and the estimate', async () => {
    const c = await cluster.coordinator({ maxRuns: 10, maxDuration: 60_000 });
    await cluster.agent(c.prefix, 'host-a', 'alpha');
    // 2 measured runs, but 2 x 5 warmups on the one live host: 12 runs, over 10.
    const tooMany = await post(c.url, noop({ params: { value: [1, 2] }, repetitions: 1, warmup: 5 }));
    expect(tooMany.status).toBe(400);
    expect(tooMany.json).toMatchObject({ error: { code: 'MATRIX_TOO_LARGE', message: expect.stringContaining('up to 10 warmups') as string } });
    // One 10 s run, with 6 warmups of 10 s each: 70 s, over the limit of 60 s.
    const tooLong = await post(c.url, noop({ params: { value: 1, sleep: '10s' }, repetitions: 1, warmup: 6 }));
    expect(tooLong.status).toBe(422);
    expect(tooLong.json).toMatchObject({ error: { code: 'MATRIX_TOO_LONG' } });
    const fits = await post(c.url, noop({ params: { value: 1, sleep: '10s' }, repetitions: 1, warmup: 0 }));
    expect(fits.status).toBe(202);
  });

  it('and the metadata workload: the estimate grows with file size and fsync policy', () => {
    const plan = (params: Record<string, unknown>) =>
      planMatrix(expandMatrix(parseMatrix({ name: 'm', workload: 'metadata', params: { dirs: 100, filesPerDir: 100, ...params } })), {
        repetitions: 1,
        warmup: 0,
        any: true,
        targets: 1,
        liveHosts: 1,
      }).estimatedMs;
    const base = plan({ fileSize: 0, fsync: 'none' });
    expect(plan({ fileSize: '1MiB', fsync: 'none' })).toBeGreaterThan(base + 10_000);
    expect(plan({ fileSize: 0, fsync: 'file' })).toBeGreaterThan(base + 10_000);
    expect(plan({ fileSize: 0, fsync: 'end' })).toBeGreaterThan(base);
  });
});

describe('a submission', () => {
  it('that times out on a slow Redis leaves neither a matrix nor a job behind', async () => {
    const c = await cluster.coordinator({ maxRuns: 100_000, maxQueued: 100_000 });
    const client = new CoordinatorClient(c.url);
    // 10,000 cells: enqueueing them takes long enough to freeze Redis in the middle of it.
    const big = { name: 'slow', workload: 'noop', repetitions: 1, warmup: 0, params: { value: Array.from({ length: 100 }, (_, i) => i), sleep: Array.from({ length: 100 }, (_, i) => i) } };
    const answer = post(c.url, big);
    for (let i = 0; ; i++) {
      if (Listing.parse(await client.json('GET', '/v1/matrices')).matrices.length > 0) break;
      if (i > 2000) throw new Error('the matrix was never stored');
      await new Promise((res) => setTimeout(res, 5));
    }
    cluster.redis().pause();
    let r: Awaited<typeof answer>;
    try {
      r = await answer;
    } finally {
      cluster.redis().resume();
    }
    expect(r.status).toBe(503);
    expect(r.json).toMatchObject({ error: { code: 'UNAVAILABLE' } });
    expect(Listing.parse(await client.json('GET', '/v1/matrices')).matrices).toEqual([]);
    // The enqueue stops at its next chunk; then every job it added is taken back.
    for (let i = 0; (await waiting(c.prefix)) > 0; i++) {
      if (i > 200) throw new Error(`${await waiting(c.prefix)} jobs are left in the queue`);
      await new Promise((res) => setTimeout(res, 50));
    }
    expect(await waiting(c.prefix)).toBe(0);
  }, 60_000);

  it('is checked against the queue limit one at a time: of two at once, one is refused', async () => {
    const c = await cluster.coordinator({ maxQueued: 10 });
    const answers = await Promise.all([post(c.url, noop({ repetitions: 2 })), post(c.url, noop({ repetitions: 2 }))]);
    expect(answers.map((a) => a.status).sort()).toEqual([202, 503]);
    expect(answers.find((a) => a.status === 503)?.json).toMatchObject({ error: { code: 'QUEUE_FULL' } });
    expect(await waiting(c.prefix)).toBe(6);
  });

  it('retried with the same Idempotency-Key gets the first answer, and no second matrix', async () => {
    const c = await cluster.coordinator();
    const client = new CoordinatorClient(c.url);
    const key = { 'idempotency-key': 'retry-0001' };
    // The first two arrive together, as a client that timed out and retried at once would send them.
    const [first, second] = await Promise.all([post(c.url, noop({}), key), post(c.url, noop({}), key)]);
    const third = await post(c.url, noop({}), key);
    expect([first.status, second.status, third.status]).toEqual([202, 202, 202]);
    expect(second.json['id']).toBe(first.json['id']);
    expect(third.json['id']).toBe(first.json['id']);
    expect(Listing.parse(await client.json('GET', '/v1/matrices')).matrices).toHaveLength(1);
    expect(await waiting(c.prefix)).toBe(15);
    const other = await post(c.url, noop({ repetitions: 1 }), key);
    expect(other.status).toBe(409);
    expect(other.json).toMatchObject({ error: { code: 'CONFLICT', message: expect.stringContaining('retry-0001 was used for another matrix') as string } });
    const bad = await post(c.url, noop({}), { 'idempotency-key': 'has space' });
    expect(bad.status).toBe(400);
  });
});
