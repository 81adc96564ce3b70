/**
 * The watch-setup workload for real: trees on real tmpfs mounts, the native recursive inotify
 * walk and fanotify marks, @parcel/watcher, chokidar and Node's fs.watch in their own processes,
 * the memory cgroup the watcher's kernel charges are read from, fs.inotify.max_user_watches set
 * low enough to hit, a killed run undone by the next start, a real coordinator with a real agent
 * and redis-server, and a run inside a Docker sandbox container.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CoordinatorClient } from '../cli/client.js';
import { expandMatrix, parseMatrix, type Cell } from '../contract/matrix.js';
import { RunResult } from '../contract/result.js';
import { MAX_WATCH_ENTRIES, WATCHES_METRIC_DOCS, watchesContract, watchesNotes, treeDepth } from '../contract/workloads/watches/index.js';
import { WORKLOADS } from '../contract/workloads/index.js';
import { collectFingerprint } from '../host/fingerprint.js';
import { filesystemType } from '../host/kernel.js';
import { Journal } from '../host/journal.js';
import { PACKAGE_ROOT } from '../host/native.js';
import { checkHostBudget } from '../runner/host-budget.js';
import { runCell } from '../runner/run-cell.js';
import { dockerClient, engineReachable } from '../sandbox/engine.js';
import { SandboxRunner } from '../sandbox/runner.js';
import { parseCounter } from '../workloads/watches/accounting.js';
import { useCluster } from './helpers/cluster.js';
import { exited, freshCli, memAvailable, mountsUnder, runOnce, spawnCli, sysctl, tempDir, waitFor } from './helpers/local.js';

function cellOf(params: Record<string, unknown>): Cell {
  const [cell] = expandMatrix(parseMatrix({ name: 't', workload: 'watches', params }));
  if (!cell) throw new Error('no cell');
  return cell;
}

function ok(r: RunResult): Extract<RunResult, { state: 'ok' }> {
  if (r.state !== 'ok') throw new Error(`run ${r.state}: ${r.state === 'failed' ? `${r.error.code} ${r.error.message}` : r.reason}`);
  return r;
}

function metric(r: RunResult, name: string): number | null {
  const v = ok(r).metrics[name];
  if (v === undefined) throw new Error(`no metric ${name}`);
  return v;
}

function runsIn(file: string): RunResult[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => RunResult.parse(JSON.parse(l)));
}

/** The cgroups fsbench made and has not removed, under this process's memory cgroup (v1) or its own (v2). */
function leftoverCgroups(): string[] {
  const text = readFileSync('/proc/self/cgroup', 'utf8');
  const dirs = [
    ...[/^\d+:(?:[\w,]*,)?memory(?:,[\w,]*)?:(\/.*)$/m.exec(text)?.[1]].flatMap((p) => (p === undefined ? [] : [path.join('/sys/fs/cgroup/memory', p)])),
    ...[/^0::(\/.*)$/m.exec(text)?.[1]].flatMap((p) => (p === undefined ? [] : [path.join('/sys/fs/cgroup', p), path.join('/sys/fs/cgroup/unified', p)])),
  ];
  return dirs.filter(existsSync).flatMap((d) => readdirSync(d).filter((n) => n.startsWith('fsbench-')));
}

const WATCHES = 'max_user_watches';

/** Every directory the tests below make lives in this one, removed after the file. */
const files = tempDir('fsbench-watches-');
afterAll(() => {
  files.remove();
});

