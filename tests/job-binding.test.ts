/**
 * A report is bound to the job it answers (real redis-server, in-process coordinators and agents,
 * agent keys enrolled with the coordinator's real key): it names the job by its signature's
 * digest, which the coordinator recorded when it queued the job. An honest matrix is stored whole,
 * across a restart of the coordinator too; a report whose MAC is an enrolled key's own but that
 * answers a job never issued, another run's job or another host's job is dropped and counted as
 * `wrong-job`, while the very same report carrying the right job is stored. Matrices submitted
 * before the coordinator recorded its jobs finish as before. Drops are logged once per episode.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { fingerprintHash, type MachineFingerprint } from '../contract/fingerprint.js';
import type { Cell } from '../contract/matrix.js';
import type { RunResultSansFingerprint } from '../contract/result.js';
import { DropLog, QUIET_MS } from '../coordinator/ingest/index.js';
import { Store } from '../coordinator/store/index.js';
import { jobId, QueuedRunJob, queueName, type RunReport } from '../queue/jobs.js';
import { fingerprintsKey } from '../queue/keys.js';
import { writeStatus } from '../queue/registry.js';
import { signatureDigest } from '../queue/signing.js';
import { useCluster } from './helpers/cluster.js';
import { droppedReports as dropped, preEnroll, reportAsAgent } from './helpers/enroll.js';
import { getJson as get, submitMatrix as submit, until } from './helpers/http.js';
import { cellOf, runOnce } from './helpers/local.js';

const cluster = useCluster('job-binding');

const Matrix = z.object({ state: z.string(), progress: z.object({ stored: z.number(), expected: z.number() }).loose() }).loose();
const Runs = z.object({ runs: z.array(z.object({ cellId: z.string(), repetition: z.number(), target: z.string(), machine: z.string(), state: z.string() }).loose()) });

const cell: Cell = cellOf('noop', { value: 1 });
const noop = { workload: 'noop', warmup: 0, params: { value: 1 } } as const;

async function finished(url: string, id: string): Promise<z.infer<typeof Matrix>> {
  return until(`matrix ${id} to finish`, async () => {
    const m = await get(`${url}/v1/matrices/${id}`, Matrix);
    return m.state === 'done' ? m : undefined;
  });
}

const runsOf = async (url: string, id: string) =>
  (await get(`${url}/v1/matrices/${id}/results`, Runs)).runs.map((r) => `${r.target}#${r.repetition} ${r.machine} ${r.state}`).sort();

function redisClient(): Redis {
  const r = new Redis(cluster.redis().url);
  cluster.cleanup(() => r.quit().then(() => undefined));
  return r;
}

/** The signatures of the jobs waiting on `target`'s queue, by repetition, as anyone reading Redis sees them. */
async function queuedSignatures(prefix: string, target: string, n: number): Promise<Map<number, string>> {
  const q = new Queue(queueName(target), { connection: { url: cluster.redis().url }, prefix });
  try {
    return await until(`${n} jobs on ${target}'s queue`, async () => {
      const jobs = (await q.getJobs(['wait'])).map((j) => QueuedRunJob.parse(j.data));
      if (jobs.length !== n) return undefined;
      return new Map(jobs.map((j) => [j.repetition, j.signature ?? '']));
    });
  } finally {
    await q.close();
  }
}

/** A real noop result and a fingerprint naming `machine`, published as its agent would publish it. */
async function realRun(redis: Redis, prefix: string, machine: string): Promise<{ result: RunResultSansFingerprint; fingerprint: MachineFingerprint; hash: string }> {
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'fsbench-binding-run-'));
  cluster.cleanup(() => rm(scratch, { recursive: true, force: true }));
  const { fingerprint: own, ...result } = await runOnce(cell, scratch);
  const fingerprint = { ...own, machine };
  const json = JSON.stringify(fingerprint);
  await redis.hset(fingerprintsKey(prefix), fingerprintHash(json), json);
  return { result, fingerprint, hash: fingerprintHash(json) };
}

/** An agent key enrolled for `hostId` with the coordinator's real key, kept in a state directory of the test's. */
async function enrolled(prefix: string, hostId: string, machine: string): Promise<{ stateDir: string; key: string }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'fsbench-binding-state-'));
  cluster.cleanup(() => rm(dir, { recursive: true, force: true }));
  const { key } = await preEnroll(cluster.redis().url, prefix, cluster.jobPrivateKey, dir, hostId, machine);
  return { stateDir: dir, key };
}

