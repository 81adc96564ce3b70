/**
 * A host protects itself from cells that would take more than it has, on the real kernel: each
 * refusal is a `failed` run with its code, made before anything of the run exists (no mount, no
 * directory, no journal entry, no changed limit), through the same `runCell` agents use and
 * through `fsbench run`.
 */
import { execFileSync } from 'node:child_process';
import { statfsSync } from 'node:fs';
import { mkdir, readdir, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Cell } from '../contract/matrix.js';
import type { RunResult } from '../contract/result.js';
import { collectFingerprint } from '../host/fingerprint.js';
import { Journal } from '../host/journal.js';
import { checkHostBudget, checkNeeds, DEFAULT_BUDGET, type HostBudget } from '../runner/host-budget.js';
import { runCell } from '../runner/run-cell.js';
import { cellOf, memAvailable, mountsUnder, runCli, sysctl, tempDir } from './helpers/local.js';

let scratch: { dir: string; remove: () => void };
beforeEach(() => {
  scratch = tempDir('fsbench-budget-');
});
afterEach(() => {
  scratch.remove();
});

async function run(cell: Cell, budget: HostBudget = DEFAULT_BUDGET): Promise<RunResult> {
  const journal = await Journal.open(path.join(scratch.dir, 'journal'));
  const fingerprint = await collectFingerprint();
  return runCell({ matrix: 't', cell, repetition: 0, fingerprint }, { scratchDir: scratch.dir, journal, signal: new AbortController().signal, log: () => undefined, budget });
}

function refusal(r: RunResult): { code: string; message: string } {
  if (r.state !== 'failed') throw new Error(`expected a failed run, got ${r.state}`);
  return r.error;
}

/** Nothing of a run exists: no run directory or image, no mount, no journal entry. */
async function expectNothingLeft(): Promise<void> {
  expect((await readdir(scratch.dir)).filter((n) => n.startsWith('fsbench-'))).toEqual([]);
  expect(mountsUnder(scratch.dir)).toEqual([]);
  expect((await readdir(path.join(scratch.dir, 'journal'))).filter((n) => n.endsWith('.json'))).toEqual([]);
}

/**
 * Sized from this machine, never from the one the test was written on. An inotify tmpfs holds
 * twice each file's write (at least a page) for its files and one latency marker per writer (8 by
 * default): 65544 files x 2 x writeBytes. `over` takes more than all of this machine's memory
 * (MemTotal, os.totalmem(): more than MemAvailable or any cgroup's headroom can be), in whole KiB;
 * null above what the largest cell can ask for (65536 files of 1 MiB, 128 GiB), where the test is
 * a counted skip. The test's second cell takes a quarter of MemAvailable, far inside what the
 * budget leaves (MemAvailable less a tenth of MemTotal).
 */
const TMPFS_FILES = 65_544;
const overKiB = Math.max(4, Math.floor(os.totalmem() / (TMPFS_FILES * 2 * 1024)) + 1);
const TMPFS_OVER = overKiB <= 1024 ? { files: 65_536, writeBytes: `${String(overKiB)}KiB`, needs: TMPFS_FILES * 2 * overKiB * 1024 } : null;

/** The GiB a HOST_TOO_SMALL message says the run needs. */
const neededGiB = (message: string) => Number(/ needs (\d+\.\d) GiB, /.exec(message)?.[1] ?? NaN);

describe('memory', () => {
  it.runIf(TMPFS_OVER !== null)("refuses with HOST_TOO_SMALL a tmpfs larger than this machine's memory, and lets one of a quarter of MemAvailable through", async () => {
    const over = TMPFS_OVER ?? { files: 0, writeBytes: '', needs: 0 };
    expect(over.needs).toBeGreaterThan(os.totalmem());
    const queued = sysctl('max_queued_events');
    const r = refusal(await run(cellOf('inotify', { files: over.files, writeBytes: over.writeBytes, target: 'tmpfs', maxQueuedEvents: 4321, duration: '100ms' })));
    expect(r.code).toBe('HOST_TOO_SMALL');
    expect(r.message).toMatch(new RegExp(`^a tmpfs for ${String(TMPFS_FILES)} files of ${over.writeBytes} writes needs [\\d.]+ GiB, but this host has .* to spare \\((MemAvailable |the memory limit of cgroup )`));
    expect(neededGiB(r.message)).toBeCloseTo(over.needs / 1024 ** 3, 1);
    expect(r.message).toMatch(/lower files or writeBytes/);
    expect(sysctl('max_queued_events')).toBe(queued);
    await expectNothingLeft();
    // The same check on a tmpfs that fits: the refusal above was the size, not something else.
    const files = Math.max(1, Math.min(65_536, Math.floor(memAvailable() / 4 / (2 * 1024 ** 2)) - 8));
    await expect(checkHostBudget(cellOf('inotify', { files, writeBytes: '1MiB', target: 'tmpfs', duration: '100ms' }), scratch.dir)).resolves.toBeUndefined();
  });
});

