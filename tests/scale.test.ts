/**
 * Scale: `placement: all` over 1,000 simulated hosts (agents with distinct host ids, 500 to a
 * process, as `npm run bench:dispatch` runs them, against a real redis-server and a real
 * coordinator in this process) completes with every run stored exactly once. What it costs the
 * coordinator per run beside 2 hosts, and what Redis holds per host and per queued run, is
 * `npm run bench:dispatch` (bench/host-scaling.ts).
 */
import { once } from 'node:events';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { startSimulatedHosts, simulatedHostsReady } from '../bench/host-scaling.js';
import { CoordinatorClient } from '../cli/client.js';
import { PACKAGE_ROOT } from '../host/native.js';
import { useCluster } from './helpers/cluster.js';

const cluster = useCluster('scale');
const HOSTS = 1000;
const VALUES = [1, 2, 3];
/** The compiled bench, whose `--role agents` runs many simulated hosts' agents in one process. */
const BENCH = path.join(PACKAGE_ROOT, 'dist', 'bench', 'dispatch.js');

interface Results {
  runs: { cellId: string; repetition: number; machine: string; state: string }[];
}

describe('placement all over 1,000 hosts', () => {
  it('runs every cell once on each of 1,000 hosts, stores each run exactly once and finishes the matrix', async () => {
    const began = Date.now();
    const c = await cluster.coordinator();
    const api = new CoordinatorClient(c.url);
    const { tokens } = (await api.json('POST', '/v1/agents/tokens', { count: HOSTS, ttl: '1h' })) as { tokens: string[] };
    // Agents out of this process: 1,000 of them beside the coordinator would measure one event loop.
    const procs = startSimulatedHosts(BENCH, {
      REDIS_URL: cluster.redis().url, FSBENCH_QUEUE_PREFIX: c.prefix, FSBENCH_SCRATCH: path.join(c.dataDir, 'scratch'), FSBENCH_JOB_KEY: cluster.jobKey,
    }, tokens);
    // Killed, not stopped: 1,000 agents closing their workers one by one outlast the hook's
    // minute here, and what a stopping agent does is tested elsewhere (agent.test.ts).
    cluster.cleanup(async () => {
      await Promise.all(procs.map(async (p) => {
        if (p.proc.exitCode !== null || p.proc.signalCode !== null) return;
        const exited = once(p.proc, 'exit');
        p.proc.kill('SIGKILL');
        await exited;
      }));
    });
    await simulatedHostsReady(procs);
    for (const end = Date.now() + 30_000; ((await api.json('GET', '/v1/agents')) as { hosts: number }).hosts < HOSTS && Date.now() < end; ) await new Promise((r) => setTimeout(r, 200));
    expect(((await api.json('GET', '/v1/agents')) as { hosts: number }).hosts).toBe(HOSTS);
    const started = Date.now();
    // The agents' processes stopped while the matrix is submitted: on a fleet they run on other
    // machines, here they share this one's two cores with the coordinator, whose submission
    // (3,000 runs signed and queued on 1,001 queues) then overran its 10 s deadline for Redis.
    // They take the runs once continued, well before their heartbeats (2 s) lapse five times.
    for (const p of procs) p.proc.kill('SIGSTOP');
    let submitted: { id: string; runs: number };
    try {
      submitted = (await api.json('POST', '/v1/matrices', { name: 'scale', workload: 'noop', repetitions: 1, warmup: 0, placement: 'all', params: { value: VALUES } })) as typeof submitted;
    } finally {
      for (const p of procs) p.proc.kill('SIGCONT');
    }
    const submittedAt = Date.now();
    expect(submitted.runs).toBe(HOSTS * VALUES.length);

    let m: { state: string; progress: { expected: number; stored: number; ok: number } } | undefined;
    for (const end = Date.now() + 120_000; m?.state !== 'done' && Date.now() < end; ) {
      m = (await api.json('GET', `/v1/matrices/${submitted.id}`)) as typeof m;
      await new Promise((r) => setTimeout(r, 200));
    }
    const finished = Date.now();
    expect(m?.state).toBe('done');
    expect(m?.progress).toMatchObject({ expected: HOSTS * VALUES.length, stored: HOSTS * VALUES.length, ok: HOSTS * VALUES.length });

    const { runs } = (await api.json('GET', `/v1/matrices/${submitted.id}/results?limit=10000`)) as Results;
    expect(runs).toHaveLength(HOSTS * VALUES.length);
    expect(runs.every((r) => r.state === 'ok')).toBe(true);
    // Each (cell, host) once: no host skipped, none run twice.
    const keys = runs.map((r) => `${r.cellId} ${r.machine}`);
    expect(new Set(keys).size).toBe(keys.length);
    expect(new Set(runs.map((r) => r.machine)).size).toBe(HOSTS);
    expect(new Set(runs.map((r) => r.cellId)).size).toBe(VALUES.length);
    process.stdout.write(
      `scale: ${HOSTS} agents in 2 processes enrolled in ${((started - began) / 1000).toFixed(1)} s; submitted in ${((submittedAt - started) / 1000).toFixed(1)} s; ` +
        `${runs.length} runs stored once each ${((finished - submittedAt) / 1000).toFixed(1)} s later\n`,
    );
  }, 400_000);
});