describe('an honest matrix', () => {
  it('is stored whole, its jobs recorded before they were queued and still known to a coordinator restarted while they wait', async () => {
    const first = await cluster.coordinator();
    const id = await submit(first.url, { ...noop, name: 'honest', params: { value: [1, 2] }, repetitions: 2 });
    await queuedSignatures(first.prefix, 'any', 4);
    // Restarted on the same database and queues while every job waits: what it issued is on disk.
    await first.stop();
    const c = await cluster.coordinator({ dataDir: first.dataDir, queuePrefix: first.prefix });
    await cluster.agent(c.prefix, 'host-honest', 'honest');
    const done = await finished(c.url, id);
    expect(done.progress).toMatchObject({ stored: 4, expected: 4 });
    expect(await runsOf(c.url, id)).toEqual(['any#0 honest ok', 'any#0 honest ok', 'any#1 honest ok', 'any#1 honest ok']);
    expect(await dropped(c.url, 'wrong-job')).toBe(0);
  });
});

describe('a report with a valid MAC of an enrolled key', () => {
  it('for a job never issued, or for job A carrying job B\'s binding, is dropped and counted; carrying its own job it is stored', async () => {
    const c = await cluster.coordinator();
    const redis = redisClient();
    const mallory = await enrolled(c.prefix, 'host-mallory', 'mallory');
    // Queued while no agent is live: nothing but the test answers these jobs until one starts.
    const id = await submit(c.url, { ...noop, name: 'bound', repetitions: 2 });
    const signatures = await queuedSignatures(c.prefix, 'any', 2);
    const [a, b] = [signatures.get(0), signatures.get(1)];
    if (a === undefined || b === undefined) throw new Error('jobs 0 and 1 are not both queued');
    expect(a).not.toBe(b);
    const { result, hash } = await realRun(redis, c.prefix, 'mallory');
    const report = (repetition: number, signature: string): RunReport => ({
      matrixId: id, target: 'any', cellId: cell.id, repetition, attempts: 1, fingerprint: hash,
      result: { ...result, matrix: id, repetition }, jobId: jobId(id, cell.id, 'any', repetition), jobSignature: signatureDigest(signature), hostId: 'host-mallory',
    });
    const send = (r: RunReport) => reportAsAgent(redis, c.prefix, c.jobKey, mallory.stateDir, 'any', r);

    // The job's signature made up (nobody but the coordinator can sign one), then job B's real one on job A's report.
    expect(await send(report(0, randomBytes(64).toString('base64')))).toBe(mallory.key);
    expect(await send(report(0, b))).toBe(mallory.key);
    await until('both reports to be dropped as wrong-job', async () => ((await dropped(c.url, 'wrong-job')) === 2 ? true : undefined));
    expect((await get(`${c.url}/v1/matrices/${id}`, Matrix)).progress).toMatchObject({ stored: 0, expected: 2 });

    // The same key, the same report, the job it answers: stored. Only the binding was wrong above.
    await send(report(0, a));
    await until('the bound report to be stored', async () => ((await get(`${c.url}/v1/matrices/${id}`, Matrix)).progress.stored === 1 ? true : undefined));
    await cluster.agent(c.prefix, 'host-honest', 'honest');
    await finished(c.url, id);
    expect(await runsOf(c.url, id)).toEqual(['any#0 mallory ok', 'any#1 honest ok']);
    expect(await dropped(c.url, 'wrong-job')).toBe(2);
  });

  it("for another host's job is dropped and counted, whichever run it claims", async () => {
    const c = await cluster.coordinator();
    const redis = redisClient();
    const victim = await enrolled(c.prefix, 'host-victim', 'victim');
    const mallory = await enrolled(c.prefix, 'host-mallory', 'mallory');
    const { result, fingerprint, hash } = await realRun(redis, c.prefix, 'mallory');
    // Both hosts live as their agents would say so, neither taking a job: placement `all` gives each one.
    for (const [hostId, machine] of [['host-victim', 'victim'], ['host-mallory', 'mallory']] as const) {
      await writeStatus(redis, c.prefix, {
        agentId: `${hostId}-listed`, hostId, machine, labels: [], pid: process.pid, startedAt: new Date().toISOString(), lastHeartbeat: new Date().toISOString(),
        ttlMs: 60_000, holdsHostLock: false, currentRun: null, runsDone: 0, warmupsDone: 0, fingerprint: { ...fingerprint, machine },
      });
    }
    const id = await submit(c.url, { ...noop, name: 'two-hosts', placement: 'all', repetitions: 1 });
    const theirs = (await queuedSignatures(c.prefix, 'host-victim', 1)).get(0);
    const own = (await queuedSignatures(c.prefix, 'host-mallory', 1)).get(0);
    if (theirs === undefined || own === undefined) throw new Error('a host has no job queued');
    const report = (target: string, signature: string): RunReport => ({
      matrixId: id, target, cellId: cell.id, repetition: 0, attempts: 1, fingerprint: hash,
      result: { ...result, matrix: id }, jobId: jobId(id, cell.id, target, 0), jobSignature: signatureDigest(signature), hostId: 'host-mallory',
    });

    // Its own run answered with the victim's job, and the victim's run itself.
    expect(await reportAsAgent(redis, c.prefix, c.jobKey, mallory.stateDir, 'host-mallory', report('host-mallory', theirs))).toBe(mallory.key);
    expect(await reportAsAgent(redis, c.prefix, c.jobKey, mallory.stateDir, 'host-victim', report('host-victim', theirs))).toBe(mallory.key);
    await until('both reports to be dropped', async () =>
      (await dropped(c.url, 'wrong-job')) === 1 && (await dropped(c.url, 'wrong-host')) === 1 ? true : undefined,
    );
    expect((await get(`${c.url}/v1/matrices/${id}`, Matrix)).progress).toMatchObject({ stored: 0, expected: 2 });

    // Its own run with its own job is stored; the victim's waits for the victim, whose agent stores it.
    await reportAsAgent(redis, c.prefix, c.jobKey, mallory.stateDir, 'host-mallory', report('host-mallory', own));
    await until("mallory's bound report to be stored", async () => ((await get(`${c.url}/v1/matrices/${id}`, Matrix)).progress.stored === 1 ? true : undefined));
    await cluster.agent(c.prefix, 'host-victim', 'victim', [], { stateDir: victim.stateDir });
    await finished(c.url, id);
    expect(await runsOf(c.url, id)).toEqual(['host-mallory#0 mallory ok', 'host-victim#0 victim ok']);
    expect(await dropped(c.url, 'wrong-job')).toBe(1);
  });
});

