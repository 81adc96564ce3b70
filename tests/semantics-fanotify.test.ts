/**
 * The semantics workload's `fanotify` backend for real: fsbench's fanotify reader (one filesystem
 * mark, FAN_REPORT_DFID_NAME_TARGET) on a private tmpfs, through the runner as a user's run goes;
 * its adapter alone on a tmpfs of the test's own, to see a rename as one event with both paths and
 * the rest of the filesystem left out, and a queue overflow passed on; a filesystem fanotify cannot
 * watch (skipped); and the reader
 * without CAP_SYS_ADMIN. Needs root.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { expandMatrix, parseMatrix, type Cell } from '../contract/matrix.js';
import type { RunResult } from '../contract/result.js';
import type { WatchEvent } from '../contract/workloads/semantics/events.js';
import { OPERATION_KINDS, perKindMetric } from '../contract/workloads/semantics/index.js';
import { filesystemType } from '../host/kernel.js';
import { nativeProgram } from '../host/native.js';
import { fanotifyAdapter } from '../workloads/semantics/fanotify.js';
import type { RunningWatcher } from '../workloads/semantics/watcher.js';
import { WorkloadSkipped } from '../workloads/workload.js';
import { mountsUnder, runOnce, tempDir, waitFor } from './helpers/local.js';

const files = tempDir('fsbench-semantics-fanotify-');
afterAll(() => {
  for (const m of mountsUnder(files.dir).map((l) => l.split(' ')[1] ?? '').reverse()) execFileSync('umount', ['-l', m]);
  files.remove();
});

function cellOf(params: Record<string, unknown>): Cell {
  const [cell] = expandMatrix(parseMatrix({ name: 't', workload: 'semantics', params }));
  if (!cell) throw new Error('no cell');
  return cell;
}

const FAN_QUEUE = '/proc/sys/fs/fanotify/max_queued_events';

/** The fanotify readers watching ROOT (their command line names it). */
function readerPids(root: string): number[] {
  return readdirSync('/proc')
    .filter((n) => /^\d+$/.test(n))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(root);
      } catch {
        return false;
      }
    })
    .map(Number);
}

function ok(r: RunResult): Extract<RunResult, { state: 'ok' }> {
  if (r.state !== 'ok') throw new Error(`run ${r.state}: ${r.state === 'failed' ? `${r.error.code} ${r.error.message}` : r.reason}`);
  return r;
}

describe('backend: fanotify, on tmpfs at a gentle pace', () => {
  const perKind = 5;
  // The kinds a filesystem mark must report whole; the others are measured, not asserted.
  const whole = ['create', 'modify', 'delete', 'rename-within', 'rename-across', 'mkdir-then-files'] as const;

  it('reports every create, modify, delete, rename and new directory\'s files, with no overflow, and leaves no mount behind', async () => {
    const scratch = path.join(files.dir, 'run');
    mkdirSync(scratch);
    const r = ok(await runOnce(cellOf({ backend: 'fanotify', perKind, pace: 100, settle: '1s', target: 'tmpfs', seed: 3 }), scratch));
    const m = r.metrics;
    expect(m['operations']).toBe(OPERATION_KINDS.length * perKind);
    for (const kind of whole) {
      expect(m[perKindMetric('recall', kind)], kind).toBe(1);
      expect(m[perKindMetric('wrong_kind', kind)], kind).toBe(0);
    }
    expect(m['overflows']).toBe(0);
    // A filesystem mark watches a new directory from the moment it exists: nothing to list, nothing deaf.
    expect(m['synthesized']).toBeNull();
    expect(m['deafAfter']).toBe(0);
    expect(r.fingerprint.targetFs).toBe('tmpfs');
    expect(mountsUnder(scratch)).toEqual([]);
  }, 120_000);
});

