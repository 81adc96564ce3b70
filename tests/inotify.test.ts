import { spawn } from 'node:child_process';
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunResult } from '../contract/result.js';
import { CLI, cellOf, exited, mountsUnder, runOnce, spawnCli, sysctl, tempDir, waitFor } from './helpers/local.js';

const scratch = tempDir('fsbench-inotify-');
let queued: string;

beforeAll(() => {
  queued = sysctl('max_queued_events');
});
afterAll(() => {
  scratch.remove();
});

function ok(run: RunResult) {
  if (run.state !== 'ok') throw new Error(`run ${run.state}: ${run.state === 'failed' ? run.error.message : run.reason}`);
  return run;
}

describe('inotify workload on a private tmpfs', () => {
  it('never reports more events than writes, and accounts for every read', async () => {
    const run = ok(await runOnce(cellOf('inotify', { writers: 4, files: 32, duration: '300ms', bufferBytes: '16KiB' }), scratch.dir));
    const m = run.metrics;
    expect(m['writes']).toBeGreaterThan(1000);
    expect(m['events']).toBeGreaterThan(0);
    expect(m['events']).toBeLessThanOrEqual(m['writes'] ?? 0);
    expect(m['reads']).toBeGreaterThan(0);
    expect(m['bytesRead']).toBeGreaterThanOrEqual((m['events'] ?? 0) * 16);
    expect(m['coalescedFraction']).toBeCloseTo(1 - (m['events'] ?? 0) / (m['writes'] ?? 1), 9);
    expect(run.fingerprint.targetFs).toBe('tmpfs');
    expect(run.limits?.maxQueuedEvents).toBe(Number(queued));
    // The tmpfs and its directory are gone.
    expect(mountsUnder(scratch.dir)).toEqual([]);
  });

  it('counts IN_Q_OVERFLOW when a tiny queue meets a slow reader, and restores the limit', async () => {
    const cell = cellOf('inotify', {
      writers: 8, files: 64, duration: '500ms', bufferBytes: '4KiB', maxQueuedEvents: 64, readerNice: 19,
    });
    const run = ok(await runOnce(cell, scratch.dir));
    expect(run.limits?.maxQueuedEvents).toBe(64);
    expect(run.metrics['overflows']).toBeGreaterThan(0);
    expect(sysctl('max_queued_events')).toBe(queued);
  });

  it('samples write-to-event latency into a mergeable histogram', async () => {
    const run = ok(await runOnce(cellOf('inotify', { writers: 2, files: 8, duration: '300ms', latencySampling: 16 }), scratch.dir));
    const m = run.metrics;
    expect(m['latencySamples']).toBeGreaterThan(0);
    expect(m['latencyP50Us']).toBeLessThanOrEqual(m['latencyP90Us'] ?? 0);
    expect(m['latencyP90Us']).toBeLessThanOrEqual(m['latencyP99Us'] ?? 0);
    expect(m['latencyP99Us']).toBeLessThanOrEqual(m['latencyMaxUs'] ?? 0);
    const h = run.histograms['writeToEventLatency'];
    expect(h?.buckets.reduce((s, b) => s + b[2], 0)).toBe(m['latencySamples']);
  });

  it('measures the read path alone in drain mode', async () => {
    const run = ok(await runOnce(cellOf('inotify', { writers: 4, files: 256, duration: '300ms', mode: 'drain', bufferBytes: '1MiB' }), scratch.dir));
    expect(run.metrics['events']).toBeGreaterThan(0);
    expect(run.metrics['drainMs']).toBeLessThan(run.metrics['elapsedMs'] ?? 0);
  });

  it('restores the limits after a run that fails, and reports why it failed', async () => {
    const cell = cellOf('inotify', { maxQueuedEvents: 4321, target: path.join(scratch.dir, 'does-not-exist'), duration: '100ms' });
    const run = await runOnce(cell, scratch.dir);
    expect(run.state).toBe('failed');
    if (run.state === 'failed') {
      expect(run.error.code).toBe('TARGET_UNUSABLE');
      expect(run.error.message).toContain('is not an existing directory');
    }
    expect(sysctl('max_queued_events')).toBe(queued);
  });

  it('reports impossible combinations as skipped with the reason', async () => {
    const run = await runOnce(cellOf('inotify', { backend: 'parcel', watch: 'files' }), scratch.dir);
    expect(run.state).toBe('skipped');
    if (run.state === 'skipped') expect(run.reason).toContain('only watches directories');
  });

  it.each(['parcel', 'fswatch', 'chokidar'])('shows what %s delivered next to the writes, with overflows as not observable', async (backend) => {
    const run = ok(await runOnce(cellOf('inotify', { backend, watch: 'dir', writers: 2, files: 16, duration: '300ms' }), scratch.dir));
    expect(run.metrics['events']).toBeGreaterThan(0);
    expect(run.metrics['events']).toBeLessThanOrEqual(run.metrics['writes'] ?? 0);
    expect(run.metrics['overflows']).toBeNull();
    expect(run.info['overflowVisible']).toBe(false);
  });
});