describe('scratch space', () => {
  it('refuses with HOST_TOO_SMALL a filesystem image whose files outgrow the free space of the scratch filesystem', async () => {
    const cell = cellOf('metadata', { fs: 'xfs', fsSize: '16777215MiB', dirs: 1000, filesPerDir: 1000, fileSize: '1MiB' });
    const r = refusal(await run(cell));
    expect(r.code).toBe('HOST_TOO_SMALL');
    expect(r.message).toMatch(/^the sparse xfs image \(fsSize 16777215MiB; mkfs's metadata and 1000 x 1000 files of 1MiB\) needs 985\.1 GiB, but the scratch directory .* has .* free/);
    await expectNothingLeft();
  });

  it('lets a sparse image far larger than the free space through when what is written fits', async () => {
    // 16 TiB of image against some tens of GiB free: the image costs what mkfs and the files write.
    const cell = cellOf('metadata', { fs: 'xfs', fsSize: '16777215MiB', dirs: 2, filesPerDir: 2, fileSize: 0, cache: 'warm' });
    const free = statfsSync(scratch.dir);
    expect(16777215 * 2 ** 20).toBeGreaterThan(free.bavail * free.bsize);
    const r = await run(cell);
    // It ran, to the end: any failure (not only HOST_TOO_SMALL) would be the budget or the image getting in the way.
    if (r.state !== 'ok') throw new Error(`expected the run to be ok, got ${r.state}: ${r.state === 'failed' ? `${r.error.code} ${r.error.message}` : r.reason}`);
    expect(r.metrics['filesCreated']).toBe(4);
    expect(r.metrics['filesRemoved']).toBe(4);
    await expectNothingLeft();
  });
});

describe('kernel limits', () => {
  it('refuses with LIMIT_NOT_ALLOWED a maxQueuedEvents of 2^31-1 on the host-wide sysctl, which keeps its value', async () => {
    const queued = sysctl('max_queued_events');
    const r = refusal(await run(cellOf('inotify', { maxQueuedEvents: 2 ** 31 - 1, duration: '100ms' })));
    expect(r).toEqual({
      code: 'LIMIT_NOT_ALLOWED',
      message:
        'maxQueuedEvents 2147483647 is above the 1048576 this host allows on its host-wide fs.inotify.max_queued_events ' +
        '(FSBENCH_MAX_QUEUED_EVENTS): ask for less, or raise the cap on the host',
    });
    expect(sysctl('max_queued_events')).toBe(queued);
    await expectNothingLeft();
  });

  it('refuses with LIMIT_NOT_ALLOWED more watches than the cap, and lets watch: dir through', async () => {
    const budget = { ...DEFAULT_BUDGET, maxWatches: 100 };
    const r = refusal(await run(cellOf('inotify', { files: 128, writers: 2, duration: '100ms' }), budget));
    expect(r.code).toBe('LIMIT_NOT_ALLOWED');
    expect(r.message).toMatch(/^the run needs 130 inotify watches \(files \+ latency markers\), above the 100 this host allows \(FSBENCH_MAX_WATCHES\)/);
    await expectNothingLeft();
    const dir = await run(cellOf('inotify', { files: 128, writers: 2, watch: 'dir', duration: '100ms' }), budget);
    expect(dir.state).toBe('ok');
  });
});

describe('target directories', () => {
  it('refuses with TARGET_NOT_ALLOWED a target outside the scratch directory, also one reached through a symlink', async () => {
    const outside = tempDir('fsbench-budget-outside-');
    try {
      const direct = refusal(await run(cellOf('inotify', { target: outside.dir, duration: '100ms' })));
      expect(direct.code).toBe('TARGET_NOT_ALLOWED');
      expect(direct.message).toBe(
        `target ${outside.dir} is outside the directories this host allows runs in (${scratch.dir}): ` +
          'use a directory under one of them, or add its root to FSBENCH_ALLOWED_TARGETS on the host',
      );
      await symlink(outside.dir, path.join(scratch.dir, 'link'));
      const linked = refusal(await run(cellOf('metadata', { fs: 'none', target: path.join(scratch.dir, 'link'), dirs: 1, filesPerDir: 1 })));
      expect(linked.code).toBe('TARGET_NOT_ALLOWED');
      expect(linked.message).toContain(`(${outside.dir}) is outside`);
      expect(await readdir(outside.dir)).toEqual([]);
    } finally {
      outside.remove();
    }
  });

  it('runs in a target under an allowed root (FSBENCH_ALLOWED_TARGETS) and under the scratch directory', async () => {
    const allowed = tempDir('fsbench-budget-allowed-');
    try {
      const inAllowed = path.join(allowed.dir, 'data');
      await mkdir(inAllowed);
      const journal = await Journal.open(path.join(scratch.dir, 'journal'), { scratch: scratch.dir, targets: [allowed.dir] });
      const fingerprint = await collectFingerprint();
      const cell = cellOf('metadata', { fs: 'none', target: inAllowed, dirs: 2, filesPerDir: 2, cache: 'warm' });
      const r = await runCell(
        { matrix: 't', cell, repetition: 0, fingerprint },
        { scratchDir: scratch.dir, journal, signal: new AbortController().signal, log: () => undefined, budget: { ...DEFAULT_BUDGET, allowedTargets: [allowed.dir] } },
      );
      expect(r.state).toBe('ok');
      expect(await readdir(inAllowed)).toEqual([]);
      const underScratch = path.join(scratch.dir, 'data');
      await mkdir(underScratch);
      expect((await run(cellOf('metadata', { fs: 'none', target: underScratch, dirs: 2, filesPerDir: 2, cache: 'warm' }))).state).toBe('ok');
    } finally {
      allowed.remove();
    }
  });
});

describe('host needs as a workload states them', () => {
  it('counts inodes on a filesystem that has a fixed number, and checks a named directory against the allowed roots', async () => {
    const small = path.join(scratch.dir, 'small');
    await mkdir(small);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m,nr_inodes=64', 'fsbench-test', small]);
    try {
      const tree = (inodes: number) => [{ kind: 'space', dir: small, bytes: 0, inodes, what: `a tree of ${inodes} entries`, fix: 'lower dirs' }] as const;
      await expect(checkNeeds(tree(1000), scratch.dir)).rejects.toMatchObject({
        code: 'HOST_TOO_SMALL',
        message: expect.stringMatching(new RegExp(`^a tree of 1000 entries needs 1000 inodes, but ${small} has \\d+ free: lower dirs$`)) as unknown,
      });
      await expect(checkNeeds(tree(10), scratch.dir)).resolves.toBeUndefined();
      // The scratch directory's own filesystem, named as such.
      await expect(checkNeeds([{ kind: 'space', bytes: 2 ** 60, what: 'an exabyte', fix: 'ask for less' }], scratch.dir)).rejects.toMatchObject({
        message: expect.stringMatching(new RegExp(`^an exabyte needs .* but the scratch directory ${scratch.dir} has .* free: ask for less$`)) as unknown,
      });
    } finally {
      execFileSync('umount', [small]);
    }
    const outside = tempDir('fsbench-budget-outside-');
    try {
      await expect(checkNeeds([{ kind: 'directory', path: outside.dir }], scratch.dir)).rejects.toMatchObject({ code: 'TARGET_NOT_ALLOWED' });
      await expect(checkNeeds([{ kind: 'directory', path: outside.dir }], scratch.dir, { ...DEFAULT_BUDGET, allowedTargets: [outside.dir] })).resolves.toBeUndefined();
    } finally {
      outside.remove();
    }
  });

  it('checks the target directory of an inotify cell in a sandbox tmpfs', async () => {
    const outside = tempDir('fsbench-budget-outside-');
    try {
      const r = refusal(await run(cellOf('inotify', { target: outside.dir, 'container.storage': 'tmpfs', duration: '100ms' })));
      expect(r.code).toBe('TARGET_NOT_ALLOWED');
      await expectNothingLeft();
    } finally {
      outside.remove();
    }
  });

  it.runIf(TMPFS_OVER !== null)("holds an inotify cell in a sandbox tmpfs against this machine's memory", async () => {
    const over = TMPFS_OVER ?? { files: 0, writeBytes: '' };
    const big = refusal(await run(cellOf('inotify', { target: scratch.dir, 'container.storage': 'tmpfs', files: over.files, writeBytes: over.writeBytes, duration: '100ms' })));
    expect(big.code).toBe('HOST_TOO_SMALL');
    expect(big.message).toMatch(new RegExp(`^a tmpfs for ${String(TMPFS_FILES)} files of ${over.writeBytes} writes needs`));
    await expectNothingLeft();
  });
});

describe('fsbench run', () => {
  it('stores a refused cell as failed with its code and goes on with the next', async () => {
    const file = path.join(scratch.dir, 'm.yaml');
    await writeFile(
      file,
      'name: budget\nworkload: inotify\nwarmup: 0\nrepetitions: 1\nparams:\n  maxQueuedEvents: [2000000, 20000]\n  duration: 100ms\n  files: 8\n  writers: 1\n',
    );
    const r = await runCli(['run', file, '--scratch', path.join(scratch.dir, 's'), '--format', 'json', '--no-progress'], { FSBENCH_MAX_QUEUED_EVENTS: '1000000' });
    // Some runs failed: the summary is written, and the exit code says so.
    expect(r.code).toBe(8);
    expect(r.stderr).toMatch(/^fsbench: 1 of 2 runs failed \(LIMIT_NOT_ALLOWED 1\); the other runs are kept; --allow-failures accepts failed runs \[RUNS_FAILED\]$/m);
    const report = z.object({ cells: z.array(z.object({ ok: z.number(), problem: z.string().nullish() }).loose()) }).parse(JSON.parse(r.stdout));
    expect(report.cells).toHaveLength(2);
    expect(report.cells[0]?.ok).toBe(0);
    expect(report.cells[0]?.problem).toMatch(/^LIMIT_NOT_ALLOWED: maxQueuedEvents 2000000 is above the 1000000 this host allows/);
    expect(report.cells[1]?.ok).toBe(1);
  });
});
