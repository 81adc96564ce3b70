/**
 * What someone who can write to Redis, but lacks the coordinator's key, can no longer do (real
 * redis-server, in-process coordinator and agents): make an agent run a job, have a forged report
 * stored or counted toward done, or keep a host from measuring with a lock of their own.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { fingerprintHash } from '../contract/fingerprint.js';
import { jobId, qualifiedQueueName, queueName, type RunJob, type RunReport, type SignedRunReport } from '../queue/jobs.js';
import { fingerprintsKey, hostLockKey } from '../queue/keys.js';
import { JobSigner, JobVerifier, signatureDigest } from '../queue/signing.js';
import { coordinatorReportKey, loadOrCreateAgentKey, type AgentIdentity } from '../agent/identity.js';
import { reportMac, reportMacKey } from '../queue/enrollment.js';
import { queueEventsFromStart, useCluster } from './helpers/cluster.js';
import { preEnroll } from './helpers/enroll.js';
import type { Cell } from '../contract/matrix.js';
import { getJson as get, submitMatrix as submit, until } from './helpers/http.js';
import { cellOf, runOnce } from './helpers/local.js';

const cluster = useCluster('forgery');

const Matrix = z.object({ state: z.string(), progress: z.object({ stored: z.number(), expected: z.number() }).loose() }).loose();
const Runs = z.object({ runs: z.array(z.object({ cellId: z.string(), repetition: z.number(), state: z.string() }).loose()) });
const Agents = z.object({ agents: z.array(z.object({ hostId: z.string(), runsDone: z.number(), warmupsDone: z.number() }).loose()) });

/** The value of `fsbench_reports_dropped_total{reason}` on the coordinator's /metrics (0 when absent). */
async function dropped(url: string, reason: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const m = new RegExp(`^fsbench_reports_dropped_total\\{reason="${reason}"\\} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

/** An agent key enrolled for `hostId`, as a host the coordinator trusts would hold it, with the secret its reports carry the MAC of. */
async function enrolledForger(prefix: string, dir: string, hostId: string): Promise<Forger> {
  const stateDir = path.join(dir, `state-${hostId}`);
  const { identity } = await preEnroll(cluster.redis().url, prefix, cluster.jobPrivateKey, stateDir, hostId, hostId);
  const redis = redisClient();
  const verifier = new JobSigner(createPrivateKey(cluster.jobPrivateKey)).verifier;
  const theirs = await until('the coordinator to publish its report key', async () => (await coordinatorReportKey(redis, prefix, verifier)) ?? undefined);
  return { identity, macKey: reportMacKey(identity.reportKey, theirs, identity.fingerprint, hostId) };
}

interface Forger {
  readonly identity: AgentIdentity;
  readonly macKey: Buffer;
}

/** A `completed` event as BullMQ's completion script appends it, its return value a report authenticated by `signer` (or `over` it). */
async function appendCompleted(redis: Redis, stream: string, r: RunReport, signer: Forger, over: Partial<SignedRunReport> = {}): Promise<void> {
  const text = JSON.stringify(r);
  const envelope: SignedRunReport = { report: text, key: signer.identity.fingerprint, mac: reportMac(signer.macKey, text), ...over };
  await redis.xadd(stream, '*', 'event', 'completed', 'jobId', r.jobId, 'returnvalue', JSON.stringify(envelope), 'prev', 'active');
}

function redisClient(): Redis {
  const r = new Redis(cluster.redis().url);
  cluster.cleanup(() => r.quit().then(() => undefined));
  return r;
}

describe('jobs not signed by the coordinator', () => {
  it('are refused by the agent with JOB_UNSIGNED before anything runs, warmups included, and are not stored', async () => {
    const c = await cluster.coordinator();
    await cluster.agent(c.prefix, 'forge-host', 'victim');
    const q = new Queue(queueName('any'), { connection: { url: cluster.redis().url }, prefix: c.prefix });
    const events = queueEventsFromStart(queueName('any'), cluster.redis().url, c.prefix);
    cluster.cleanup(async () => {
      await events.close();
      await q.close();
    });
    await events.waitUntilReady();
    const failed = new Map<string, string>();
    events.on('failed', ({ jobId, failedReason }) => failed.set(jobId, failedReason));

    // Valid per the contract in every field, where it sits included: only the signature is missing or not over this job.
    const cell = cellOf('noop', { value: 7 });
    const run = (repetition: number): RunJob => {
      const id = jobId('forged', cell.id, 'any', repetition);
      return { matrixId: 'forged', cell, repetition, warmup: 2, target: 'any', id, queue: qualifiedQueueName(c.prefix, 'any'), issuedAt: Date.now(), expiresAt: Date.now() + 3_600_000, nonce: randomBytes(16).toString('base64url') };
    };
    const otherKey = new JobSigner(generateKeyPairSync('ed25519').privateKey);
    const realKey = new JobSigner(createPrivateKey(cluster.jobPrivateKey));
    const add = (job: RunJob, signature?: string) => q.add('run', { ...job, ...(signature === undefined ? {} : { signature }) }, { jobId: job.id, attempts: 3 });
    const unsigned = await add(run(0));
    const wronglySigned = await add(run(1), otherKey.sign(run(1)));
    // The coordinator's signature over another job does not carry over to this one: made with its
    // real key, and valid for the job it was made for, as the agent's own key file verifies.
    const another = run(0);
    const anothersSignature = realKey.sign(another);
    const agentsVerifier = new JobVerifier(createPublicKey(cluster.jobKey));
    expect(agentsVerifier.verify(another, anothersSignature)).toBe(true);
    const tampered = await add(run(2), anothersSignature);
    // Its real key's signature, then the payload changed: more warmups, valid for a year.
    const signedThenChanged = run(3);
    const realSignature = realKey.sign(signedThenChanged);
    const changed = await add({ ...signedThenChanged, warmup: 50, expiresAt: signedThenChanged.expiresAt + 365 * 86_400_000 }, realSignature);
    const ids = [unsigned.id, wronglySigned.id, tampered.id, changed.id].map((id) => id ?? '');

    const reasons = await until('the four jobs to fail', () => Promise.resolve(ids.every((id) => failed.has(id)) ? ids.map((id) => failed.get(id) ?? '') : undefined));
    expect(reasons[0]).toMatch(/carries no signature: refused without running it .*\[JOB_UNSIGNED\]$/);
    expect(reasons[1]).toMatch(/is not signed by the coordinator key SHA256:\S+: refused .*\[JOB_UNSIGNED\]$/);
    expect(reasons[2]).toMatch(/is not signed by the coordinator key .*\[JOB_UNSIGNED\]$/);
    expect(reasons[3]).toMatch(/is not signed by the coordinator key .*\[JOB_UNSIGNED\]$/);

    // Nothing ran, not even a warmup; the collector found the failed jobs unsigned and stored none.
    const { agents } = await get(`${c.url}/v1/agents`, Agents);
    expect(agents.map((a) => [a.hostId, a.runsDone, a.warmupsDone])).toEqual([['forge-host', 0, 0]]);
    await until('the refused jobs to be dropped', async () => ((await dropped(c.url, 'unsigned')) === 4 ? true : undefined));
    expect(await q.getJobCounts('failed', 'wait', 'active', 'completed')).toEqual({ failed: 0, wait: 0, active: 0, completed: 0 });
    expect((await get(`${c.url}/v1/matrices`, z.object({ matrices: z.array(z.unknown()) }))).matrices).toEqual([]);

    // The same agent runs what the coordinator issued.
    const id = await submit(c.url, { name: 'signed', workload: 'noop', warmup: 0, repetitions: 2, params: { value: 1 } });
    const m = await until('the signed matrix to finish', async () => {
      const v = await get(`${c.url}/v1/matrices/${id}`, Matrix);
      return v.state === 'done' ? v : undefined;
    });
    expect(m.progress).toMatchObject({ stored: 2, expected: 2 });
  });

  it('an agent without the public key refuses to start, saying where to find it', async () => {
    const c = await cluster.coordinator();
    await expect(cluster.agent(c.prefix, 'keyless-host', 'keyless', [], { jobKey: undefined })).rejects.toThrow(/FSBENCH_JOB_KEY is not set: .*job-key\.pub\.pem/);
    const privatePem = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    await expect(cluster.agent(c.prefix, 'keyless-host', 'keyless', [], { jobKey: privatePem })).rejects.toThrow(/holds a private key/);
  });
});

describe('forged reports', () => {
  it('for a cell not in the matrix, a repetition past `repetitions`, an unknown matrix or another queue are dropped and never count toward done', async () => {
    const c = await cluster.coordinator();
    const id = await submit(c.url, { name: 'honest', workload: 'noop', warmup: 0, repetitions: 2, params: { value: [1, 2] } });
    const issued = cellOf('noop', { value: 1 });
    const foreign = cellOf('noop', { value: 99 });

    // A real run's result and fingerprint, as an agent would publish and report them.
    const scratch = await mkdtemp(path.join(os.tmpdir(), 'fsbench-forgery-'));
    cluster.cleanup(() => rm(scratch, { recursive: true, force: true }));
    const { fingerprint, ...result } = await runOnce(issued, scratch);
    const json = JSON.stringify(fingerprint);
    const redis = redisClient();
    await redis.hset(fingerprintsKey(c.prefix), fingerprintHash(json), json);
    // Signed by an enrolled agent's key: even a host the coordinator trusts cannot report runs it was not issued.
    const forger = await enrolledForger(c.prefix, scratch, 'forger-host');
    const report = (cellId: string, repetition: number, over: Partial<RunReport> = {}): RunReport => {
      const r = { matrixId: id, target: 'any', cellId, repetition, ...over };
      return {
        ...r,
        attempts: 1,
        fingerprint: fingerprintHash(json),
        result: { ...result, matrix: r.matrixId, cellId, repetition },
        jobId: jobId(r.matrixId, cellId, r.target, repetition),
        jobSignature: signatureDigest('x'),
        hostId: 'forger-host',
      };
    };
    const forged = [
      report(foreign.id, 0),
      report(issued.id, 2),
      report(issued.id, 1000),
      report(issued.id, 0, { matrixId: 'nosuchmatrix' }),
      report(issued.id, 0, { target: 'another-host' }),
    ];
    // The shape of BullMQ's own `completed` event, as its completion script appends it.
    const stream = `${c.prefix}:${queueName('any')}:events`;
    for (const r of forged) await appendCompleted(redis, stream, r, forger);

    await until('the forged reports to be dropped', async () => {
      const counts = await Promise.all(['unknown-cell', 'repetition', 'unknown-matrix', 'wrong-host'].map((r) => dropped(c.url, r)));
      return counts.join(',') === '1,2,1,1' ? counts : undefined;
    });
    const before = await get(`${c.url}/v1/matrices/${id}`, Matrix);
    expect(before.state).toBe('queued');
    expect(before.progress).toMatchObject({ stored: 0, expected: 4 });
    expect((await get(`${c.url}/v1/matrices/${id}/results`, Runs)).runs).toEqual([]);

    // The real runs still complete it, each stored once, and nothing forged among them.
    await cluster.agent(c.prefix, 'honest-host', 'honest');
    const done = await until('the matrix to finish', async () => {
      const m = await get(`${c.url}/v1/matrices/${id}`, Matrix);
      return m.state === 'done' ? m : undefined;
    });
    expect(done.progress).toMatchObject({ stored: 4, expected: 4 });
    const { runs } = await get(`${c.url}/v1/matrices/${id}/results`, Runs);
    const cells = [issued.id, cellOf('noop', { value: 2 }).id];
    expect(runs.map((r) => `${r.cellId}#${r.repetition}`).sort()).toEqual(cells.flatMap((cell) => [`${cell}#0`, `${cell}#1`]).sort());
    expect(runs.every((r) => r.state === 'ok')).toBe(true);
  });
});

