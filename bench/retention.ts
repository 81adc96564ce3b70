/**
 * Part of `npm run bench:dispatch`: does the coordinator keep anything per finished run? A
 * coordinator in this process (so its heap can be measured after full garbage collections,
 * which `--expose-gc` allows) and two agent processes run rounds of no-op matrices; the heap
 * in use after each round, once collected, must stay flat however many runs are behind it.
 * RSS cannot tell: it saw-tooths with the collector and keeps pages the heap has freed.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { CoordinatorClient } from '../cli/client.js';
import { startCoordinator } from '../coordinator/server.js';

const Created = z.object({ id: z.string() }).loose();
const List = z.object({ matrices: z.array(z.object({ id: z.string(), state: z.string() }).loose()) }).loose();

export interface Retention {
  readonly setup: string;
  /** Runs finished so far -> heap in use after full collections, MiB. */
  readonly heapAfterGcMiB: { readonly runs: number; readonly heapMiB: number }[];
}

function collectedHeapMiB(gc: () => void): number {
  // Several passes: a collection can free what finalizers of the previous one released.
  for (let i = 0; i < 4; i++) gc();
  return Number((process.memoryUsage().heapUsed / 2 ** 20).toFixed(2));
}

/** `rounds` are run counts, each submitted as matrices of up to 1000 cells. */
export async function measureRetention(redisUrl: string, cli: string, rounds: readonly number[]): Promise<Retention> {
  const gc = globalThis.gc;
  if (gc === undefined) throw new Error('the retention measurement needs node --expose-gc (npm run bench:dispatch passes it)');
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'fsbench-retention-'));
  const prefix = 'bench-retention';
  const coordinator = await startCoordinator(
    { redisUrl, queuePrefix: prefix, port: 0, host: '127.0.0.1', token: undefined, readAuth: 'open', dataDir,
      maxAttempts: 3, maxBody: 16 * 2 ** 20, maxRuns: 100_000, maxDuration: 86_400_000, maxQueued: 200_000, hostTimeout: 600_000 },
    () => undefined,
  );
  const env = { ...process.env, REDIS_URL: redisUrl, FSBENCH_QUEUE_PREFIX: prefix, FSBENCH_SCRATCH: path.join(dataDir, 'scratch'), FSBENCH_JOB_KEY: coordinator.jobKey.pem };
  const client = new CoordinatorClient(coordinator.url);
  // Enrolled with one-time tokens, as any agent (one key and state directory each).
  const { tokens } = z.object({ tokens: z.array(z.string()) }).loose().parse(await client.json('POST', '/v1/agents/tokens', { count: 2 }));
  const agents = [0, 1].map((i) =>
    spawn(process.execPath, [cli, 'agent'], {
      env: { ...env, FSBENCH_MACHINE: `agent${i}`, FSBENCH_STATE_DIR: path.join(dataDir, 'state', String(i)), FSBENCH_ENROLL_TOKEN: tokens[i] ?? '' },
      stdio: 'ignore',
    }),
  );
  const heapAfterGcMiB: Retention['heapAfterGcMiB'][number][] = [];
  try {
    let runs = 0;
    for (const [r, count] of rounds.entries()) {
      const ids: string[] = [];
      for (let i = 0; i < count; i += 1000) {
        const values = Array.from({ length: Math.min(1000, count - i) }, (_, k) => i + k);
        const matrix = { name: `retention-${r}-${i / 1000}`, workload: 'noop', repetitions: 1, warmup: 0, params: { value: values } };
        ids.push(Created.parse(await client.json('POST', '/v1/matrices', matrix)).id);
      }
      for (;;) {
        const list = List.parse(await client.json('GET', '/v1/matrices?limit=1000')).matrices.filter((m) => ids.includes(m.id));
        if (list.length === ids.length && list.every((m) => m.state === 'done')) break;
        await sleep(200);
      }
      runs += count;
      heapAfterGcMiB.push({ runs, heapMiB: collectedHeapMiB(() => { gc(); }) });
    }
  } finally {
    for (const a of agents) a.kill('SIGTERM');
    await Promise.all(
      agents.map(async (a) => {
        if (a.exitCode === null) await once(a, 'exit');
      }),
    );
    await coordinator.stop();
    await rm(dataDir, { recursive: true, force: true });
  }
  return {
    setup: `a coordinator in the benchmark process and 2 agent processes; rounds of ${rounds.join(', ')} no-op runs; heap in use after full collections (node --expose-gc) once each round is stored`,
    heapAfterGcMiB,
  };
}
