/**
 * The inotify workload's `backend: fanotify`, on this machine's kernel for real: the native probe
 * reads a fanotify group fed by the same writers as the inotify reader. Needs root (mounts, the
 * fanotify sysctl, mount and filesystem marks).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunResult } from '../contract/result.js';
import { collectFingerprint } from '../host/fingerprint.js';
import { Journal } from '../host/journal.js';
import { runCell } from '../runner/run-cell.js';
import { cellOf, exited, mountsUnder, runOnce, spawnCli, tempDir, waitFor } from './helpers/local.js';

const FAN_QUEUE = '/proc/sys/fs/fanotify/max_queued_events';
const fanQueue = () => readFileSync(FAN_QUEUE, 'utf8').trim();

const scratch = tempDir('fsbench-fanotify-');
let queued: string;

beforeAll(() => {
  queued = fanQueue();
});
afterAll(() => {
  // fanotify's queue sysctl is not put back here: tests/setup/host-limits.ts does, after this,
  // and fails the file when it had to (a run that did not restore it is a bug to see).
  for (const m of mountsUnder(scratch.dir).map((l) => l.split(' ')[1] ?? '').reverse()) execFileSync('umount', ['-l', m]);
  scratch.remove();
});

function ok(run: RunResult) {
  if (run.state !== 'ok') throw new Error(`run ${run.state}: ${run.state === 'failed' ? run.error.message : run.reason}`);
  return run;
}

/** A tmpfs of the test's own under the scratch directory (where `target` paths may lie). */
function mountTmpfs(name: string, size = '64m'): { dir: string; unmount: () => void } {
  const dir = path.join(scratch.dir, name);
  mkdirSync(dir, { recursive: true });
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, `fsbench-test-${name}`, dir]);
  return { dir, unmount: () => execFileSync('umount', [dir]) };
}

/** An overlayfs (as a container's root is) over a tmpfs, under the scratch directory. */
function mountOverlay(name: string): { dir: string; unmount: () => void } {
  const base = mountTmpfs(`${name}-layers`);
  for (const d of ['lower', 'upper', 'work']) mkdirSync(path.join(base.dir, d));
  const dir = path.join(scratch.dir, name);
  mkdirSync(dir, { recursive: true });
  const layers = `lowerdir=${base.dir}/lower,upperdir=${base.dir}/upper,workdir=${base.dir}/work`;
  execFileSync('mount', ['-t', 'overlay', '-o', layers, `fsbench-test-${name}`, dir]);
  return {
    dir,
    unmount: () => {
      execFileSync('umount', [dir]);
      base.unmount();
    },
  };
}

