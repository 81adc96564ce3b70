/**
 * Scale: `placement: all` over 100 simulated hosts (agents with distinct host ids, in this
 * process, against a real redis-server and a real coordinator) completes with every run stored
 * exactly once. What it costs the coordinator per run, beside 2 hosts, is `npm run bench:dispatch`.
 */
import { describe, expect, it } from 'vitest';
import { CoordinatorClient } from '../cli/client.js';
import { useCluster } from './helpers/cluster.js';

const cluster = useCluster('scale');
const HOSTS = 100;
const VALUES = [1, 2, 3];

interface Results {
  runs: { cellId: string; repetition: number; machine: string; state: string }[];
}

describe('placement all over 100 hosts', () => {
  it('runs every cell once on each of 100 hosts, stores each run exactly once and finishes the matrix', async () => {
    const c = await cluster.coordinator();
    // Started ten at a time: each agent's start reads this machine's fingerprint.
    for (let i = 0; i < HOSTS; i += 10) {
      await Promise.all(
        Array.from({ length: 10 }, (_, k) => {
          const n = String(i + k).padStart(3, '0');
          return cluster.agent(c.prefix, `scale-host-${n}`, `machine-${n}`, [], { heartbeat: 500 });
        }),
      );
    }
    const api = new CoordinatorClient(c.url);
    expect(((await api.json('GET', '/v1/agents')) as { hosts: number }).hosts).toBe(HOSTS);
    const submitted = (await api.json('POST', '/v1/matrices', { name: 'scale', workload: 'noop', repetitions: 1, warmup: 0, placement: 'all', params: { value: VALUES } })) as { id: string; runs: number };
    expect(submitted.runs).toBe(HOSTS * VALUES.length);

    let m: { state: string; progress: { expected: number; stored: number; ok: number } } | undefined;
    for (const end = Date.now() + 40_000; m?.state !== 'done' && Date.now() < end; ) {
      m = (await api.json('GET', `/v1/matrices/${submitted.id}`)) as typeof m;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(m?.state).toBe('done');
    expect(m?.progress).toMatchObject({ expected: 300, stored: 300, ok: 300 });

    const { runs } = (await api.json('GET', `/v1/matrices/${submitted.id}/results`)) as Results;
    expect(runs).toHaveLength(HOSTS * VALUES.length);
    expect(runs.every((r) => r.state === 'ok')).toBe(true);
    // Each (cell, host) once: no host skipped, none run twice.
    const keys = runs.map((r) => `${r.cellId} ${r.machine}`);
    expect(new Set(keys).size).toBe(keys.length);
    const machines = new Set(runs.map((r) => r.machine));
    expect(machines.size).toBe(HOSTS);
    expect(new Set(runs.map((r) => r.cellId)).size).toBe(VALUES.length);
  });
});
