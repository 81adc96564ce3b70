/**
 * What someone who can write to Redis can do with a job the coordinator really signed (real
 * redis-server, in-process coordinator and agents): copy it under a new id, onto another host's
 * queue, as a repeating or delayed job, after its matrix was cancelled, after it expired, or again
 * after it ran. Each copy is refused by the agent with its code, runs nothing, and is counted in
 * the coordinator's /metrics; the one that ran already completes with the report it had.
 */
import { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { queueName } from '../queue/jobs.js';
import { queueEventsFromStart, useCluster } from './helpers/cluster.js';
import { getJson as get, submitMatrix as submit, until } from './helpers/http.js';

const cluster = useCluster('replay');

const Agents = z.object({ agents: z.array(z.object({ hostId: z.string(), runsDone: z.number(), warmupsDone: z.number() }).loose()) });
const Runs = z.object({ runs: z.array(z.object({ cellId: z.string(), repetition: z.number(), state: z.string(), error: z.object({ code: z.string() }).loose().nullable().optional() }).loose()) });
const JobData = z.object({ id: z.string(), matrixId: z.string(), repetition: z.number() }).loose();

/** `fsbench_jobs_refused_total{code}` on the coordinator's /metrics (0 when absent). */
async function refused(url: string, code: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const m = new RegExp(`^fsbench_jobs_refused_total\\{code="${code}"\\} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

/** A queue and its failure events, closed after the test. */
async function watched(prefix: string, target: string): Promise<{ q: Queue; failures: Map<string, string[]>; completions: Map<string, number> }> {
  const connection = { url: cluster.redis().url };
  const q = new Queue(queueName(target), { connection, prefix });
  const events = queueEventsFromStart(queueName(target), connection.url, prefix);
  cluster.cleanup(async () => {
    await events.close();
    await q.close();
  });
  await events.waitUntilReady();
  const failures = new Map<string, string[]>();
  events.on('failed', ({ jobId, failedReason }) => {
    failures.set(jobId, [...(failures.get(jobId) ?? []), failedReason]);
  });
  const completions = new Map<string, number>();
  events.on('completed', ({ jobId }) => {
    completions.set(jobId, (completions.get(jobId) ?? 0) + 1);
  });
  return { q, failures, completions };
}

describe('a signed job replayed from Redis', () => {
  it('is refused under a new id, on another host, delayed, repeating and after cancel, and is not run again after it ran: nothing runs, each refusal counted', async () => {
    const c = await cluster.coordinator();
    const any = await watched(c.prefix, 'any');
    // Saved before any agent takes them, as someone reading Redis would.
    const kept = await submit(c.url, { name: 'kept', workload: 'noop', warmup: 0, repetitions: 2, params: { value: 1 } });
    const dropped = await submit(c.url, { name: 'cancelled', workload: 'noop', warmup: 0, repetitions: 1, params: { value: 2 } });
    const saved = await until('the jobs to be queued', async () => {
      const jobs = await any.q.getJobs(['wait']);
      return jobs.length === 3 ? jobs : undefined;
    });
    const job = (matrixId: string, repetition: number) => {
      const j = saved.find((s) => JobData.parse(s.data).matrixId === matrixId && JobData.parse(s.data).repetition === repetition);
      if (!j) throw new Error(`no saved job ${matrixId}#${repetition}`);
      const data: unknown = j.data;
      return { data, id: JobData.parse(data).id };
    };
    const ran = job(kept, 0);
    const unrun = job(kept, 1);
    const cancelled = job(dropped, 0);
    // Taken off the queue now, put back later with a delay; and the second matrix cancelled.
    await any.q.remove(unrun.id);
    expect((await fetch(`${c.url}/v1/matrices/${dropped}`, { method: 'DELETE' })).status).toBe(200);

    await cluster.agent(c.prefix, 'host-a', 'a');
    await until('the first run to be stored', async () => ((await get(`${c.url}/v1/matrices/${kept}/results`, Runs)).runs.length === 1 ? true : undefined));

    /**
     * Adds a copy, waits for its refusal, and returns the code. On a queue the coordinator reads,
     * the failed job is collected (and removed) before the next copy under the same id.
     */
    const refusal = async (q: Queue, failures: Map<string, string[]>, id: string, add: () => Promise<unknown>, collected = true): Promise<string> => {
      const before = failures.get(id)?.length ?? 0;
      await add();
      const reason = await until(`job ${id} to be refused`, () => Promise.resolve((failures.get(id)?.length ?? 0) > before ? failures.get(id)?.at(-1) : undefined));
      if (collected) await until(`job ${id} to be collected`, async () => ((await q.getJobState(id)) === 'unknown' ? true : undefined));
      return /\[([A-Z_]+)\]$/.exec(reason)?.[1] ?? reason;
    };
    const { q, failures, completions } = any;
    // Again under its own id, once it ran: not run again, but completed with the report it had (a retry
    // whose completion Redis lost is the same thing), which the coordinator has stored already.
    expect(completions.get(ran.id)).toBe(1);
    await q.add('run', ran.data, { jobId: ran.id });
    await until('the copy to complete', () => Promise.resolve(completions.get(ran.id) === 2 ? true : undefined));
    expect(await refusal(q, failures, 'copy-1', () => q.add('run', ran.data, { jobId: 'copy-1' }))).toBe('JOB_MISROUTED');
    expect(await refusal(q, failures, unrun.id, () => q.add('run', unrun.data, { jobId: unrun.id, delay: 50 }))).toBe('JOB_REPLAYED');
    expect(await refusal(q, failures, cancelled.id, () => q.add('run', cancelled.data, { jobId: cancelled.id }))).toBe('JOB_CANCELLED');

    // Onto another host's queue, under the id it was signed with: that host's agent refuses it
    // (and the coordinator, which put no matrix there, leaves the failed job alone).
    await cluster.agent(c.prefix, 'host-b', 'b');
    const other = await watched(c.prefix, 'host-b');
    expect(await refusal(other.q, other.failures, ran.id, () => other.q.add('run', ran.data, { jobId: ran.id }), false)).toBe('JOB_MISROUTED');

    // As a repeating job: every job the scheduler makes is refused.
    await q.upsertJobScheduler('replay', { every: 200 }, { name: 'run', data: ran.data });
    const repeated = await until('a repeated copy to be refused', () => Promise.resolve([...failures.keys()].find((k) => k.startsWith('repeat:'))));
    await q.removeJobScheduler('replay');
    expect(failures.get(repeated)?.[0]).toMatch(/\[JOB_(MISROUTED|REPLAYED)\]$/);

    // Nothing ran but the one real run; each refusal is on /metrics.
    const { agents } = await get(`${c.url}/v1/agents`, Agents);
    expect(Object.fromEntries(agents.map((a) => [a.hostId, [a.runsDone, a.warmupsDone]]))).toEqual({ 'host-a': [1, 0], 'host-b': [0, 0] });
    expect(await refused(c.url, 'JOB_REPLAYED')).toBe(1);
    expect(await refused(c.url, 'JOB_CANCELLED')).toBe(1);
    expect(await refused(c.url, 'JOB_MISROUTED')).toBeGreaterThanOrEqual(3);
    const { runs } = await get(`${c.url}/v1/matrices/${kept}/results`, Runs);
    expect(runs.filter((r) => r.state === 'ok').map((r) => r.repetition)).toEqual([0]);
  });

  it('is refused once expired (JOB_EXPIRED), runs nothing, and the run is stored as failed with that code', async () => {
    // An embedded coordinator may sign jobs valid for a millisecond; the setting's floor is a minute.
    const c = await cluster.coordinator({ jobTtl: 1 });
    const id = await submit(c.url, { name: 'expired', workload: 'noop', warmup: 0, repetitions: 1, params: { value: 3 } });
    await new Promise((resolve) => setTimeout(resolve, 20));
    await cluster.agent(c.prefix, 'host-late', 'late');
    const { runs } = await until('the run to be stored', async () => {
      const r = await get(`${c.url}/v1/matrices/${id}/results`, Runs);
      return r.runs.length === 1 ? r : undefined;
    });
    expect(runs[0]?.state).toBe('failed');
    expect(JSON.stringify(runs[0])).toContain('JOB_EXPIRED');
    expect(await refused(c.url, 'JOB_EXPIRED')).toBe(1);
    const { agents } = await get(`${c.url}/v1/agents`, Agents);
    expect(agents.map((a) => [a.runsDone, a.warmupsDone])).toEqual([[0, 0]]);
  });
});
