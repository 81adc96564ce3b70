/**
 * A machine's name is bound to its key at enrollment (real redis-server, in-process coordinator and
 * agents): an enrolled host restarted under another machine's name runs under its own, and a
 * report its real key authenticates but whose fingerprint names another machine is dropped and
 * counted as `wrong-machine`, never stored as that machine's run.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { fingerprintHash } from '../contract/fingerprint.js';
import { jobId, QueuedRunJob, queueName, type RunReport } from '../queue/jobs.js';
import { fingerprintsKey } from '../queue/keys.js';
import { signatureDigest } from '../queue/signing.js';
import { enrollsItself, useCluster } from './helpers/cluster.js';
import { droppedReports as dropped, reportAsAgent } from './helpers/enroll.js';
import { getJson as get, submitMatrix as submit, until } from './helpers/http.js';
import { cellOf, runOnce } from './helpers/local.js';

const cluster = useCluster('machine-binding');

const Matrix = z.object({ state: z.string(), progress: z.object({ stored: z.number(), expected: z.number() }).loose() }).loose();
const Runs = z.object({ runs: z.array(z.object({ machine: z.string(), target: z.string(), state: z.string() }).loose()) });


async function finished(url: string, id: string): Promise<z.infer<typeof Runs>['runs']> {
  await until(`matrix ${id} to finish`, async () => ((await get(`${url}/v1/matrices/${id}`, Matrix)).state === 'done' ? true : undefined));
  return (await get(`${url}/v1/matrices/${id}/results`, Runs)).runs;
}

const runsOf = (runs: z.infer<typeof Runs>['runs']) => runs.map((r) => `${r.machine} ${r.target} ${r.state}`).sort();

describe("another machine's name", () => {
  it('taken by an enrolled host restarted under it writes nothing into that machine\'s results', async () => {
    const c = await cluster.coordinator();
    const redis = new Redis(cluster.redis().url);
    cluster.cleanup(() => redis.quit().then(() => undefined));
    const stateDir = await mkdtemp(path.join(os.tmpdir(), 'fsbench-binding-state-'));
    cluster.cleanup(() => rm(stateDir, { recursive: true, force: true }));
    const victim = await cluster.agent(c.prefix, 'host-victim', 'victim');
    const mallory = await cluster.agent(c.prefix, 'host-mallory', 'mallory', [], { stateDir });
    const matrix = { workload: 'noop', warmup: 0, repetitions: 1, placement: 'all', params: { value: 1 } } as const;
    const first = await submit(c.url, { ...matrix, name: 'before' });
    expect(runsOf(await finished(c.url, first))).toEqual(['mallory host-mallory ok', 'victim host-victim ok']);

    // Restarted with the victim's name, its own key and host: it runs as what its approval names.
    await mallory.stop();
    const renamed = await cluster.agent(c.prefix, 'host-mallory', 'victim', [], enrollsItself({ stateDir }));
    await renamed.enrolled;
    const second = await submit(c.url, { ...matrix, name: 'restarted' });
    expect(runsOf(await finished(c.url, second))).toEqual(['mallory host-mallory ok', 'victim host-victim ok']);
    await renamed.stop();
    await victim.stop();

    // An agent changed to report the victim's name anyway: its real key's MAC, a fingerprint naming
    // victim, for a run placed on any host (queued while no agent is live, so nothing else answers it).
    const third = await submit(c.url, { ...matrix, placement: 'any', name: 'forged' });
    // The job it answers, as it waits on the queue: the report is bound to that job, so only the machine's name is wrong.
    const any = new Queue(queueName('any'), { connection: { url: cluster.redis().url }, prefix: c.prefix });
    cluster.cleanup(() => any.close());
    const job = await until('the job to be queued', async () => (await any.getJobs(['wait'])).map((j) => QueuedRunJob.parse(j.data)).find((j) => j.matrixId === third));
    const cell = cellOf('noop', { value: 1 });
    const scratch = await mkdtemp(path.join(os.tmpdir(), 'fsbench-binding-run-'));
    cluster.cleanup(() => rm(scratch, { recursive: true, force: true }));
    const { fingerprint, ...result } = await runOnce(cell, scratch);
    const json = JSON.stringify({ ...fingerprint, machine: 'victim' });
    await redis.hset(fingerprintsKey(c.prefix), fingerprintHash(json), json);
    const report: RunReport = {
      matrixId: third, target: 'any', cellId: cell.id, repetition: 0, attempts: 1, fingerprint: fingerprintHash(json),
      result: { ...result, matrix: third }, jobId: jobId(third, cell.id, 'any', 0), jobSignature: signatureDigest(job.signature ?? ''), hostId: 'host-mallory',
    };
    expect(await dropped(c.url, 'wrong-machine')).toBe(0);
    expect(await reportAsAgent(redis, c.prefix, c.jobKey, stateDir, 'any', report)).toBe(mallory.key);
    await until('the report naming another machine to be dropped', async () => ((await dropped(c.url, 'wrong-machine')) === 1 ? true : undefined));
    // Nothing stored under the victim's name, nor any other: the run waits for an honest agent.
    expect((await get(`${c.url}/v1/matrices/${third}/results`, Runs)).runs).toEqual([]);
    expect((await get(`${c.url}/v1/matrices/${third}`, Matrix)).progress).toMatchObject({ stored: 0, expected: 1 });
  });
});
