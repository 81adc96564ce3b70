/**
 * The report cache: a matrix version's report is built once and every rendering (csv, md, html,
 * the JSON of a results page, the document) is rendered from that one build; a run stored since
 * makes a new version, built again. Counted by the builds the cache's answers report, on the
 * calling thread (the TypeScript sources) and on the compiled report thread alike, against a
 * real SQLite store.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import * as reportsHere from '../coordinator/reports/index.js';
import * as storeHere from '../coordinator/store/index.js';
import { storeMatrixIn } from './helpers/stored-matrix.js';

const DIST = path.resolve(import.meta.dirname, '..', 'dist');
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

type Reports = typeof reportsHere;
type Stores = typeof storeHere;

async function compiled(): Promise<{ reports: Reports; stores: Stores }> {
  const file = path.join(DIST, 'coordinator', 'reports', 'index.js');
  expect(existsSync(file), 'dist/ is built by `npx tsc -p tsconfig.json`').toBe(true);
  return {
    reports: (await import(pathToFileURL(file).href)) as Reports,
    stores: (await import(pathToFileURL(path.join(DIST, 'coordinator', 'store', 'index.js')).href)) as Stores,
  };
}

async function buildsOnce({ reports, stores }: { reports: Reports; stores: Stores }): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'fsbench-report-cache-'));
  dirs.push(dir);
  const store = stores.Store.open(dir);
  try {
    const held = storeMatrixIn(store, 'versions', { cells: 60, repetitions: 4, machines: ['alpha'], holdBack: 1 });
    expect(held).toHaveLength(1);
    const cache = new reports.ReportCache(store);
    const m = store.getMatrix('versions');
    if (!m) throw new Error('no matrix');
    expect(cache.reportsBuilt).toBe(0);

    // Four renderings of one unchanged version, two of them asked at once: one build.
    const [csv, md] = await Promise.all([cache.get(m, 'csv'), cache.get(m, 'md')]);
    const html = await cache.get(m, 'html');
    const fragment = await cache.get(m, 'fragment');
    expect(cache.reportsBuilt).toBe(1);
    // Each is the rendering built afresh would be.
    expect(csv.toString()).toBe(reports.renderReport(store, m, 'csv'));
    expect(md.toString()).toBe(reports.renderReport(store, m, 'md'));
    expect(html.toString()).toBe(reports.renderReport(store, m, 'html'));
    expect(JSON.parse(fragment.toString())).toEqual(JSON.parse(reports.renderReport(store, m, 'fragment')));
    // Many clients of one rendering share it, and a rendering asked for again is not rendered again.
    await Promise.all(Array.from({ length: 5 }, () => cache.get(m, 'document')));
    expect(await cache.get(m, 'csv')).toBe(csv);
    expect(cache.reportsBuilt).toBe(1);

    // A run stored since is a new version: its next rendering builds again, once.
    store.storeRuns(held);
    const next = store.getMatrix('versions');
    if (!next) throw new Error('no matrix');
    expect(next.storedRuns).toBe(m.storedRuns + 1);
    const newMd = await cache.get(next, 'md');
    expect(newMd.toString()).not.toBe(md.toString());
    await cache.get(next, 'csv');
    await cache.get(next, 'html');
    expect(cache.reportsBuilt).toBe(2);
  } finally {
    store.close();
  }
}

describe('the report cache', () => {
  it('builds a matrix version once for every rendering, on the calling thread', async () => {
    await buildsOnce({ reports: reportsHere, stores: storeHere });
  });

  it('builds a matrix version once for every rendering, on the compiled report thread', async () => {
    await buildsOnce(await compiled());
  });
});