describe('the contract', () => {
  it('documents every metric with a unit and a direction, and refuses what cannot be measured', () => {
    for (const [name, doc] of Object.entries(WATCHES_METRIC_DOCS)) {
      expect(doc.unit, name).not.toBe('');
      expect(['higher', 'lower', 'neither'], name).toContain(doc.direction);
    }
    expect(WORKLOADS.watches.params).toBe(watchesContract.params);
    const skip = watchesContract.skipReason;
    expect(skip(cellOf({ backend: 'inotify', mark: 'mount' }).params)).toMatch(/mark applies only to backend: fanotify/);
    expect(skip(cellOf({ 'container.storage': 'overlay' }).params)).toMatch(/use target: scratch/);
    expect(skip(cellOf({ 'container.storage': 'overlay', target: 'scratch' }).params)).toBeUndefined();
    expect(skip(cellOf({ backend: 'fanotify', maxUserWatches: 100 }).params)).toMatch(/fanotify marks do not count/);
    expect(skip(cellOf({ dirs: 1000, filesPerDir: 1000 }).params)).toBeUndefined();
    expect(skip(cellOf({ dirs: 10_000, filesPerDir: 1000 }).params)).toMatch(/above 4000000 entries/);
    expect(treeDepth(1, 10)).toBe(0);
    expect(treeDepth(11, 10)).toBe(1);
    expect(treeDepth(100_000, 10)).toBe(5);
    expect(skip(cellOf({ dirs: 1_000_000, fanout: 2 }).params)).toBeUndefined();
    expect(() => expandMatrix(parseMatrix({ name: 't', workload: 'watches', params: { dirs: 2_000_000 } }))).toThrow(/dirs/);
  });

  it('names the sysctl and the value that would have sufficed when the limit was hit, and only then', () => {
    const params = cellOf({ dirs: 3000 }).params;
    const medians: Record<string, number> = { limitHit: 1, maxUserWatches: 1000, watchesNeeded: 3120, watches: 880, kernelBytesHostWide: 0 };
    const [limit, ...rest] = watchesNotes(params, (m) => medians[m] ?? null);
    expect(rest).toEqual([]);
    expect(limit?.text).toContain('fs.inotify.max_user_watches (1000)');
    expect(limit?.text).toContain('fs.inotify.max_user_watches = 3120 would have sufficed');
    expect(watchesNotes(params, (m) => ({ ...medians, limitHit: 0 })[m] ?? null)).toEqual([]);
    const hostWide = watchesNotes(params, (m) => ({ ...medians, limitHit: 0, kernelBytesHostWide: 1 })[m] ?? null);
    expect(hostWide.map((n) => n.kind)).toEqual(['host-wide-accounting']);
  });

  it('reads kernel counters as the native program does', () => {
    expect(parseCounter('MemTotal:       24684184 kB\nSUnreclaim:        110272 kB\n', 'SUnreclaim')).toBe(110272 * 1024);
    expect(parseCounter('anon 1\nkernel 8818688\nkernel_stack 2\n', 'kernel')).toBe(8818688);
    expect(parseCounter('8818688\n', null)).toBe(8818688);
    expect(parseCounter('anon 1\n', 'kernel')).toBeNull();
  });
});

describe('fsbench run examples/watches-quick.yaml', () => {
  const scratch = { dir: path.join(files.dir, 'quick') };

  it('watches the whole tree with all five backends and leaves nothing behind', async () => {
    const before = sysctl(WATCHES);
    const out = path.join(scratch.dir, 'runs.jsonl');
    await freshCli();
    const r = await exited(spawnCli(['run', path.join(PACKAGE_ROOT, 'examples', 'watches-quick.yaml'), '-o', out, '--scratch', path.join(scratch.dir, 's'), '--no-progress']));
    expect(r.code, r.stderr).toBe(0);
    const runs = runsIn(out);
    expect(runs).toHaveLength(15);
    const by = (backend: string) => runs.filter((x) => x.params['backend'] === backend);
    for (const run of runs) {
      expect(metric(run, 'limitHit')).toBe(0);
      expect(metric(run, 'treeDirs')).toBe(2000);
      expect(metric(run, 'treeFiles')).toBe(10_000);
      // The marker's event comes after the watch on its directory is in place.
      expect(metric(run, 'firstEventMs')).toBeGreaterThan(0);
      expect(ok(run).info['kernelMemoryMethod']).toMatch(/^(memcg-v1|memcg-v2|meminfo)$/);
    }
    // One watch per directory for the raw walk and @parcel/watcher; Node's recursive fs.watch watches every file too.
    for (const run of by('inotify')) expect(metric(run, 'watches')).toBe(2000);
    for (const run of by('parcel')) expect(metric(run, 'watches')).toBe(2000);
    // ... and the marker files it saw made.
    for (const run of by('fswatch')) {
      expect(metric(run, 'watches')).toBeGreaterThanOrEqual(12_000);
      expect(metric(run, 'watches')).toBeLessThanOrEqual(12_000 + Number(ok(run).info['markers']));
    }
    for (const run of by('chokidar')) expect(metric(run, 'watches')).toBeGreaterThanOrEqual(2000);
    for (const run of by('fanotify')) expect(metric(run, 'watches')).toBe(1);
    for (const run of by('inotify')) {
      // A mark is an 80-byte slab object here; a memory cgroup sees it alone, /proc/meminfo with its connector and more.
      const perWatch = metric(run, 'kernelBytesPerWatch') ?? NaN;
      expect(perWatch).toBeGreaterThan(40);
      expect(perWatch).toBeLessThan(ok(run).info['kernelMemoryMethod'] === 'meminfo' ? 1000 : 400);
      expect(metric(run, 'firstEventMs')).toBeGreaterThanOrEqual(metric(run, 'setupMs') ?? Infinity);
      expect(metric(run, 'watcherRssBytes')).toBeLessThan(64 * 1024 ** 2);
    }
    // The libraries' own process holds a Node runtime: tens of MiB before the first watch.
    for (const run of [...by('parcel'), ...by('chokidar'), ...by('fswatch')]) expect(metric(run, 'watcherRssBytes')).toBeGreaterThan(20 * 1024 ** 2);
    expect(mountsUnder(scratch.dir)).toEqual([]);
    expect(leftoverCgroups()).toEqual([]);
    expect(sysctl(WATCHES)).toBe(before);
  }, 180_000);
});

