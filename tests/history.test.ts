/**
 * History over (simulated) time: twenty nightly matrices of one name uploaded into a real
 * coordinator store, one cell stepping up 25% from the thirteenth on, the others only noisy.
 * History finds the step at the right matrix with the right size, nothing elsewhere, marks a
 * kernel upgrade where it happened, and calls a step made of disturbed runs suspect.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Cell } from '../contract/matrix.js';
import type { RunResult } from '../contract/result.js';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { errorHandler } from '../coordinator/http/index.js';
import { HistoryPageSchema } from '../contract/history.js';
import { History } from '../coordinator/history/index.js';
import { historyRouter } from '../coordinator/routes/index.js';
import { storeResultSink, Store } from '../coordinator/store/index.js';
import { syntheticInterference, syntheticRuns } from './fixtures/synthetic.js';
import { freshCli, runCli, tempDir } from './helpers/local.js';

const DAY = 24 * 3600 * 1000;
const NIGHTS = 20;

interface Night {
  readonly effect?: (c: Cell) => number;
  readonly kernel?: string;
  /** Outside CPU use of every run of the cells it returns true for (flags them above 0.1). */
  readonly disturbed?: (c: Cell) => boolean;
  /** What `fsbench upload --annotate` adds to every run of the night. */
  readonly annotations?: Record<string, string>;
}

/** Night `k`'s runs: the same matrix name, started k days after the first. */
function night(k: number, o: Night = {}): RunResult[] {
  const runs = syntheticRuns({
    matrix: { name: 'nightly', workload: 'inotify', repetitions: 5, warmup: 0, params: { files: [64, 128, 256] } },
    machine: { machine: 'box' },
    seed: 100 + k,
    noise: 0.02,
    ...(o.effect ? { effect: o.effect } : {}),
  });
  const shift = (iso: string) => new Date(Date.parse(iso) + k * DAY).toISOString();
  return runs.map((r) => {
    const cell: Cell = { id: r.cellId, workload: r.workload, params: r.params };
    const fingerprint = o.kernel ? { ...r.fingerprint, kernel: { ...r.fingerprint.kernel, release: o.kernel } } : r.fingerprint;
    const moved = { ...r, startedAt: shift(r.startedAt), finishedAt: shift(r.finishedAt), fingerprint, ...(o.annotations ? { annotations: o.annotations } : {}) };
    return o.disturbed?.(cell) === true && moved.state === 'ok' ? { ...moved, interference: syntheticInterference(0.6) } : moved;
  });
}

