/**
 * The host lock with real agents contending for it (in-process, real redis-server, real inotify
 * runs, which measure the kernel and so take the lock, long enough to overlap if anything let
 * them): never two runs at once on one host, both agents get their turn, and a lock lost in the
 * middle of a run abandons that run, which is run again.
 */
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { hostLockKey } from '../queue/keys.js';
import { useCluster } from './helpers/cluster.js';
import { getJson as get, submitMatrix as submit, until } from './helpers/http.js';

const cluster = useCluster('host-lock');

const Matrix = z.object({ state: z.string(), progress: z.object({ stored: z.number(), expected: z.number() }).loose() }).loose();
const Runs = z.object({
  runs: z.array(z.object({ state: z.string(), attempts: z.number(), startedAt: z.string(), finishedAt: z.string(), repetition: z.number(), cellId: z.string() }).loose()),
});
const Agents = z.object({ agents: z.array(z.object({ agentId: z.string(), hostId: z.string(), runsDone: z.number(), currentRun: z.unknown() }).loose()) });

describe('two agents of one host', () => {
  it('never run two runs at once on it: both take runs, every run is stored once, and no two overlap', async () => {
    const c = await cluster.coordinator();
    // Heartbeat 100 ms: a holder lets go after 1 s, so the other agent gets its turn within the matrix.
    const a = await cluster.agent(c.prefix, 'shared-host', 'box');
    const b = await cluster.agent(c.prefix, 'shared-host', 'box');
    const cells = 6;
    const repetitions = 2;
    const id = await submit(c.url, { name: 'contend', workload: 'inotify', warmup: 0, repetitions, params: { writers: 1, files: Array.from({ length: cells }, (_, i) => i + 1), duration: '250ms' } });
    await until('the matrix to finish', async () => {
      const m = await get(`${c.url}/v1/matrices/${id}`, Matrix);
      return m.state === 'done' ? m : undefined;
    });

    const { runs } = await get(`${c.url}/v1/matrices/${id}/results?limit=1000`, Runs);
    expect(runs).toHaveLength(cells * repetitions);
    expect(new Set(runs.map((r) => `${r.cellId}#${r.repetition}`)).size).toBe(cells * repetitions);
    expect(runs.map((r) => r.state)).toEqual(runs.map(() => 'ok'));
    // Sorted by start, each run begins only after the one before it ended.
    const spans = runs.map((r) => ({ start: Date.parse(r.startedAt), end: Date.parse(r.finishedAt) })).sort((x, y) => x.start - y.start);
    const overlaps = spans.flatMap((s, i) => {
      const before = spans[i - 1];
      return before !== undefined && s.start < before.end ? [{ before, s }] : [];
    });
    expect(overlaps).toEqual([]);

    // Agents publish what they did with each heartbeat: wait for the last one after the last run.
    const agents = await until('both agents to report their runs', async () => {
      const listed = (await get(`${c.url}/v1/agents`, Agents)).agents;
      return listed.reduce((n, x) => n + x.runsDone, 0) >= cells * repetitions ? listed : undefined;
    });
    const done = new Map(agents.map((x) => [x.agentId, x.runsDone]));
    expect(done.get(a.agentId)).toBeGreaterThan(0);
    expect(done.get(b.agentId)).toBeGreaterThan(0);
    expect((done.get(a.agentId) ?? 0) + (done.get(b.agentId) ?? 0)).toBe(cells * repetitions);
  }, 90_000);
});

describe('a host lock lost in the middle of a run', () => {
  it('abandons that run, which is run again and stored once, on its second attempt', async () => {
    const c = await cluster.coordinator();
    await cluster.agent(c.prefix, 'lossy-host', 'box');
    const redis = new Redis(cluster.redis().url);
    cluster.cleanup(() => redis.quit().then(() => undefined));
    const id = await submit(c.url, { name: 'lost-lock', workload: 'inotify', warmup: 0, repetitions: 1, params: { writers: 1, files: 1, duration: '3s' } });

    // Once the run is under way, the lock goes (what a Redis failover or an expiry would do).
    await until('the run to start', async () => {
      const { agents } = await get(`${c.url}/v1/agents`, Agents);
      return agents.some((x) => x.currentRun !== null) ? true : undefined;
    });
    expect(await redis.del(hostLockKey(c.prefix, 'lossy-host'))).toBe(1);

    await until('the matrix to finish', async () => {
      const m = await get(`${c.url}/v1/matrices/${id}`, Matrix);
      return m.state === 'done' ? m : undefined;
    });
    const { runs } = await get(`${c.url}/v1/matrices/${id}/results`, Runs);
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({ state: 'ok', attempts: 2 });
    // The stored run is the second one, whole: it started after the lock was taken away.
    const run = runs[0];
    expect(run && Date.parse(run.finishedAt) - Date.parse(run.startedAt)).toBeGreaterThanOrEqual(2900);
  }, 60_000);
});