describe('fs.inotify.max_user_watches', () => {
  const scratch = { dir: path.join(files.dir, 'limit') };

  it('a tree larger than the limit is ok with the limit recorded, and the value it names suffices', async () => {
    const before = sysctl(WATCHES);
    const hit = await runOnce(cellOf({ backend: 'inotify', dirs: 3000, maxUserWatches: 1000 }), scratch.dir);
    expect(metric(hit, 'limitHit')).toBe(1);
    expect(metric(hit, 'maxUserWatches')).toBe(1000);
    const watches = metric(hit, 'watches') ?? NaN;
    expect(watches).toBeLessThanOrEqual(1000);
    expect(metric(hit, 'firstEventMs')).toBeNull();
    // Whatever else this user holds, plus the whole tree.
    const needed = metric(hit, 'watchesNeeded') ?? NaN;
    expect(needed).toBe(1000 - watches + 3000);
    expect(sysctl(WATCHES)).toBe(before);
    const enough = await runOnce(cellOf({ backend: 'inotify', dirs: 3000, maxUserWatches: needed }), scratch.dir);
    expect(metric(enough, 'limitHit')).toBe(0);
    expect(metric(enough, 'watches')).toBe(3000);
    expect(metric(enough, 'maxUserWatches')).toBe(needed);
    expect(sysctl(WATCHES)).toBe(before);
  }, 60_000);

  it('the libraries hitting it are recorded the same way, Node\'s fs.watch too, which says nothing', async () => {
    const before = sysctl(WATCHES);
    const said = { parcel: /No space left/, chokidar: /System limit for number of file watchers reached/, fswatch: /none reported: \d+ of 3000 watches, and no event/ };
    for (const [backend, error] of Object.entries(said)) {
      const hit = await runOnce(cellOf({ backend, dirs: 3000, maxUserWatches: 1000 }), scratch.dir);
      expect(metric(hit, 'limitHit'), backend).toBe(1);
      expect(String(ok(hit).info['limitError']), backend).toMatch(error);
      expect(metric(hit, 'watchesNeeded'), backend).toBeGreaterThanOrEqual(3000);
      expect(metric(hit, 'firstEventMs'), backend).toBeNull();
      expect(sysctl(WATCHES)).toBe(before);
    }
  }, 90_000);

  it('the host budget refuses a tree beyond FSBENCH_MAX_WATCHES', async () => {
    const tooMany = await runOnce(cellOf({ backend: 'inotify', dirs: 200_000 }), scratch.dir);
    expect(tooMany).toMatchObject({ state: 'failed', error: { code: 'LIMIT_NOT_ALLOWED' } });
    expect(mountsUnder(scratch.dir)).toEqual([]);
  });

  // Sized from this machine: chokidar on tmpfs is budgeted 8 KiB of heap and 1.5 KiB of inode an
  // entry, at least 8 MB a directory of 1000 entries, so one directory more than all of this
  // machine's memory (MemTotal, os.totalmem()) holds at 8 MB needs more than it can spare. Where
  // that is beyond the largest tree (4,000,000 entries: 32 GB and more), this is a counted skip.
  const tooBigDirs = Math.floor(os.totalmem() / (1000 * 8192)) + 1;
  it.runIf(tooBigDirs * 1000 <= MAX_WATCH_ENTRIES)('the host budget refuses a tree beyond the memory this host has, and lets one of a quarter of MemAvailable through', async () => {
    const tooBig = await runOnce(cellOf({ backend: 'chokidar', dirs: tooBigDirs, filesPerDir: 999 }), scratch.dir);
    expect(tooBig).toMatchObject({ state: 'failed', error: { code: 'HOST_TOO_SMALL' } });
    if (tooBig.state !== 'failed') throw new Error(`expected a refusal, got ${tooBig.state}`);
    expect(tooBig.error.message).toMatch(new RegExp(`^a watched tree of ${String(tooBigDirs * 1000)} entries with chokidar .* needs [\\d.]+ GiB, but this host has .* to spare`));
    expect(mountsUnder(scratch.dir)).toEqual([]);
    // A tree of a quarter of MemAvailable passes the same check: the refusal was the size.
    const fits = Math.max(1, Math.floor(memAvailable() / 4 / (1000 * (8192 + 1536))) - 2);
    await expect(checkHostBudget(cellOf({ backend: 'chokidar', dirs: fits, filesPerDir: 999 }), scratch.dir)).resolves.toBeUndefined();
  });
});