describe('history', () => {
  let store: Store;
  beforeEach(() => {
    store = Store.open(':memory:');
  });
  afterEach(() => {
    store.close();
  });

  it('finds a 25% step in one cell at the matrix where it happened, with its size, and no change in the noisy others', () => {
    const sink = storeResultSink(store);
    const ids: string[] = [];
    for (let k = 0; k < NIGHTS; k++) {
      const commit = k >= 12 ? 'b7e1d09' : 'a3f5c21';
      const imported = sink.importRuns(
        night(k, { effect: (c) => (c.params['files'] === 128 && k >= 12 ? 1.25 : 1), ...(k >= 15 ? { kernel: '6.12.9' } : {}), annotations: { commit, night: String(k) } }),
      );
      expect(imported.matrices).toHaveLength(1);
      ids.push(imported.matrices[0]?.id ?? '');
    }
    const page = new History(store).series({ name: 'nightly', metric: 'eventsPerSec' });
    expect(page.series.map((s) => s.label)).toEqual(['files=128', 'files=256', 'files=64']);
    for (const s of page.series) expect(s.points).toHaveLength(NIGHTS);

    const stepped = page.series.find((s) => s.label === 'files=128');
    expect(stepped?.changes).toHaveLength(1);
    const change = stepped?.changes[0];
    expect(change?.index).toBe(12);
    expect(change?.matrixId).toBe(ids[12]);
    expect(change?.ratio).toBeGreaterThan(1.2);
    expect(change?.ratio).toBeLessThan(1.3);
    expect(change?.ratioLow).toBeGreaterThan(1.15);
    expect(change?.magnitude).toBeGreaterThan(0.2);
    expect(change?.p).toBeLessThan(0.001);
    expect(change?.suspect).toBe(false);
    for (const s of page.series.filter((x) => x.label !== 'files=128')) expect(s.changes).toEqual([]);

    // The kernel upgrade is marked at the first matrix that ran on it, and only there.
    const marked = stepped?.points.flatMap((p, i) => (p.factChanges.length > 0 ? [[i, p.factChanges]] : [])) ?? [];
    expect(marked).toEqual([[15, ['kernel: 6.1.0-synthetic -> 6.12.9']]]);
    expect(stepped?.points[15]?.kernel).toBe('6.12.9');

    // The annotations each night's upload carried, and where the commit changed: at the step, which says so.
    expect(stepped?.points[3]?.annotations).toEqual({ commit: 'a3f5c21', night: '3' });
    expect(stepped?.points[0]?.annotationChanges).toEqual([]);
    expect(stepped?.points[12]?.annotationChanges).toEqual(['commit: a3f5c21 -> b7e1d09', 'night: 11 -> 12']);
    expect(stepped?.points[13]?.annotationChanges).toEqual(['night: 12 -> 13']);
    expect(change?.why).toContain('the annotations changed: commit: a3f5c21 -> b7e1d09');

    // Each series states the smallest lasting step it would have shown: for 2% noise, a few percent,
    // well below the 25% found; the step the noisy series did not show was smaller than theirs.
    for (const s of page.series) {
      expect(s.detectable).toBeGreaterThan(0.005);
      expect(s.detectable).toBeLessThan(0.1);
    }
  });

  it("states a series' detectable step honestly: a step of twice it is found, one of a fifth is not", () => {
    const sink = storeResultSink(store);
    for (let k = 0; k < NIGHTS; k++) sink.importRuns(night(k));
    const quiet = new History(store).series({ name: 'nightly', metric: 'eventsPerSec', params: { files: 64 } }).series[0];
    const detectable = quiet?.detectable ?? Number.NaN;
    expect(quiet?.changes).toEqual([]);
    expect(detectable).toBeGreaterThan(0);
    for (const [factor, found] of [[2, 1], [0.2, 0]] as const) {
      const other = Store.open(':memory:');
      try {
        const into = storeResultSink(other);
        for (let k = 0; k < NIGHTS; k++) into.importRuns(night(k, { effect: (c) => (c.params['files'] === 64 && k >= 10 ? 1 + factor * detectable : 1) }));
        const s = new History(other).series({ name: 'nightly', metric: 'eventsPerSec', params: { files: 64 } }).series[0];
        expect([factor, s?.changes.length]).toEqual([factor, found]);
      } finally {
        other.close();
      }
    }
  });

  it('answers GET /v1/history with the same step, as JSON that follows its schema', async () => {
    const sink = storeResultSink(store);
    for (let k = 0; k < NIGHTS; k++) sink.importRuns(night(k, { effect: (c) => (c.params['files'] === 128 && k >= 12 ? 1.25 : 1) }));
    const app = express();
    app.use(historyRouter({ history: new History(store) }));
    app.use(errorHandler(() => undefined));
    const server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const { port } = server.address() as AddressInfo;
      const res = await fetch(`http://127.0.0.1:${String(port)}/v1/history?name=nightly&metric=eventsPerSec&param=files%3D128`);
      expect(res.status).toBe(200);
      const page = HistoryPageSchema.parse(await res.json());
      expect(page.series.map((x) => x.label)).toEqual(['files=128']);
      expect(page.series[0]?.changes.map((c) => c.index)).toEqual([12]);
      const bad = await fetch(`http://127.0.0.1:${String(port)}/v1/history?name=nightly&limit=100000`);
      expect(bad.status).toBe(400);
    } finally {
      server.close();
    }
  });

  it('calls a step made of disturbed runs suspect, and says why', () => {
    const sink = storeResultSink(store);
    for (let k = 0; k < NIGHTS; k++) {
      const drop = (c: Cell) => c.params['files'] === 64 && k >= 10;
      sink.importRuns(night(k, { effect: (c) => (drop(c) ? 0.7 : 1), disturbed: drop }));
    }
    const page = new History(store).series({ name: 'nightly', metric: 'eventsPerSec', params: { files: 64 } });
    expect(page.series).toHaveLength(1);
    const change = page.series[0]?.changes[0];
    expect(change?.index).toBe(10);
    expect(change?.suspect).toBe(true);
    expect(change?.why[0]).toMatch(/^matrix \S+ has 5 of 5 runs flagged for interference$/);
  });

  it('pages through series, summarising each finished matrix once', () => {
    const sink = storeResultSink(store);
    for (let k = 0; k < 4; k++) sink.importRuns(night(k));
    const history = new History(store);
    const first = history.series({ name: 'nightly', limit: 2 });
    expect(first.series).toHaveLength(2);
    expect(first.next).not.toBeNull();
    const rest = history.series({ name: 'nightly', limit: 1000, after: first.next ?? '' });
    const all = history.series({ name: 'nightly', limit: 1000 });
    expect([...first.series, ...rest.series].map((s) => s.key)).toEqual(all.series.map((s) => s.key));
    expect(rest.next).toBeNull();
    const rows = () => store.db.prepare<[], { n: number }>('SELECT count(*) AS n FROM history_series_points').get()?.n;
    const before = rows();
    sink.importRuns(night(4));
    history.series({ name: 'nightly' });
    expect(rows()).toBeGreaterThan(before ?? 0);
    expect(history.series({ name: 'nobody' }).series).toEqual([]);
  });
});

