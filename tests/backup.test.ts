/**
 * `fsbench backup` and `fsbench restore` as an operator runs them (the compiled CLI, a separate
 * process) against a results database another connection keeps writing to, as the coordinator's
 * collector does.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { expandMatrix, parseMatrix } from '../contract/matrix.js';
import { Store, type StoredRun } from '../coordinator/store/index.js';
import { syntheticRunStream } from './fixtures/synthetic.js';

const CLI = path.resolve(import.meta.dirname, '..', 'dist', 'cli', 'fsbench.js');

function cli(args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 60_000 }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof err.code === 'number' ? err.code : -1;
      resolve({ code, stdout, stderr });
    });
  });
}

/** Stores a finished matrix of `cells` cells x 3 repetitions; returns its run count. */
function storeMatrix(store: Store, id: string, cells: number, seed: number): number {
  const spec = parseMatrix({ name: id, workload: 'inotify', repetitions: 3, warmup: 0, params: { files: Array.from({ length: cells }, (_, i) => 64 * (i + 1)) } });
  const list = expandMatrix(spec);
  store.createMatrix({ id, spec, targets: [{ target: 'host-a', machine: 'a' }], cells: list, expectedRuns: list.length * 3, estimatedMs: 0 });
  store.markEnqueued(id);
  const batch: StoredRun[] = [];
  for (const result of syntheticRunStream(list, 3, { matrixId: id, machine: { machine: 'a' }, seed })) {
    batch.push({ kind: 'result', matrixId: id, target: 'host-a', result, attempts: 1 });
  }
  store.storeRuns(batch);
  return batch.length;
}

function counts(file: string): { matrices: number; runs: number; integrity: unknown } {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    const n = (t: string) => db.prepare<[], { n: number }>(`SELECT count(*) AS n FROM ${t}`).get()?.n ?? -1;
    return { matrices: n('matrices'), runs: n('runs'), integrity: db.pragma('integrity_check', { simple: true }) };
  } finally {
    db.close();
  }
}

describe('backup and restore', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'fsbench-backup-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('copies a database that is being written to into a sound file, which restores into a store that reads the same results', async () => {
    const data = path.join(dir, 'data');
    const store = Store.open(data);
    let written = storeMatrix(store, 'seed', 40, 1);
    const seedRuns = [...store.iterateRuns('seed')];
    let k = 0;
    // The collector's part: a new matrix every few milliseconds for as long as the backup takes.
    const writer = setInterval(() => {
      written += storeMatrix(store, `later-${String(k++)}`, 8, k + 1);
    }, 3);
    const file = path.join(dir, 'fsbench-backup.db');
    const out = await cli(['backup', file, '--data-dir', data]).finally(() => {
      clearInterval(writer);
    });
    expect(out.stderr).toBe('');
    expect(out.code).toBe(0);
    expect(k).toBeGreaterThan(0);
    const copy = counts(file);
    expect(copy.integrity).toBe('ok');
    expect(out.stdout).toContain(`backed up ${String(copy.matrices)} matrices and ${String(copy.runs)} runs`);
    // A point in time: the seed and whatever had committed when the copy finished, nothing torn.
    expect(copy.matrices).toBeGreaterThanOrEqual(1);
    expect(copy.runs).toBeGreaterThanOrEqual(seedRuns.length);
    expect(copy.runs).toBeLessThanOrEqual(written);
    expect((copy.runs - seedRuns.length) % 24).toBe(0);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    store.close();

    const restored = path.join(dir, 'restored');
    const r = await cli(['restore', file, '--data-dir', restored]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`restored ${String(copy.matrices)} matrices and ${String(copy.runs)} runs`);
    const back = Store.open(restored);
    try {
      expect(back.getMatrix('seed')?.spec.name).toBe('seed');
      expect([...back.iterateRuns('seed')]).toEqual(seedRuns);
    } finally {
      back.close();
    }
  }, 120_000);

  it('refuses to restore over a database a coordinator has open, and keeps the one it replaces once it is closed', async () => {
    const data = path.join(dir, 'data');
    const backupDir = path.join(dir, 'b');
    const old = Store.open(data);
    storeMatrix(old, 'old', 4, 1);
    const source = Store.open(backupDir);
    storeMatrix(source, 'new-1', 4, 2);
    storeMatrix(source, 'new-2', 4, 3);
    source.close();
    const file = path.join(dir, 'backup.db');
    expect((await cli(['backup', file, '--data-dir', backupDir])).code).toBe(0);

    const refused = await cli(['restore', file, '--data-dir', data]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/is open in a running coordinator: stop it .*\[DATABASE_IN_USE\]/);
    expect(old.getMatrix('old')).toBeDefined();
    expect(old.getMatrix('new-1')).toBeUndefined();
    old.close();

    const done = await cli(['restore', file, '--data-dir', data]);
    expect(done.code).toBe(0);
    const kept = /kept as (\S+)/.exec(done.stdout)?.[1];
    expect(kept).toBeDefined();
    expect(counts(kept ?? '').matrices).toBe(1);
    const now = Store.open(data);
    try {
      expect(now.getMatrix('old')).toBeUndefined();
      expect(now.getMatrix('new-2')).toBeDefined();
    } finally {
      now.close();
    }
  }, 120_000);

  it('never overwrites a file, and restores nothing from a file that is not an fsbench database', async () => {
    const data = path.join(dir, 'data');
    const store = Store.open(data);
    storeMatrix(store, 'kept', 4, 1);
    store.close();
    const taken = path.join(dir, 'taken.db');
    await writeFile(taken, 'mine');
    const over = await cli(['backup', taken, '--data-dir', data]);
    expect(over.code).toBe(2);
    expect(over.stderr).toMatch(/exists already.*\[CONFIG_INVALID\]/);
    expect(await readFile(taken, 'utf8')).toBe('mine');

    const nothing = await cli(['backup', path.join(dir, 'x.db'), '--data-dir', path.join(dir, 'empty')]);
    expect(nothing.code).toBe(2);
    expect(nothing.stderr).toMatch(/no results database at .*FSBENCH_DATA_DIR.*\[CONFIG_INVALID\]/);

    const text = await cli(['restore', taken, '--data-dir', data]);
    expect(text.code).toBe(2);
    expect(text.stderr).toContain('[BACKUP_INVALID]');
    const other = path.join(dir, 'other.db');
    const db = new Database(other);
    db.exec('CREATE TABLE t (x)');
    db.close();
    const foreign = await cli(['restore', other, '--data-dir', data]);
    expect(foreign.code).toBe(2);
    expect(foreign.stderr).toMatch(/not fsbench's: it has no matrices, cells, runs table.*\[BACKUP_INVALID\]/);
    expect(counts(path.join(data, 'fsbench.db')).matrices).toBe(1);
  }, 120_000);
});