describe('forged completed events written before the agent finishes', () => {
  it('are not stored (unenrolled key, changed payload, another host), and the real runs are, each once', async () => {
    const c = await cluster.coordinator();
    const id = await submit(c.url, { name: 'pre-empted', workload: 'noop', warmup: 0, repetitions: 2, params: { value: 1 } });
    const cell: Cell = cellOf('noop', { value: 1 });
    const scratch = await mkdtemp(path.join(os.tmpdir(), 'fsbench-forgery-'));
    cluster.cleanup(() => rm(scratch, { recursive: true, force: true }));
    // A made-up machine, published like a real fingerprint.
    const { fingerprint, ...result } = await runOnce(cell, scratch);
    if (result.state !== 'ok') throw new Error(`the noop run failed: ${result.state}`);
    const fake = JSON.stringify({ ...fingerprint, machine: 'forged-machine' });
    const redis = redisClient();
    await redis.hset(fingerprintsKey(c.prefix), fingerprintHash(fake), fake);
    const report = (repetition: number, hostId: string): RunReport => ({
      matrixId: id,
      target: 'any',
      cellId: cell.id,
      repetition,
      attempts: 1,
      fingerprint: fingerprintHash(fake),
      result: { ...result, matrix: id, cellId: cell.id, repetition, metrics: { ...result.metrics, value: 666 } },
      jobId: jobId(id, cell.id, 'any', repetition),
      jobSignature: signatureDigest('x'),
      hostId,
    });
    const stream = `${c.prefix}:${queueName('any')}:events`;
    // A key nobody enrolled, with a secret of its own.
    const stranger: Forger = { identity: await loadOrCreateAgentKey(await mkdtemp(path.join(scratch, 'stranger-'))), macKey: randomBytes(32) };
    // An enrolled host's key: its report changed after its MAC was made, and a report it makes for another host.
    const forger = await enrolledForger(c.prefix, scratch, 'forger-host');
    for (const repetition of [0, 1]) {
      await appendCompleted(redis, stream, report(repetition, 'forger-host'), stranger);
      const authenticText = JSON.stringify(report(repetition, 'forger-host'));
      await appendCompleted(redis, stream, { ...report(repetition, 'forger-host'), attempts: 2 }, forger, { mac: reportMac(forger.macKey, authenticText) });
      await appendCompleted(redis, stream, report(repetition, 'honest-host'), forger);
    }
    await until('the forged reports to be dropped', async () => {
      const counts = await Promise.all(['unenrolled', 'bad-mac', 'wrong-host'].map((r) => dropped(c.url, r)));
      return counts.join(',') === '2,2,2' ? counts : undefined;
    });
    expect((await get(`${c.url}/v1/matrices/${id}`, Matrix)).progress).toMatchObject({ stored: 0, expected: 2 });

    // The agent that really runs them: both stored, from its machine, with their real values.
    await cluster.agent(c.prefix, 'honest-host', 'honest');
    await until('the matrix to finish', async () => ((await get(`${c.url}/v1/matrices/${id}`, Matrix)).state === 'done' ? true : undefined));
    const { runs } = await get(`${c.url}/v1/matrices/${id}/results`, z.object({ runs: z.array(z.object({ repetition: z.number(), machine: z.string(), metrics: z.record(z.string(), z.unknown()).nullable() }).loose()) }));
    expect(runs.map((r) => [r.repetition, r.machine]).sort()).toEqual([[0, 'honest'], [1, 'honest']]);
    expect(runs.map((r) => r.metrics?.['value'])).toEqual([1, 1]);
  });
});

