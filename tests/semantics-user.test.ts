/**
 * A watcher of the user's own in the semantics workload (`backend: user`): the host's operator
 * lists it (FSBENCH_WATCHERS), a cell names it, and `fsbench run` starts it from the list as
 * nobody, reads its JSON lines and matches them like any backend's. The watcher here is the
 * shipped example, examples/watchers/watchdog-jsonl.py (Python's watchdog). A cell naming a
 * watcher the host does not list is refused before anything of the run exists.
 */
import { chmod, copyFile, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunResult } from '../contract/result.js';
import { perKindMetric } from '../contract/workloads/semantics/index.js';
import { PACKAGE_ROOT } from '../host/native.js';
import { freshCli, mountsUnder, runCli } from './helpers/local.js';

const EXAMPLE = path.join(PACKAGE_ROOT, 'examples', 'watchers', 'watchdog-jsonl.py');
const KINDS = ['create', 'modify', 'delete', 'rename-within', 'mkdir-then-files'] as const;
const PER_KIND = 5;

let dir = '';
let list = '';

beforeAll(async () => {
  await freshCli();
  // The list and the program it names are root's and not writable by others, as the list requires.
  dir = await mkdtemp(path.join(os.tmpdir(), 'fsbench-user-watcher-'));
  await chmod(dir, 0o755);
  const program = path.join(dir, 'watchdog-jsonl.py');
  await copyFile(EXAMPLE, program);
  await chmod(program, 0o755);
  list = path.join(dir, 'watchers.json');
  await writeFile(list, JSON.stringify({ watchers: [{ name: 'my-watchdog', argv: ['/usr/bin/python3', program, '{root}'] }] }));
  await chmod(list, 0o644);
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A scratch directory the listed watcher (nobody) may pass through, or not. */
async function scratchDir(mode: number): Promise<string> {
  const s = await mkdtemp(path.join(dir, 'scratch-'));
  await chmod(s, mode);
  return s;
}

/** The real uids of the running processes whose command line names `needle`. */
async function uidsOf(needle: string): Promise<Set<string>> {
  const uids = new Set<string>();
  for (const pid of (await readdir('/proc')).filter((n) => /^\d+$/.test(n))) {
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    if (!cmdline.includes(needle)) continue;
    const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
    const uid = /^Uid:\s+(\d+)/m.exec(status)?.[1];
    if (uid !== undefined) uids.add(uid);
  }
  return uids;
}

async function run(scratch: string, params: Record<string, unknown>): Promise<{ code: number | null; stderr: string; runs: RunResult[] }> {
  const matrix = path.join(scratch, '..', `matrix-${path.basename(scratch)}.json`);
  const out = path.join(scratch, '..', `runs-${path.basename(scratch)}.jsonl`);
  await writeFile(matrix, JSON.stringify({ name: 'user-watcher', workload: 'semantics', warmup: 0, repetitions: 1, params }));
  const r = await runCli(['run', matrix, '-o', out, '--scratch', scratch, '--watchers', list, '--no-progress']);
  const text = await readFile(out, 'utf8').catch(() => '');
  const runs = text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => RunResult.parse(JSON.parse(l)));
  return { code: r.code, stderr: r.stderr, runs };
}

/** What a run may leave in its scratch directory: the journal, nothing of the run. */
async function leftovers(scratch: string): Promise<string[]> {
  return (await readdir(scratch)).filter((n) => n.startsWith('fsbench-semantics-'));
}

describe('a watcher of the host operator\'s own (backend: user)', () => {
  it('runs the listed program as nobody on the run\'s tree, and its JSON lines are matched like any backend\'s', async () => {
    const scratch = await scratchDir(0o711);
    const running = run(scratch, { backend: 'user', watcher: 'my-watchdog', kinds: KINDS.join(','), perKind: PER_KIND, pace: 100, settle: '1s', seed: 5 });
    const state = { done: false };
    void running.finally(() => {
      state.done = true;
    });
    // Who the watcher runs as, seen from /proc while it runs.
    const seen = new Set<string>();
    while (!state.done) {
      for (const uid of await uidsOf(path.join(dir, 'watchdog-jsonl.py'))) seen.add(uid);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const r = await running;
    expect(r.code, r.stderr).toBe(0);
    expect([...seen]).toEqual(['65534']);
    const [only] = r.runs;
    if (only?.state !== 'ok') throw new Error(`run ${only?.state ?? 'missing'}: ${JSON.stringify(only)}`);
    expect(only.info['watcher']).toBe('my-watchdog');
    const m = only.metrics;
    expect(m['operations']).toBe(KINDS.length * PER_KIND);
    // watchdog pairs inotify's rename halves: the example prints them as one renamed line with both paths.
    for (const kind of KINDS) expect(m[perKindMetric('recall', kind)], kind).toBe(1);
    expect(m[perKindMetric('wrong_kind', 'rename-within')]).toBe(0);
    expect(mountsUnder(scratch)).toEqual([]);
    expect(await leftovers(scratch)).toEqual([]);
  }, 120_000);

  it('refuses a cell naming a watcher the host does not list before anything of the run exists, and exits non-zero', async () => {
    const scratch = await scratchDir(0o711);
    const r = await run(scratch, { backend: 'user', watcher: 'rm-rf', kinds: 'create', perKind: 1 });
    expect(r.code).toBe(9);
    const [only] = r.runs;
    expect(only?.state).toBe('failed');
    if (only?.state !== 'failed') return;
    expect(only.error.code).toBe('WATCHER_NOT_LISTED');
    expect(only.error.message).toContain(`no watcher called rm-rf may run on this host: ${list} (FSBENCH_WATCHERS) lists my-watchdog`);
    expect(await leftovers(scratch)).toEqual([]);
    expect(mountsUnder(scratch)).toEqual([]);
  }, 60_000);

  it('says which directory the listed watcher\'s user cannot pass, rather than timing out on a tree it cannot read', async () => {
    const scratch = await scratchDir(0o700);
    const r = await run(scratch, { backend: 'user', watcher: 'my-watchdog', kinds: 'create', perKind: 1 });
    expect(r.code).toBe(9);
    const [only] = r.runs;
    expect(only?.state).toBe('failed');
    if (only?.state !== 'failed') return;
    expect(only.error.code).toBe('TARGET_UNUSABLE');
    expect(only.error.message).toContain(`runs as uid 65534, gid 65534, which cannot pass ${scratch} (mode 0700)`);
    expect(await leftovers(scratch)).toEqual([]);
    expect(mountsUnder(scratch)).toEqual([]);
  }, 60_000);

  it('skips a cell whose backend and watcher do not go together, saying why', async () => {
    const scratch = await scratchDir(0o711);
    const r = await run(scratch, { backend: ['user', 'inotify'], watcher: ['none', 'my-watchdog'], kinds: 'create', perKind: 1 });
    const reasons = r.runs.map((x) => (x.state === 'skipped' ? `${String(x.params['backend'])}/${String(x.params['watcher'])}: ${x.reason}` : `${String(x.params['backend'])}/${String(x.params['watcher'])}: ${x.state}`)).sort();
    expect(reasons).toEqual([
      'inotify/my-watchdog: watcher applies only to backend: user (this cell\'s backend is inotify)',
      'inotify/none: ok',
      "user/my-watchdog: ok",
      "user/none: backend: user needs watcher: the name of a watcher in the host's list",
    ]);
  }, 120_000);
});
