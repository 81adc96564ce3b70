/**
 * Liveness by the Redis server's clock: an agent's heartbeat is stamped by Redis, and the
 * coordinator (`GET /v1/agents`, placement, the host timeout) compares that stamp with Redis
 * TIME, so whatever time an agent's machine keeps neither keeps a silent agent alive nor makes a
 * beating one look dead. Against a real redis-server and a real coordinator; the agent killed
 * outright is a real process (the compiled CLI).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { CoordinatorClient } from '../cli/client.js';
import { writeStatus, type AgentStatus } from '../queue/registry.js';
import { syntheticFingerprint } from './fixtures/synthetic.js';
import { useCluster } from './helpers/cluster.js';
import { preEnroll } from './helpers/enroll.js';

const cluster = useCluster('live');

/** A state directory for a simulated host's key, removed after the test. */
async function stateDir(): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'fsbench-live-state-'));
  cluster.cleanup(() => rm(dir, { recursive: true, force: true }));
  return path.join(dir, 'agent');
}
const CLI = path.resolve(import.meta.dirname, '..', 'dist', 'cli', 'fsbench.js');
const HOUR = 3_600_000;

interface Listed {
  hosts: number;
  agents: AgentStatus[];
}

async function redisNow(redis: Redis): Promise<number> {
  const [s, us] = await redis.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

/** A registry entry as an agent's heartbeat writes it, with the agent's clock `skewMs` off. */
function entry(agentId: string, hostId: string, skewMs: number, ttlMs: number): AgentStatus {
  const then = new Date(Date.now() + skewMs).toISOString();
  return {
    agentId,
    hostId,
    machine: agentId,
    labels: [],
    pid: 1,
    startedAt: then,
    lastHeartbeat: then,
    ttlMs,
    holdsHostLock: false,
    currentRun: null,
    runsDone: 0,
    warmupsDone: 0,
    fingerprint: syntheticFingerprint({ machine: agentId }),
  };
}

function client(): Redis {
  const r = new Redis(cluster.redis().url);
  cluster.cleanup(async () => {
    await r.quit();
  });
  return r;
}

const children: ChildProcess[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) {
    if (c.exitCode === null && c.signalCode === null) {
      c.kill('SIGKILL');
      await new Promise((r) => c.once('exit', r));
    }
  }
});