describe('a foreign host lock', () => {
  const foreignLocks: [string, (r: Redis, key: string) => Promise<unknown>][] = [
    ['a value no agent writes, expiring in an hour', (r, key) => r.set(key, 'mallory', 'PX', 3_600_000)],
    ["an owner's value expiring in an hour, beyond the longest lease", (r, key) => r.set(key, 'box-1-00000000/6f9619ff-8b86-4011-b42d-00c04fc964ff', 'PX', 3_600_000)],
    ["an owner's value without expiry", (r, key) => r.set(key, 'box-1-00000000/6f9619ff-8b86-4011-b42d-00c04fc964ff')],
    ['a key of another type', (r, key) => r.hset(key, 'owner', 'mallory')],
  ];
  it.each(foreignLocks)('(%s) does not stop the host agent from measuring', async (_what, plant) => {
    const c = await cluster.coordinator();
    const redis = redisClient();
    const key = hostLockKey(c.prefix, 'locked-host');
    await plant(redis, key);
    await cluster.agent(c.prefix, 'locked-host', 'box');
    // inotify measures the kernel, so it runs only under the host lock.
    const id = await submit(c.url, { name: 'locked', workload: 'inotify', warmup: 0, repetitions: 1, params: { writers: 1, files: 1, duration: '100ms' } });
    const m = await until('the matrix to finish', async () => {
      const v = await get(`${c.url}/v1/matrices/${id}`, Matrix);
      return v.state === 'done' ? v : undefined;
    });
    expect(m.progress).toMatchObject({ stored: 1, expected: 1 });
    const { runs } = await get(`${c.url}/v1/matrices/${id}/results`, Runs);
    expect(runs.map((r) => r.state)).toEqual(['ok']);
    // What holds it now, if anything, is an agent's lease: bounded, and let go when idle.
    const ttl = await redis.pttl(key);
    expect(ttl === -2 || (ttl > 0 && ttl <= 300_000)).toBe(true);
  });
});