describe('a matrix submitted before the coordinator recorded its jobs', () => {
  it('finishes with the reports of the jobs issued then; one submitted after is bound', async () => {
    const first = await cluster.coordinator();
    const before = await submit(first.url, { ...noop, name: 'before-upgrade', repetitions: 2 });
    await queuedSignatures(first.prefix, 'any', 2);
    await first.stop();
    // The database as an older fsbench left it: no record of the jobs it queued.
    const store = Store.open(first.dataDir);
    store.db.exec('DROP TABLE issued_jobs; DROP TABLE unbound_matrices;');
    store.close();
    const c = await cluster.coordinator({ dataDir: first.dataDir, queuePrefix: first.prefix });
    const agent = await cluster.agent(c.prefix, 'host-honest', 'honest');
    expect((await finished(c.url, before)).progress).toMatchObject({ stored: 2, expected: 2 });
    expect(await dropped(c.url, 'wrong-job')).toBe(0);
    await agent.stop();

    const redis = redisClient();
    const mallory = await enrolled(c.prefix, 'host-mallory', 'mallory');
    const after = await submit(c.url, { ...noop, name: 'after-upgrade', repetitions: 1 });
    await queuedSignatures(c.prefix, 'any', 1);
    const { result, hash } = await realRun(redis, c.prefix, 'mallory');
    await reportAsAgent(redis, c.prefix, c.jobKey, mallory.stateDir, 'any', {
      matrixId: after, target: 'any', cellId: cell.id, repetition: 0, attempts: 1, fingerprint: hash,
      result: { ...result, matrix: after }, jobId: jobId(after, cell.id, 'any', 0), jobSignature: signatureDigest(randomBytes(64).toString('base64')), hostId: 'host-mallory',
    });
    await until('the unbound report to be dropped', async () => ((await dropped(c.url, 'wrong-job')) === 1 ? true : undefined));
    expect((await get(`${c.url}/v1/matrices/${after}`, Matrix)).progress).toMatchObject({ stored: 0, expected: 1 });
  });
});

describe('the log of dropped reports', () => {
  it('says a flood once when it starts and once with its total when it has stopped, not once per batch', () => {
    const lines: string[] = [];
    const log = new DropLog((line) => lines.push(line));
    const start = Date.now();
    // 500 batches of forged reports, one every 25 ms, then quiet.
    for (let i = 0; i < 500; i++) log.note('report', new Map([['wrong-job', { n: 3, example: `entry ${i}` }]]), start + 25 * i);
    const last = start + 25 * 499;
    log.endQuiet(last + QUIET_MS - 1);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^collector: dropped 3 report\(s\) this coordinator did not issue \(wrong-job\), e\.g\. entry 0; /);
    log.endQuiet(last + QUIET_MS);
    expect(lines).toHaveLength(2);
    expect(lines[1]).toBe(`collector: 1500 report(s) dropped (wrong-job) from ${new Date(start).toISOString()} to ${new Date(last).toISOString()}`);
    // The next drop starts a new episode.
    log.note('report', new Map([['wrong-job', { n: 1, example: 'later' }]]), last + 2 * QUIET_MS);
    expect(lines).toHaveLength(3);
  });
});
