/**
 * The middle of a failover that loses acknowledged writes, the same under Sentinel and Cluster
 * (tests/redis-sentinel.test.ts, tests/redis-cluster.test.ts): 30 no-op runs of 100 ms are
 * submitted, the primary is killed once 5 are stored, and the matrix must finish with every run
 * stored exactly once, the coordinator having queued again what the promoted replica lacked.
 * Prints one JSON line (`figure`) with the times and counts.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'vitest';
import type { CoordinatorClient } from '../../cli/client.js';

interface MatrixView {
  state: string;
  progress: { stored: number };
}
interface Results {
  runs: { cellId: string; repetition: number; machine: string; state: string }[];
}

const CELLS = 30;

export async function throughLossyFailover(o: {
  readonly client: CoordinatorClient;
  readonly name: string;
  /** The name of the printed figure. */
  readonly figure: string;
  /** The coordinator's output so far: where it says it queued runs again. */
  readonly output: () => string;
  /** SIGKILLs the primary. */
  readonly kill: () => void;
  /** Resolves once the replica serves in its place (and checks it is the expected one). */
  readonly promoted: () => Promise<void>;
}): Promise<void> {
  const { client } = o;
  const { id } = (await client.json('POST', '/v1/matrices', {
    name: o.name,
    workload: 'noop',
    repetitions: 1,
    warmup: 0,
    params: { value: Array.from({ length: CELLS }, (_, i) => i), sleep: '100ms' },
  })) as { id: string };
  // Answers may fail while the coordinator's connection follows the failover.
  const view = async () => (await client.json('GET', `/v1/matrices/${id}`).catch(() => null)) as MatrixView | null;
  for (const end = Date.now() + 30_000; ((await view())?.progress.stored ?? 0) < 5; ) {
    if (Date.now() > end) throw new Error('no run stored');
    await sleep(20);
  }
  const storedAtKill = (await view())?.progress.stored;
  const killedAt = Date.now();
  o.kill();
  await o.promoted();
  const promotedAt = Date.now();
  let m = await view();
  for (const end = Date.now() + 90_000; m?.state !== 'done'; m = await view()) {
    if (Date.now() > end) throw new Error(`the matrix did not finish after the failover lost its jobs: ${JSON.stringify(m)}\n${o.output().slice(-3000)}`);
    await sleep(50);
  }
  const doneAt = Date.now();
  const results = (await client.json('GET', `/v1/matrices/${id}/results`)) as Results;
  const keys = results.runs.map((r) => `${r.cellId}#${r.repetition}#${r.machine}`);
  expect(new Set(keys).size).toBe(keys.length);
  expect(keys).toHaveLength(CELLS);
  expect(results.runs.every((r) => r.state === 'ok')).toBe(true);
  const requeued = /queued again [^(]*\((\d+) jobs, existing ones kept\)/.exec(o.output());
  expect(requeued, o.output().slice(-3000)).not.toBeNull();
  console.log(
    JSON.stringify({
      figure: o.figure,
      runs: CELLS,
      storedAtKill,
      jobsQueuedAgain: Number(requeued?.[1]),
      killToPromotedMs: promotedAt - killedAt,
      killToDoneMs: doneAt - killedAt,
      duplicates: keys.length - new Set(keys).size,
      missing: CELLS - new Set(keys).size,
    }),
  );
}
