/**
 * `fsbench list`, `status` and `cancel` as a user runs them: the compiled CLI against a real
 * coordinator and agent (in the test process) and a real redis-server. One matrix fails in its
 * workload (done, with error codes); another is held mid-way by a 60 s run, so its progress is
 * part-way when it is listed, shown and cancelled.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ERRORS } from '../contract/errors.js';
import { freePort } from './fixtures/redis-server.js';
import { useCluster } from './helpers/cluster.js';
import { submitMatrix, until } from './helpers/http.js';
import { freshCli, runCli } from './helpers/local.js';

const cluster = useCluster('operate');

beforeAll(async () => {
  await freshCli();
}, 180_000);

const Summary = z.object({
  id: z.string(),
  name: z.string(),
  state: z.enum(['queued', 'running', 'done', 'cancelled']),
  progress: z.object({ expected: z.number(), stored: z.number(), ok: z.number(), failed: z.number(), skipped: z.number() }),
});
const Listing = z.object({ matrices: z.array(Summary) });
const Detail = Summary.extend({
  failures: z.array(z.object({ cellId: z.string(), repetition: z.number(), machine: z.string(), code: z.string().nullable() })),
  machines: z.array(z.object({ machine: z.string(), stored: z.number() })),
});
const Cancelled = Summary.extend({ removedRuns: z.number() });

/** A matrix whose every run fails in the workload: a target directory that does not exist. */
const failing = { name: 'op-fails', workload: 'metadata', repetitions: 2, warmup: 0, params: { fs: 'none', target: '/nonexistent-fsbench/x', dirs: 1, filesPerDir: 1 } };
/** Two quick runs, then two of 60 s: one agent stores the first two and holds the matrix at 2 of 4. */
const held = { name: 'op-held', workload: 'noop', repetitions: 2, warmup: 0, order: 'sequential', params: { sleep: ['0ms', '60s'] } };

async function cli(url: string, ...args: string[]) {
  return runCli([...args, '--url', url]);
}

async function detail(url: string, id: string) {
  const r = await cli(url, 'status', id, '--json');
  expect(r.code, r.stderr).toBe(0);
  return Detail.parse(JSON.parse(r.stdout));
}

/** The table row that starts with `id`, split on its column gaps. */
function rowOf(table: string, id: string): string[] {
  const line = table.split('\n').find((l) => l.startsWith(`${id} `));
  if (line === undefined) throw new Error(`no row for ${id} in:\n${table}`);
  return line.split(/ {2,}/);
}