describe('backend: fanotify', () => {
  it('delivers one event per write while the reader keeps up, as inotify does', async () => {
    // fanotify merges a write into any identical event still queued (same file, same process),
    // not only into the last one as inotify does, so events == writes needs a merge to be
    // impossible: one writer going round-robin over 16384 files writes a file again only 16384
    // writes later, and with 64 KiB writes for 100 ms it makes fewer writes than that here (no
    // file is written twice). On a faster machine a merge would still need the reader (pinned to
    // its own CPU, with a queue that cannot overflow) to fall 16384 events behind. With 1-byte
    // writes for 300 ms this VM's reader was seen 11671 events behind under steal: too close.
    // More writers or fewer files make events < writes (next test).
    const params = { writers: 1, files: 16384, writeBytes: '64KiB', duration: '100ms', maxQueuedEvents: 1_048_576, pin: true, latencySampling: 0 };
    const fan = ok(await runOnce(cellOf('inotify', { ...params, backend: 'fanotify', mark: 'inode' }), scratch.dir)).metrics;
    expect(fan['writes']).toBeGreaterThan(500);
    expect(fan['overflows']).toBe(0);
    expect(fan['events']).toBe(fan['writes']);
    expect(fan['writesPerEvent']).toBe(1);
    expect(fan['foreignEvents']).toBe(0);
    expect(fan['maxQueueDepth']).toBeLessThan(16384);
    expect(fanQueue()).toBe(queued);
    // The same cell with inotify, for the comparison: same meaning, same checks.
    const ino = ok(await runOnce(cellOf('inotify', { ...params, backend: 'inotify' }), scratch.dir)).metrics;
    expect(ino['events']).toBe(ino['writes']);
    expect(ino['foreignEvents']).toBeNull();
    expect(ino['maxQueueDepth']).toBeNull();
  });

  it('merges every write to a queued file into one event, and FIONREAD sees the whole queue before a drain', async () => {
    // In drain mode nothing is read until the writers stop, so each of the 64 files' writes all
    // merge into its one queued event; the queue depth sampled before the first read is exactly
    // what the drain then reads.
    const cell = cellOf('inotify', { backend: 'fanotify', mode: 'drain', writers: 4, files: 64, duration: '200ms', latencySampling: 0, maxQueuedEvents: 65536 });
    const m = ok(await runOnce(cell, scratch.dir)).metrics;
    expect(m['overflows']).toBe(0);
    expect(m['events']).toBe(64);
    expect(m['writesPerEvent']).toBeGreaterThan(100);
    expect(m['maxQueueDepth']).toBe(m['events']);
    expect(m['bytesRead']).toBeGreaterThan((m['events'] ?? 0) * 24);
  });

  it('counts FAN_Q_OVERFLOW when a tiny queue meets a slow reader, and restores the sysctl', async () => {
    const cell = cellOf('inotify', {
      backend: 'fanotify', mark: 'filesystem', writers: 4, files: 256, duration: '500ms', bufferBytes: '4KiB', maxQueuedEvents: 16, readerNice: 19,
    });
    const run = ok(await runOnce(cell, scratch.dir));
    expect(run.info['fanotifyMaxQueuedEvents']).toBe(16);
    expect(run.metrics['overflows']).toBeGreaterThan(0);
    expect(run.metrics['maxQueueDepth']).toBeLessThanOrEqual(17); // 16 events and the overflow event
    // A fanotify run touches no inotify limit, so it records none.
    expect(run.limits).toBeNull();
    expect(fanQueue()).toBe(queued);
  });

  it('takes the latency of marker writes as inotify does', async () => {
    const run = ok(await runOnce(cellOf('inotify', { backend: 'fanotify', fanotifyReport: 'fid', writers: 2, files: 8, duration: '300ms', latencySampling: 16 }), scratch.dir));
    expect(run.metrics['latencySamples']).toBeGreaterThan(0);
    expect(run.metrics['latencyP50Us']).toBeLessThanOrEqual(run.metrics['latencyP99Us'] ?? 0);
    expect(run.histograms['writeToEventLatency']?.buckets.reduce((s, b) => s + b[2], 0)).toBe(run.metrics['latencySamples']);
  });

  // A foreign file beside the run's directory, on the same filesystem and mount, is written all
  // through the run: the inode and dir marks never see it, mount and filesystem marks do, and
  // neither counts it among the workload's events. The writes are made so that no two can merge
  // (one writer, round-robin over more files than it writes, a reader on its own CPU with a queue
  // that cannot overflow, as in the first test): every write is then exactly one event, and a
  // foreign event counted, or a workload event not mapped back to its file, breaks the equality.
  it.each([
    ['inode', 'dfid-name'], ['inode', 'fid'], ['dir', 'dfid-name'], ['dir', 'fid'],
    ['mount', 'dfid-name'], ['mount', 'fid'], ['filesystem', 'dfid-name'], ['filesystem', 'fid'],
  ] as const)('mark %s (report %s) counts only the workload\'s files as events', async (mark, report) => {
    // Room for every file's 64 KiB, as the run's budget asks; tmpfs holds only what is written.
    const fs = mountTmpfs(`shared-${mark}-${report}`, '1200m');
    const foreign = path.join(fs.dir, 'foreign.txt');
    let foreignWrites = 0;
    const timer = setInterval(() => {
      writeFileSync(foreign, String(foreignWrites++));
    }, 1);
    try {
      const files = 16384;
      const cell = cellOf('inotify', {
        backend: 'fanotify', mark, fanotifyReport: report, target: fs.dir, writers: 1, files, writeBytes: '64KiB', duration: '100ms',
        maxQueuedEvents: 1_048_576, pin: true, latencySampling: 0,
      });
      const m = ok(await runOnce(cell, scratch.dir)).metrics;
      expect(foreignWrites).toBeGreaterThan(10);
      expect(m['writes']).toBeGreaterThan(100);
      expect(m['writes'], 'a file was written twice: merges become possible and events == writes no longer must hold').toBeLessThan(files);
      expect(m['overflows']).toBe(0);
      expect(m['events']).toBe(m['writes']);
      process.stdout.write(`mark ${mark}, report ${report}: ${String(m['writes'])} writes, ${String(m['events'])} events, ${String(m['foreignEvents'])} foreign\n`);
      if (mark === 'mount' || mark === 'filesystem') expect(m['foreignEvents']).toBeGreaterThan(0);
      else expect(m['foreignEvents']).toBe(0);
    } finally {
      clearInterval(timer);
      fs.unmount();
    }
  });

  it('skips a mark the filesystem refuses, with the kernel\'s reason, and restores the sysctl', async () => {
    // overlayfs (without nfs_export) encodes file handles, so fanotify can identify its files and
    // an inode mark works, but it cannot decode them, which mount and filesystem marks need:
    // fanotify_mark says EOPNOTSUPP. A container's root filesystem is such an overlay.
    const fs = mountOverlay('overlay');
    try {
      const inode = ok(await runOnce(cellOf('inotify', { backend: 'fanotify', mark: 'inode', fanotifyReport: 'fid', target: fs.dir, writers: 1, files: 4, duration: '100ms' }), scratch.dir));
      expect(inode.metrics['events']).toBeGreaterThan(0);
      const run = await runOnce(cellOf('inotify', { backend: 'fanotify', mark: 'filesystem', target: fs.dir, maxQueuedEvents: 4321, duration: '100ms' }), scratch.dir);
      // Not a failure: this filesystem cannot be measured this way, as a refused combination is not.
      expect(run.state).toBe('skipped');
      const reason = run.state === 'skipped' ? run.reason : '';
      expect(reason).toContain('the kernel refused fanotify_mark(FAN_MARK_ADD|FAN_MARK_FILESYSTEM, FAN_MODIFY)');
      expect(reason).toContain('(EOPNOTSUPP)');
      expect(reason).toContain('target filesystem: overlay');
      expect(fanQueue()).toBe(queued);
    } finally {
      fs.unmount();
    }
  });

  it('skips cells that mix fanotify parameters with other backends, or cannot read every record', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ backend: 'inotify', mark: 'mount' }, 'applies only to backend: fanotify'],
      [{ backend: 'parcel', watch: 'dir', fanotifyReport: 'fid' }, 'applies only to backend: fanotify'],
      [{ backend: 'fanotify', watch: 'dir' }, 'mark chooses what is watched'],
      [{ backend: 'fanotify', bufferBytes: 300 }, 'the largest FAN_REPORT_DFID_NAME record'],
      [{ backend: 'fanotify', fanotifyUnlimitedQueue: true, maxQueuedEvents: 100 }, 'leave it at system'],
    ];
    for (const [params, reason] of cases) {
      const run = await runOnce(cellOf('inotify', params), scratch.dir);
      expect(run.state).toBe('skipped');
      if (run.state === 'skipped') expect(run.reason).toContain(reason);
    }
    // A small buffer is fine when records carry no name.
    expect((await runOnce(cellOf('inotify', { backend: 'fanotify', fanotifyReport: 'fid', bufferBytes: 300, duration: '100ms', files: 4 }), scratch.dir)).state).toBe('ok');
  });

  it('allows FAN_UNLIMITED_QUEUE only on a host whose cap allows any queue', async () => {
    const cell = cellOf('inotify', { backend: 'fanotify', fanotifyUnlimitedQueue: true, writers: 2, files: 64, duration: '200ms', readerNice: 19 });
    const refused = await runOnce(cell, scratch.dir);
    expect(refused.state).toBe('failed');
    if (refused.state === 'failed') expect(refused.error.code).toBe('LIMIT_NOT_ALLOWED');
    const journal = await Journal.open(path.join(scratch.dir, 'journal'));
    const run = ok(
      await runCell(
        { matrix: 't', cell, repetition: 0, fingerprint: await collectFingerprint() },
        { scratchDir: scratch.dir, journal, signal: new AbortController().signal, log: () => undefined, budget: { allowedTargets: [], maxQueuedEvents: 2 ** 31 - 1, maxWatches: 131_072 } },
      ),
    );
    expect(run.info['fanotifyMaxQueuedEvents']).toBe('unlimited');
    expect(run.metrics['overflows']).toBe(0);
  });
});