describe('kernel accounting and privileges', () => {
  const scratch = { dir: path.join(files.dir, 'acct') };

  it('accounting: meminfo takes the host-wide figure, and says so', async () => {
    const r = await runOnce(cellOf({ backend: 'inotify', dirs: 20_000, accounting: 'meminfo' }), scratch.dir);
    expect(ok(r).info['kernelMemoryMethod']).toBe('meminfo');
    expect(metric(r, 'kernelBytesHostWide')).toBe(1);
    expect(metric(r, 'kernelBytesPerWatch')).toBe(metric(r, 'sunreclaimBytesPerWatch'));
    expect(leftoverCgroups()).toEqual([]);
  });

  it('fanotify watches with one filesystem or mount mark, on tmpfs and on the scratch filesystem', async () => {
    for (const mark of ['filesystem', 'mount']) {
      for (const target of ['tmpfs', 'scratch']) {
        const r = await runOnce(cellOf({ backend: 'fanotify', mark, target, dirs: 1000 }), scratch.dir);
        expect(metric(r, 'watches'), `${mark} ${target}`).toBe(1);
        // The marker's event, told from other processes' writes on the same filesystem by its inode.
        expect(metric(r, 'firstEventMs')).toBeGreaterThan(metric(r, 'setupMs') ?? Infinity);
        expect(metric(r, 'maxUserWatches')).toBeNull();
        expect(ok(r).fingerprint.targetFs).toBe(target === 'tmpfs' ? 'tmpfs' : filesystemType(scratch.dir));
      }
    }
  });

  it('fanotify without CAP_SYS_ADMIN is skipped with the kernel\'s reason, on the scratch filesystem', async () => {
    await freshCli();
    const file = path.join(scratch.dir, 'fan.json');
    writeFileSync(file, JSON.stringify({ name: 'fan', workload: 'watches', params: { backend: 'fanotify', dirs: 100, target: 'scratch' } }));
    const out = path.join(scratch.dir, 'fan.jsonl');
    const cli = path.join(PACKAGE_ROOT, 'dist', 'cli', 'fsbench.js');
    const child = spawn('setpriv', ['--inh-caps=-sys_admin', '--bounding-set=-sys_admin', process.execPath, cli, 'run', file, '-o', out, '--scratch', path.join(scratch.dir, 's'), '--no-progress'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const r = await exited(child);
    // Its only run skipped: nothing was measured, which a CI job must not read as success.
    expect(r.code, r.stderr).toBe(9);
    expect(r.stderr).toMatch(/nothing was measured: 1 of 1 skipped; .*\[NO_RUN_MEASURED\]$/m);
    const [run] = runsIn(out);
    expect(run).toMatchObject({ state: 'skipped' });
    if (run?.state === 'skipped') expect(run.reason).toMatch(/fanotify_mark\(filesystem\).*Operation not permitted.*CAP_SYS_ADMIN|needs CAP_SYS_ADMIN/);
  }, 60_000);

  it('a killed run is undone by the next start: tmpfs, cgroup and max_user_watches', async () => {
    const before = sysctl(WATCHES);
    const file = path.join(scratch.dir, 'big.json');
    writeFileSync(file, JSON.stringify({ name: 'big', workload: 'watches', params: { backend: 'chokidar', dirs: 60_000, maxUserWatches: Number(before) + 1000 } }));
    const s = path.join(scratch.dir, 'k');
    // A limit above FSBENCH_MAX_WATCHES (131072 by default) is the host's to allow.
    const child = spawnCli(['run', file, '--scratch', s, '--max-watches', String(Number(before) + 1000)]);
    let stderr = '';
    child.stderr?.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
    });
    await waitFor(() => stderr.includes('chokidar watching the tree'), 60_000, 'the watcher to start');
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(sysctl(WATCHES)).toBe(String(Number(before) + 1000));
    expect(mountsUnder(s).length).toBe(1);
    child.kill('SIGKILL');
    await exited(child);
    const noop = path.join(scratch.dir, 'noop.json');
    writeFileSync(noop, JSON.stringify({ name: 'n', workload: 'noop', params: {} }));
    // The watcher child exits when its parent's IPC channel closes; the next start undoes the rest.
    const r = await exited(spawnCli(['run', noop, '--scratch', s, '--no-progress']));
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/recovered from an earlier run: undid cgroup/);
    expect(mountsUnder(s)).toEqual([]);
    expect(leftoverCgroups()).toEqual([]);
    expect(sysctl(WATCHES)).toBe(before);
  }, 120_000);
});

