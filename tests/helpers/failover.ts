/**
 * What the failover tests under Sentinel and Cluster (tests/redis-sentinel.test.ts,
 * tests/redis-cluster.test.ts) do alike: submit no-op matrices and sample their progress, check
 * that every run was stored exactly once, cut a replica off its primary, and the middle of a
 * failover that loses acknowledged writes (throughLossyFailover).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { expect } from 'vitest';
import { z } from 'zod';
import type { CoordinatorClient } from '../../cli/client.js';

const MatrixView = z.looseObject({ state: z.string(), progress: z.looseObject({ stored: z.number(), expected: z.number() }) });
type MatrixView = z.infer<typeof MatrixView>;
const Results = z.looseObject({
  runs: z.array(z.looseObject({ cellId: z.string(), repetition: z.number(), machine: z.string(), state: z.string(), attempts: z.number() })),
});
export type Results = z.infer<typeof Results>;
const Submitted = z.looseObject({ id: z.string() });

/** Submits a matrix; its id. */
export async function submit(client: CoordinatorClient, matrix: Record<string, unknown>): Promise<string> {
  return Submitted.parse(await client.json('POST', '/v1/matrices', matrix)).id;
}

/** A matrix's view, or null while the coordinator does not answer (its connection following a failover). */
async function view(client: CoordinatorClient, id: string): Promise<MatrixView | null> {
  const m = MatrixView.safeParse(await client.json('GET', `/v1/matrices/${id}`).catch(() => null));
  return m.success ? m.data : null;
}

/**
 * (time, stored) every 50 ms from now until the matrix is done or `ms` pass: the recovery
 * figures are read off it. `state()` is the last state seen; `done` settles when sampling ends.
 */
export function sampleProgress(client: CoordinatorClient, id: string, ms: number): { samples: { t: number; stored: number }[]; state: () => string; done: Promise<void> } {
  const samples: { t: number; stored: number }[] = [];
  let state = '';
  const done = (async () => {
    for (const end = Date.now() + ms; state !== 'done' && Date.now() < end; ) {
      const m = await view(client, id);
      if (m) {
        samples.push({ t: Date.now(), stored: m.progress.stored });
        state = m.state;
      }
      await sleep(50);
    }
  })();
  return { samples, state: () => state, done };
}

/** Checks that each of the `expected` runs was stored once, all ok; the results and counts for the figures. */
export async function expectStoredOnce(client: CoordinatorClient, id: string, expected: number): Promise<{ results: Results; stored: number; duplicates: number }> {
  const results = Results.parse(await client.json('GET', `/v1/matrices/${id}/results`));
  const counts = new Map<string, number>();
  for (const r of results.runs) {
    const k = `${r.cellId}#${r.repetition}#${r.machine}`;
    counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  const duplicates = [...counts.values()].filter((n) => n > 1).length;
  expect(duplicates).toBe(0);
  expect(counts.size).toBe(expected);
  expect(results.runs.every((r) => r.state === 'ok')).toBe(true);
  expect(MatrixView.parse(await client.json('GET', `/v1/matrices/${id}`)).progress).toMatchObject({ stored: expected, expected });
  return { results, stored: counts.size, duplicates };
}

/**
 * Cuts the replica at `replicaUrl` off its primary: `settings` (CONFIG SET on the replica) keep
 * it from logging in again, the primary drops its replica connections, and this waits until
 * the replica says its link is down. The primary goes on acknowledging writes that exist
 * nowhere else. Returns the connection to the replica, for the caller to close.
 */
export async function cutReplication(replicaUrl: string, primaryUrl: string, settings: readonly (readonly [string, string])[]): Promise<Redis> {
  const onReplica = new Redis(replicaUrl, { maxRetriesPerRequest: 1 });
  const onPrimary = new Redis(primaryUrl, { maxRetriesPerRequest: 1 });
  try {
    for (const [name, value] of settings) await onReplica.config('SET', name, value);
    await onPrimary.client('KILL', 'TYPE', 'replica');
    for (const end = Date.now() + 10_000; !/^master_link_status:down/m.test(await onReplica.info('replication')); ) {
      if (Date.now() > end) throw new Error('the replica still follows the primary');
      await sleep(50);
    }
    return onReplica;
  } catch (err) {
    onReplica.disconnect();
    throw err;
  } finally {
    onPrimary.disconnect();
  }
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
  const id = await submit(client, {
    name: o.name,
    workload: 'noop',
    repetitions: 1,
    warmup: 0,
    params: { value: Array.from({ length: CELLS }, (_, i) => i), sleep: '100ms' },
  });
  for (const end = Date.now() + 30_000; ((await view(client, id))?.progress.stored ?? 0) < 5; ) {
    if (Date.now() > end) throw new Error('no run stored');
    await sleep(20);
  }
  const storedAtKill = (await view(client, id))?.progress.stored;
  const killedAt = Date.now();
  o.kill();
  await o.promoted();
  const promotedAt = Date.now();
  let m = await view(client, id);
  for (const end = Date.now() + 90_000; m?.state !== 'done'; m = await view(client, id)) {
    if (Date.now() > end) throw new Error(`the matrix did not finish after the failover lost its jobs: ${JSON.stringify(m)}\n${o.output().slice(-3000)}`);
    await sleep(50);
  }
  const doneAt = Date.now();
  const results = Results.parse(await client.json('GET', `/v1/matrices/${id}/results`));
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