describe('the fanotify sysctl under SIGKILL', () => {
  it('after SIGKILL, the next start restores fs.fanotify.max_queued_events', async () => {
    const dir = tempDir('fsbench-fan-sigkill-');
    const scratchDir = path.join(dir.dir, 'scratch');
    try {
      const long = path.join(dir.dir, 'long.yaml');
      writeFileSync(long, 'name: long\nworkload: inotify\nwarmup: 0\nrepetitions: 3\nparams:\n  backend: fanotify\n  maxQueuedEvents: 6666\n  duration: 1500ms\n  writers: 2\n  files: 8\n');
      const child = spawnCli(['run', long, '--scratch', scratchDir, '--no-progress']);
      const done = exited(child);
      await waitFor(() => fanQueue() === '6666' && mountsUnder(scratchDir).length > 0, 20_000, 'the run to set the fanotify limit and mount');
      child.kill('SIGKILL');
      await done;
      expect(fanQueue()).toBe('6666');
      const small = path.join(dir.dir, 'small.yaml');
      writeFileSync(small, 'name: small\nworkload: inotify\nwarmup: 0\nrepetitions: 1\nparams:\n  backend: fanotify\n  duration: 100ms\n  files: 4\n  writers: 1\n');
      const r = await exited(spawnCli(['run', small, '--scratch', scratchDir, '--no-progress']));
      expect(r.code).toBe(0);
      expect(r.stderr).toContain('recovered from an earlier run: undid /proc/sys/fs/fanotify/max_queued_events');
      expect(fanQueue()).toBe(queued);
      expect(mountsUnder(scratchDir)).toEqual([]);
    } finally {
      writeFileSync(FAN_QUEUE, queued);
      dir.remove();
    }
  });
});