describe('the fanotify adapter on a tmpfs of the test\'s own', () => {
  it('reports a rename as one renamed event with both paths, and nothing from outside the watched tree', async () => {
    const mnt = path.join(files.dir, 'mnt');
    mkdirSync(mnt);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=16m', 'tmpfs', mnt]);
    try {
      const root = path.join(mnt, 'watched');
      const outside = path.join(mnt, 'outside');
      for (const d of [root, outside, path.join(root, 'a'), path.join(root, 'b')]) mkdirSync(d);
      closeSync(openSync(path.join(root, 'a', 'old'), 'wx'));
      const events: WatchEvent[] = [];
      const watcher = await fanotifyAdapter.start(root, (e) => events.push(e), new AbortController().signal);
      try {
        writeFileSync(path.join(outside, 'foreign'), 'not watched\n');
        renameSync(path.join(root, 'a', 'old'), path.join(root, 'a', 'new'));
        renameSync(path.join(root, 'a', 'new'), path.join(root, 'b', 'moved'));
        await waitFor(() => events.some((e) => e.path === path.join(root, 'b', 'moved')), 10_000, 'the rename across directories');
      } finally {
        await watcher.stop();
      }
      expect(events.map((e) => ({ kind: e.kind, path: e.path, from: e.from }))).toEqual([
        { kind: 'renamed', path: path.join(root, 'a', 'new'), from: path.join(root, 'a', 'old') },
        { kind: 'renamed', path: path.join(root, 'b', 'moved'), from: path.join(root, 'a', 'new') },
      ]);
    } finally {
      execFileSync('umount', [mnt]);
    }
  }, 60_000);

  it('passes the kernel\'s FAN_Q_OVERFLOW on as an overflow event at the root', async () => {
    const mnt = path.join(files.dir, 'overflow');
    mkdirSync(mnt);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=16m', 'tmpfs', mnt]);
    try {
      const root = path.join(mnt, 'watched');
      mkdirSync(root);
      const events: WatchEvent[] = [];
      // fanotify_init copies the queue limit into the group: a small one for this reader only, put back at once.
      const queued = readFileSync(FAN_QUEUE, 'utf8').trim();
      writeFileSync(FAN_QUEUE, '64');
      let watcher: RunningWatcher;
      try {
        watcher = await fanotifyAdapter.start(root, (e) => events.push(e), new AbortController().signal);
      } finally {
        writeFileSync(FAN_QUEUE, queued);
      }
      try {
        // The reader stopped while 300 files are made: its queue of 64 overflows.
        const [reader] = readerPids(root);
        if (reader === undefined) throw new Error(`no reader process names ${root}`);
        process.kill(reader, 'SIGSTOP');
        for (let i = 0; i < 300; i++) closeSync(openSync(path.join(root, `f${i}`), 'wx'));
        process.kill(reader, 'SIGCONT');
        await waitFor(() => events.some((e) => e.kind === 'overflow'), 10_000, 'the overflow event');
      } finally {
        await watcher.stop();
      }
      expect(events.filter((e) => e.kind === 'overflow').map((e) => e.path)).toEqual([root]);
      expect(events.filter((e) => e.kind === 'created').length).toBeLessThanOrEqual(64);
    } finally {
      execFileSync('umount', [mnt]);
    }
  }, 60_000);

  it('on a filesystem whose file handles fanotify cannot report, the run is skipped naming the filesystem', async () => {
    // sysfs encodes no file handles: the kernel refuses the mark with EOPNOTSUPP.
    const root = '/sys/kernel';
    const start = fanotifyAdapter.start(root, () => undefined, new AbortController().signal);
    await expect(start).rejects.toBeInstanceOf(WorkloadSkipped);
    await expect(start).rejects.toThrow(`fanotify cannot watch ${root} on this ${filesystemType(root) ?? 'unknown'} filesystem`);
  });

  // Since Linux 5.13 an unprivileged user may make a group reporting file handles: it is the filesystem mark that is refused.
  it('without CAP_SYS_ADMIN, the reader says PRIVILEGE_MISSING in its error line rather than crashing', () => {
    const dir = path.join(files.dir, 'unprivileged');
    mkdirSync(dir);
    const r = spawnSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', nativeProgram('semantics'), 'fanotify', '--root', dir], { encoding: 'utf8' });
    expect(r.status).toBe(3);
    const line: unknown = JSON.parse(r.stdout.trim());
    expect(line).toMatchObject({ error: { code: 'PRIVILEGE_MISSING', message: expect.stringMatching(/^fanotify_(init|mark)\(.*: Operation not permitted; .*CAP_SYS_ADMIN/) as unknown } });
  });
});