describe('fsbench history', () => {
  const dir = tempDir('fsbench-history-');
  afterAll(() => {
    dir.remove();
  });

  it('reads nightly result files and prints where each series changed', async () => {
    await freshCli();
    const files = Array.from({ length: NIGHTS }, (_, k) => {
      const file = path.join(dir.dir, `night-${String(k).padStart(2, '0')}.jsonl`);
      const runs = night(k, { effect: (c) => (c.params['files'] === 128 && k >= 12 ? 1.25 : 1) });
      writeFileSync(file, runs.map((r) => JSON.stringify(r)).join('\n') + '\n');
      return file;
    });
    const out = await runCli(['history', 'nightly', ...files, '--metric', 'eventsPerSec']);
    expect(out.stderr).toBe('');
    expect(out.code).toBe(0);
    expect(out.stdout).toMatch(/files=128 +20 +\S+ +\d\.\d+% +2026-01-13 \+2\d\.\d+% 1\.\d+\.\.1\.\d+ p=/);
    expect(out.stdout).toMatch(/files=256 +20 +\S+ +\d\.\d+% +none/);
    expect(out.stdout).toMatch(/files=64 +20 +\S+ +\d\.\d+% +none/);
    const one = await runCli(['history', 'nightly', ...files, '--metric', 'eventsPerSec', '--param', 'files=128', '--points', '--format', 'md']);
    expect(one.code).toBe(0);
    expect(one.stdout.match(/^\| 2026-01-\d\d /gm)).toHaveLength(NIGHTS);
    expect(one.stdout).toMatch(/^\| 2026-01-13 .*\| change \+2\d\.\d+% \|$/m);
    const none = await runCli(['history', 'weekly', ...files]);
    expect(none.code).toBe(5);
    expect(none.stderr).toMatch(/no finished matrix named weekly in 20 files \[NOT_FOUND\]/);
  }, 120_000);
});
