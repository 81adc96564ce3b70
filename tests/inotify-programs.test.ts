/**
 * The throughput workload's program backends (inotifywait, watchman) beside the raw reader under
 * one small storm: each cell measured, never more events than writes, watchman's per-batch
 * coalescing, the report comparing each program with the raw reader's cell, a missing program
 * named by its Debian package, and no program left running afterwards.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import type { RunResult } from '../contract/result.js';
import { buildReport } from '../report/build.js';
import { startProgramWatcher } from '../workloads/inotify/programs.js';
import { cellOf, runOnce, tempDir } from './helpers/local.js';

const scratch = tempDir('fsbench-inotify-programs-');
afterAll(() => {
  scratch.remove();
});

function ok(run: RunResult) {
  if (run.state !== 'ok') throw new Error(`run ${run.state}: ${run.state === 'failed' ? run.error.message : run.reason}`);
  return run;
}

/** inotifywait and watchman processes this process started (its children) that are still there. */
function programsLeft(): string[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .flatMap((pid) => {
      try {
        const parent = /^PPid:\s+(\d+)$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
        const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
        return Number(parent) === process.pid && /inotifywait|watchman/.test(cmd) ? [`${pid}: ${cmd}`] : [];
      } catch {
        return [];
      }
    });
}

describe('inotifywait and watchman beside the raw reader', () => {
  it('measure what each program delivered of the same storm, compared with the raw reader in the report', async () => {
    const storm = { watch: 'dir', writers: 2, files: 16, duration: '300ms' };
    const runs: RunResult[] = [];
    for (const backend of ['inotify', 'inotifywait', 'watchman']) runs.push(ok(await runOnce(cellOf('inotify', { ...storm, backend }), scratch.dir)));
    const [raw, inotifywait, watchman] = runs.map((r) => (r.state === 'ok' ? r.metrics : {}));
    if (!raw || !inotifywait || !watchman) throw new Error('three runs');
    for (const m of [inotifywait, watchman]) {
      expect(m['events']).toBeGreaterThan(0);
      expect(m['eventsPerSec']).toBeGreaterThan(0);
      // Each event a program printed is a kernel event, which is one write or more merged.
      expect(m['events']).toBeLessThanOrEqual(m['writes'] ?? 0);
      expect(m['readerCpuFraction']).toBeGreaterThanOrEqual(0);
    }
    // watchman lists each changed file once per settled batch: at most every file per result read.
    expect(watchman['events']).toBeLessThanOrEqual(16 * (watchman['reads'] ?? 0));
    // watchman says when it recrawled; inotifywait drops the kernel's overflow without a word.
    expect(watchman['overflows']).toEqual(expect.any(Number));
    expect(inotifywait['overflows']).toBeNull();

    const report = buildReport(runs, { title: 't' });
    const shares = report.cells.flatMap((c) => c.findings.filter((n) => n.figure?.name === 'eventsOfRaw').map((n) => [c.params['backend'], n.kind, n.figure?.value]));
    expect(shares).toEqual([
      ['inotifywait', 'silent-loss', (inotifywait['events'] ?? 0) / (raw['events'] ?? 1)],
      ['watchman', 'delivered', (watchman['events'] ?? 0) / (raw['events'] ?? 1)],
    ]);
    // Stopped and gone: no program the runs started is still there (watchman's server included).
    expect(programsLeft()).toEqual([]);
  }, 60_000);

  it.each([
    ['inotifywait', 'inotify-tools'],
    ['watchman', 'watchman'],
  ] as const)('a missing %s fails the start naming the Debian package %s', async (backend, pkg) => {
    const empty = tempDir('fsbench-no-programs-');
    try {
      const start = startProgramWatcher(backend, scratch.dir, 'dir', 1, new AbortController().signal, { path: empty.dir });
      const err: unknown = await start.then(() => null, (e: unknown) => e);
      expect(err).toMatchObject({ code: 'TARGET_UNUSABLE' });
      expect(String(err)).toContain(`install the Debian package ${pkg}`);
    } finally {
      empty.remove();
    }
  });
});