describe('fsbench list, status and cancel', () => {
  it('list and status show progress and failures, cancel cancels, and a second cancel conflicts', async () => {
    const c = await cluster.coordinator();
    await cluster.agent(c.prefix, 'h-operate', 'op-machine');

    const failed = await submitMatrix(c.url, failing);
    const done = await until('the failing matrix to finish', async () => {
      const d = await detail(c.url, failed);
      return d.state === 'done' ? d : undefined;
    });
    expect(done.progress).toMatchObject({ stored: 2, failed: 2 });
    const codes = done.failures.map((f) => f.code);
    expect(codes).toHaveLength(2);

    const id = await submitMatrix(c.url, held);
    await until('two runs of the held matrix', async () => {
      const d = await detail(c.url, id);
      return d.state === 'running' && d.progress.stored === 2 ? d : undefined;
    }, { ms: 30_000, everyMs: 200 });

    // The list: newest first, each with its state, stored/expected runs and failed runs.
    const list = await cli(c.url, 'list');
    expect(list.code, list.stderr).toBe(0);
    const lines = list.stdout.trimEnd().split('\n');
    expect(lines[0]?.split(/ {2,}/)).toEqual(['ID', 'NAME', 'WORKLOAD', 'STATE', 'RUNS', 'FAILED', 'SUBMITTED']);
    expect(lines[1]?.startsWith(`${id} `)).toBe(true);
    expect(rowOf(list.stdout, id)).toEqual([id, 'op-held', 'noop', 'running', '2/4 (50%)', '0', expect.stringMatching(/ ago$/) as string]);
    expect(rowOf(list.stdout, failed)).toEqual([failed, 'op-fails', 'metadata', 'done', '2/2 (100%)', '2', expect.stringMatching(/ ago$/) as string]);

    const onlyDone = await cli(c.url, 'list', '--state', 'done', '--limit', '1');
    expect(onlyDone.code, onlyDone.stderr).toBe(0);
    expect(onlyDone.stdout).toContain(failed);
    expect(onlyDone.stdout).not.toContain(id);
    // As many rows as asked for: there may be more, and the CLI says so.
    expect(onlyDone.stderr).toMatch(/the newest 1 only/);

    const listed = Listing.parse(JSON.parse((await cli(c.url, 'list', '--json')).stdout));
    expect(listed.matrices.map((m) => [m.id, m.state, m.progress.stored, m.progress.expected])).toEqual([
      [id, 'running', 2, 4],
      [failed, 'done', 2, 2],
    ]);

    // Status: the matrix, its progress, per machine, and the failed runs with their codes.
    const running = await cli(c.url, 'status', id);
    expect(running.code, running.stderr).toBe(0);
    expect(running.stdout).toMatch(new RegExp(`^matrix +${id} +op-held \\(noop\\)$`, 'm'));
    expect(running.stdout).toMatch(/^state +running$/m);
    expect(running.stdout).toMatch(/^progress +2\/4 runs stored \(50%\): 2 ok, 0 failed, 0 skipped$/m);
    expect(running.stdout).toMatch(/^time +running for .*; estimated 2 min of runs in all$/m);
    expect(running.stdout).toMatch(/^op-machine +any +2 +2 +0 +0$/m);

    const failedStatus = await cli(c.url, 'status', failed);
    expect(failedStatus.code, failedStatus.stderr).toBe(0);
    expect(failedStatus.stdout).toMatch(/^state +done$/m);
    expect(failedStatus.stdout).toMatch(/^CELL +REP +MACHINE +CODE +MESSAGE$/m);
    for (const f of done.failures) expect(failedStatus.stdout).toMatch(new RegExp(`^${f.cellId} +${f.repetition} +op-machine +${f.code ?? '-'} +\\S`, 'm'));

    // Cancel: the queued run is removed, the two stored are kept, and list and status say so.
    const cancel = await cli(c.url, 'cancel', id);
    expect(cancel.code, cancel.stderr).toBe(0);
    expect(cancel.stdout).toMatch(new RegExp(`^cancelled ${id} \\(op-held\\): 1 queued run removed, 2 of 4 runs stored and kept$`, 'm'));
    expect(rowOf((await cli(c.url, 'list')).stdout, id)[3]).toBe('cancelled');
    expect((await cli(c.url, 'status', id)).stdout).toMatch(/^state +cancelled$/m);

    // Cancelling what is finished is a conflict, whether it was cancelled or done.
    for (const finished of [id, failed]) {
      const again = await cli(c.url, 'cancel', finished);
      expect(again.code, again.stderr).toBe(ERRORS.CONFLICT.exit);
      expect(again.code).toBe(2);
      expect(again.stderr).toMatch(new RegExp(`^fsbench: cancelling matrix ${finished}: matrix ${finished} is already (cancelled|done) \\[CONFLICT\\]$`, 'm'));
    }
  });

  it('cancel --json prints the answer, and status and list print theirs', async () => {
    const c = await cluster.coordinator();
    // No agent: the matrix stays queued, with nothing stored.
    const id = await submitMatrix(c.url, { name: 'op-queued', workload: 'noop', repetitions: 3, warmup: 0, params: { value: [1, 2] } });
    expect(await detail(c.url, id)).toMatchObject({ state: 'queued', progress: { stored: 0, expected: 6 }, machines: [], failures: [] });
    const human = await cli(c.url, 'status', id);
    expect(human.stdout).toMatch(/^time +not started, queued for .*; estimated 0 ms of runs in all$/m);
    expect(human.stdout).toMatch(/^started +-$/m);
    const r = await cli(c.url, 'cancel', id, '--json');
    expect(r.code, r.stderr).toBe(0);
    expect(Cancelled.parse(JSON.parse(r.stdout))).toMatchObject({ id, state: 'cancelled', removedRuns: 6, progress: { stored: 0 } });
    expect(await detail(c.url, id)).toMatchObject({ state: 'cancelled' });
    // Under `repetitions: auto`, how many cells reached the precision asked for.
    const auto = await submitMatrix(c.url, { name: 'op-auto', workload: 'noop', repetitions: 'auto', warmup: 0, params: { value: [1, 2] } });
    const autoStatus = await cli(c.url, 'status', auto);
    expect(autoStatus.code, autoStatus.stderr).toBe(0);
    expect(autoStatus.stdout).toMatch(/^cells +2 cells × repetitions auto, 0 warmup runs per cell and host$/m);
    expect(autoStatus.stdout).toMatch(/^precision +value's median within ±\d+(\.\d)?%: 0 cells reached it, \d+ measuring, 0 at the maximum of \d+ runs, 0 stopped$/m);
    expect((await cli(c.url, 'cancel', auto)).code).toBe(0);
    const empty = await cli(c.url, 'list', '--state', 'running');
    expect(empty).toMatchObject({ code: 0, stdout: '' });
    expect(empty.stderr).toMatch(/no running matrix/);
  });

  it('an unknown id exits 5, an unreachable coordinator 75, a bad --limit 2', async () => {
    const c = await cluster.coordinator();
    for (const command of ['status', 'cancel']) {
      const r = await cli(c.url, command, 'no-such-matrix');
      expect(r.code, r.stderr).toBe(ERRORS.NOT_FOUND.exit);
      expect(r.code).toBe(5);
      expect(r.stderr).toMatch(/no matrix no-such-matrix \[NOT_FOUND\]/);
    }
    const nobody = `http://127.0.0.1:${await freePort()}`;
    for (const args of [['list'], ['status', 'x'], ['cancel', 'x']]) {
      const r = await cli(nobody, ...args);
      expect(r.code, r.stderr).toBe(ERRORS.UNAVAILABLE.exit);
      expect(r.code).toBe(75);
      expect(r.stderr).toMatch(/cannot reach the coordinator .*\[UNAVAILABLE\]/);
    }
    const bad = await cli(c.url, 'list', '--limit', '5000');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--limit 5000 must be a whole number from 1 to 1000 \[CONFIG_INVALID\]/);
  });
});