describe('through the coordinator, with a real agent', () => {
  const cluster = useCluster('watches');
  it('runs a watches matrix on an agent and serves its results', async () => {
    await freshCli();
    const coordinator = await cluster.coordinator();
    await cluster.agent(coordinator.prefix, 'watches-host', 'watches-machine');
    const client = new CoordinatorClient(coordinator.url);
    const matrix = { name: 'watches-agent', workload: 'watches', repetitions: 2, warmup: 0, params: { backend: ['inotify', 'parcel'], dirs: 500 } };
    const { id } = z.object({ id: z.string() }).parse(await client.json('POST', '/v1/matrices', matrix));
    for (const end = Date.now() + 90_000; ; ) {
      const m = z.object({ state: z.string() }).loose().parse(await client.json('GET', `/v1/matrices/${id}`));
      if (m.state === 'done') break;
      if (Date.now() > end) throw new Error(`matrix ${id} is still ${m.state}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    const Stored = z.object({ state: z.literal('ok'), machine: z.string(), params: z.record(z.string(), z.unknown()), metrics: z.record(z.string(), z.number().nullable()) }).loose();
    const results = z.object({ runs: z.array(Stored) }).loose().parse(await client.json('GET', `/v1/matrices/${id}/results`));
    expect(results.runs).toHaveLength(4);
    expect(new Set(results.runs.map((r) => r.params['backend']))).toEqual(new Set(['inotify', 'parcel']));
    for (const run of results.runs) {
      expect(run.metrics['watches']).toBe(500);
      expect(run.metrics['limitHit']).toBe(0);
      expect(run.metrics['firstEventMs']).toBeGreaterThan(0);
      expect(run.machine).toBe('watches-machine');
    }
  }, 120_000);
});

describe('in a sandbox container', () => {
  const IMAGE = 'fsbench-test:sandbox';
  const docker = dockerClient();
  const scratch = tempDir('fsbench-watches-sandbox-');
  let journal: Journal;
  let sandbox: SandboxRunner;

  beforeAll(async () => {
    if (!(await engineReachable(docker))) throw new Error('the sandbox test needs a running Docker engine: `npm test` starts one (scripts/prepare-host.sh)');
    execFileSync('docker', ['build', '-q', '-f', 'docker/Dockerfile', '-t', IMAGE, '.'], { cwd: PACKAGE_ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
    journal = await Journal.open(path.join(scratch.dir, 'journal'));
    sandbox = await SandboxRunner.connect({ docker, image: IMAGE });
  }, 900_000);

  afterAll(async () => {
    await journal.close();
    scratch.remove();
  });

  it('watches a tree on the container\'s own storage', async () => {
    const fingerprint = await collectFingerprint();
    const ctx = { scratchDir: scratch.dir, journal, signal: new AbortController().signal, log: () => undefined, sandbox };
    for (const storage of ['overlay', 'tmpfs']) {
      const cell = cellOf({ backend: 'inotify', dirs: 500, target: 'scratch', 'container.storage': storage });
      const r = await runCell({ matrix: 't', cell, repetition: 0, fingerprint }, ctx);
      expect(metric(r, 'watches')).toBe(500);
      expect(metric(r, 'limitHit')).toBe(0);
      expect(ok(r).params['container.storage']).toBe(storage);
      expect(ok(r).fingerprint.targetFs).toBe(storage === 'tmpfs' ? 'tmpfs' : 'overlay');
      // Whichever accounting the container allowed, the run says which, and the metric agrees.
      expect(metric(r, 'kernelBytesHostWide')).toBe(ok(r).info['kernelMemoryMethod'] === 'meminfo' ? 1 : 0);
    }
  }, 300_000);
});