describe('chokidar', () => {
  it('delivers at most one change per file per 50 ms however many writes, watching the files or their directory', async () => {
    for (const watch of ['files', 'dir']) {
      // 1 writer on 4 files for 600 ms: about a million writes, at most 4 x (600 / 50 + 1) changes.
      const run = ok(await runOnce(cellOf('inotify', { backend: 'chokidar', watch, writers: 1, files: 4, duration: '600ms' }), scratch.dir));
      expect(run.metrics['writes']).toBeGreaterThan(10_000);
      expect(run.metrics['events']).toBeGreaterThanOrEqual(4);
      expect(run.metrics['events']).toBeLessThanOrEqual(4 * (600 / 50 + 2));
    }
  });
});

describe('the CLI under signals', () => {
  const matrix = (dir: string, queue: number) => {
    const file = path.join(dir, 'long.yaml');
    writeFileSync(file, `name: long\nworkload: inotify\nwarmup: 0\nrepetitions: 3\nparams:\n  maxQueuedEvents: ${queue}\n  duration: 1500ms\n  writers: 2\n  files: 8\n`);
    return file;
  };

  it('on SIGTERM restores the limits, removes its mount, keeps finished runs and exits 130', async () => {
    const dir = tempDir('fsbench-sigterm-');
    try {
      const out = path.join(dir.dir, 'runs.jsonl');
      const child = spawnCli(['run', matrix(dir.dir, 7777), '--out', out, '--scratch', path.join(dir.dir, 'scratch'), '--no-progress']);
      const done = exited(child);
      const lines = () => (existsSync(out) ? readFileSync(out, 'utf8').split('\n').filter((l) => l !== '') : []);
      // Interrupt the second run, so one finished run must be kept.
      await waitFor(() => lines().length === 1 && sysctl('max_queued_events') === '7777', 20_000, 'the second run to start');
      child.kill('SIGTERM');
      const r = await done;
      expect(r.code).toBe(130);
      expect(r.stderr).toContain('interrupted: 1 runs kept');
      const kept = lines().map((l) => RunResult.parse(JSON.parse(l)));
      expect(kept.map((k) => [k.state, k.repetition])).toEqual([['ok', 0]]);
      expect(r.stdout).toContain('eventsPerSec');
      expect(sysctl('max_queued_events')).toBe(queued);
      expect(mountsUnder(dir.dir)).toEqual([]);
    } finally {
      dir.remove();
    }
  });

  it('after SIGKILL, the next start restores what the killed run changed', async () => {
    const dir = tempDir('fsbench-sigkill-');
    const scratchDir = path.join(dir.dir, 'scratch');
    try {
      const child = spawnCli(['run', matrix(dir.dir, 6666), '--scratch', scratchDir, '--no-progress']);
      const done = exited(child);
      await waitFor(() => sysctl('max_queued_events') === '6666' && mountsUnder(scratchDir).length > 0, 20_000, 'the run to set its limit and mount');
      child.kill('SIGKILL');
      await done;
      expect(sysctl('max_queued_events')).toBe('6666');
      const small = path.join(dir.dir, 'small.yaml');
      writeFileSync(small, 'name: small\nworkload: inotify\nwarmup: 0\nrepetitions: 1\nparams:\n  duration: 100ms\n  files: 4\n  writers: 1\n');
      const r = await exited(spawnCli(['run', small, '--scratch', scratchDir, '--no-progress']));
      expect(r.code).toBe(0);
      expect(r.stderr).toContain('recovered from an earlier run: undid /proc/sys/fs/inotify/max_queued_events');
      expect(r.stderr).toContain('recovered from an earlier run: undid mount');
      expect(sysctl('max_queued_events')).toBe(queued);
      expect(mountsUnder(scratchDir)).toEqual([]);
    } finally {
      writeFileSync('/proc/sys/fs/inotify/max_queued_events', queued);
      dir.remove();
    }
  });
});

describe('without privileges', () => {
  it('fails a cell that needs a limit change, naming the privilege, instead of measuring under another limit', async () => {
    const dir = tempDir('fsbench-unpriv-');
    try {
      // World-writable and sticky, as /tmp is: the unprivileged user's scratch directory inside it is its own.
      chmodSync(dir.dir, 0o1777);
      const file = path.join(dir.dir, 'm.yaml');
      writeFileSync(file, `name: unpriv\nworkload: inotify\nwarmup: 0\nrepetitions: 1\nparams:\n  maxQueuedEvents: 5555\n  target: ${dir.dir}\n  duration: 100ms\n`);
      const child = spawn('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath, CLI, 'run', file, '--scratch', path.join(dir.dir, 's'), '--allowed-targets', dir.dir, '--format', 'json', '--no-progress'], { stdio: ['ignore', 'pipe', 'pipe'] });
      const r = await exited(child);
      // Nothing measured: never exit 0, and nothing to undo (the limit was never changed) is not an undo that failed.
      expect(r.code).toBe(9);
      expect(r.stderr).toMatch(/^fsbench: nothing was measured: 1 of 1 run failed \(PRIVILEGE_MISSING 1\); .*\[NO_RUN_MEASURED\]$/m);
      expect(r.stderr).not.toMatch(/could not undo/);
      const report = JSON.parse(r.stdout) as { cells: { ok: number; problem: string }[] };
      expect(report.cells[0]?.ok).toBe(0);
      expect(report.cells[0]?.problem).toMatch(/^PRIVILEGE_MISSING: setting \/proc\/sys\/fs\/inotify\/max_queued_events to 5555 needs root/);
      expect(sysctl('max_queued_events')).toBe(queued);
    } finally {
      dir.remove();
    }
  });
});