describe('agent liveness by the Redis server clock', () => {
  it('lists agents whose clocks are hours behind or ahead as live, with lastHeartbeat in server time and their skew', async () => {
    const c = await cluster.coordinator();
    const redis = client();
    await cluster.agent(c.prefix, 'host-local', 'local');
    await writeStatus(redis, c.prefix, entry('behind', 'host-behind', -5 * HOUR, 60_000));
    await writeStatus(redis, c.prefix, entry('ahead', 'host-ahead', 5 * HOUR, 60_000));
    const before = await redisNow(redis);
    const listed = (await new CoordinatorClient(c.url).json('GET', '/v1/agents')) as Listed;
    const after = await redisNow(redis);
    expect(listed.hosts).toBe(3);
    const byMachine = new Map(listed.agents.map((a) => [a.machine, a]));
    expect([...byMachine.keys()].sort()).toEqual(['ahead', 'behind', 'local']);
    for (const a of listed.agents) {
      // Beaten before `before` was read, and no longer ago than the agent's own ttl.
      expect(Date.parse(a.lastHeartbeat)).toBeLessThanOrEqual(after);
      expect(Date.parse(a.lastHeartbeat)).toBeGreaterThan(before - a.ttlMs);
    }
    // The skew is measured, not trusted: the clocks' difference shows as what it is (give or take the trip to Redis).
    expect(byMachine.get('behind')?.clockSkewMs).toBeLessThan(-4.9 * HOUR);
    expect(byMachine.get('ahead')?.clockSkewMs).toBeGreaterThan(4.9 * HOUR);
    expect(Math.abs(byMachine.get('local')?.clockSkewMs ?? Number.NaN)).toBeLessThan(0.1 * HOUR);
  });

  it('places runs on every host whose agents\' clocks are hours behind, each host once', async () => {
    const c = await cluster.coordinator();
    const redis = client();
    const api = new CoordinatorClient(c.url);
    // A real agent, and a registry entry of an agent far behind on the same host: placement must count the host once and
    // not drop it for the entry's old timestamp.
    await cluster.agent(c.prefix, 'host-a', 'a');
    await writeStatus(redis, c.prefix, entry('a-behind', 'host-a', -3 * HOUR, 60_000));
    await writeStatus(redis, c.prefix, entry('b-behind', 'host-b', -3 * HOUR, 60_000));
    // Placements choose among enrolled hosts only: this simulated one is enrolled as a real one would be.
    await preEnroll(cluster.redis().url, c.prefix, cluster.jobPrivateKey, await stateDir(), 'host-b', 'b-behind');
    const submitted = (await api.json('POST', '/v1/matrices', { name: 'skew', workload: 'noop', repetitions: 1, warmup: 0, placement: 'all', params: { value: [1] } })) as { id: string; runs: number };
    // Which hosts, not how many runs: host-a twice and host-b dropped would make 2 runs as well.
    const detail = (await api.json('GET', `/v1/matrices/${submitted.id}`)) as { targets: { target: string; machine: string | null }[] };
    expect(detail.targets.map((t) => t.target).sort()).toEqual(['host-a', 'host-b']);
    expect(submitted.runs).toBe(detail.targets.length);
  });

  it('forgets an agent that stopped beating once its ttl has passed on the server, however far ahead its last timestamp', async () => {
    const c = await cluster.coordinator();
    const redis = client();
    const api = new CoordinatorClient(c.url);
    const ttlMs = 1000;
    // Its own clock says this beat is 10 hours in the future: judged by that, it would look live until then.
    const beat = await writeStatus(redis, c.prefix, entry('silent', 'host-silent', 10 * HOUR, ttlMs));
    expect(((await api.json('GET', '/v1/agents')) as Listed).agents.map((a) => a.machine)).toEqual(['silent']);
    let gone: number | undefined;
    for (let end = Date.now() + 20_000; gone === undefined && Date.now() < end; ) {
      const now = await redisNow(redis);
      if (((await api.json('GET', '/v1/agents')) as Listed).agents.length === 0) gone = now;
      await sleep(100);
    }
    expect(gone).toBeDefined();
    // Not a moment before its ttl, by the server's clock.
    expect(gone ?? 0).toBeGreaterThanOrEqual(beat + ttlMs - 1);
  });

  it('lists an agent process killed outright until its ttl has passed on the server, then no more', async () => {
    const c = await cluster.coordinator();
    const redis = client();
    const api = new CoordinatorClient(c.url);
    const scratch = await mkdtemp(path.join(os.tmpdir(), 'fsbench-live-scratch-'));
    cluster.cleanup(() => rm(scratch, { recursive: true, force: true }));
    let output = '';
    const stateDir = path.join(scratch, 'agent');
    await preEnroll(cluster.redis().url, c.prefix, cluster.jobPrivateKey, stateDir, 'host-killed', 'killed');
    const proc = spawn(process.execPath, [CLI, 'agent'], {
      env: { ...process.env, REDIS_URL: cluster.redis().url, FSBENCH_QUEUE_PREFIX: c.prefix, FSBENCH_HOST_ID: 'host-killed', FSBENCH_MACHINE: 'killed', FSBENCH_HEARTBEAT: '200ms', FSBENCH_SCRATCH: scratch, FSBENCH_JOB_KEY: path.join(c.dataDir, 'job-key.pub.pem') },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(proc);
    proc.stderr.on('data', (d: Buffer) => {
      output += d.toString();
    });
    for (let end = Date.now() + 20_000; !output.includes('waiting for runs'); ) {
      if (Date.now() > end || proc.exitCode !== null) throw new Error(`the agent did not start:\n${output}`);
      await sleep(50);
    }
    const listed = ((await api.json('GET', '/v1/agents')) as Listed).agents;
    expect(listed.map((a) => a.machine)).toEqual(['killed']);
    proc.kill('SIGKILL');
    await new Promise((r) => proc.once('exit', r));
    let gone: number | undefined;
    let lastBeat = 0;
    for (let end = Date.now() + 20_000; gone === undefined && Date.now() < end; ) {
      const agents = ((await api.json('GET', '/v1/agents')) as Listed).agents;
      // The server's time after the answer: the coordinator judged liveness no later than this, so
      // an agent dropped early (by more than one request's latency) still fails the check below.
      // The time taken before the request fell short of the ttl by that latency in a full run.
      const after = await redisNow(redis);
      if (agents.length === 0) gone = after;
      else lastBeat = Date.parse(agents[0]?.lastHeartbeat ?? '');
      await sleep(50);
    }
    expect(gone).toBeDefined();
    expect(lastBeat).toBeGreaterThan(0);
    // 5 missed beats of 200 ms, by the server's clock (1 ms for the millisecond rounding).
    expect(gone ?? 0).toBeGreaterThanOrEqual(lastBeat + 1000 - 1);
  });

  it('gives up the runs of a host whose agent stopped beating, after FSBENCH_HOST_TIMEOUT by the server clock, whatever time the agent wrote', async () => {
    const hostTimeout = 1500;
    const c = await cluster.coordinator({ hostTimeout });
    const redis = client();
    const api = new CoordinatorClient(c.url);
    // Live when the matrix is placed; then silent, its last timestamp 10 hours ahead.
    await preEnroll(cluster.redis().url, c.prefix, cluster.jobPrivateKey, await stateDir(), 'host-ghost', 'ghost');
    const beat = await writeStatus(redis, c.prefix, entry('ghost', 'host-ghost', 10 * HOUR, 1000));
    const submitted = (await api.json('POST', '/v1/matrices', { name: 'ghost', workload: 'noop', repetitions: 2, warmup: 0, placement: 'all', params: { value: [1, 2] } })) as { id: string; runs: number };
    expect(submitted.runs).toBe(4);
    let m: { state: string; progress: { stored: number; failed: number } } | undefined;
    for (let end = Date.now() + 30_000; m?.state !== 'done' && Date.now() < end; ) {
      m = (await api.json('GET', `/v1/matrices/${submitted.id}`)) as typeof m;
      await sleep(100);
    }
    const doneAt = await redisNow(redis);
    expect(m?.state).toBe('done');
    expect(m?.progress).toMatchObject({ stored: 4, failed: 4 });
    const results = (await api.json('GET', `/v1/matrices/${submitted.id}/results`)) as { runs: { machine: string; error?: { code: string; message: string } }[] };
    expect(results.runs).toHaveLength(4);
    for (const r of results.runs) {
      expect(r.machine).toBe('ghost');
      expect(r.error?.code).toBe('ABANDONED');
      expect(r.error?.message).toContain('FSBENCH_HOST_TIMEOUT');
    }
    // Not before its ttl and then the host timeout had passed on the server.
    expect(doneAt).toBeGreaterThanOrEqual(beat + 1000 + hostTimeout);
  });
});
