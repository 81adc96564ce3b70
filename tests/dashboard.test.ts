/**
 * The dashboard in real headless Chromium (Debian's, driven by playwright-core), served by the
 * coordinator's own app (`buildApp`, real SQLite store, real redis-server) with the dashboard,
 * compare and upload routers mounted in front of it. Matrices are stored through the upload
 * route, as a laptop's `fsbench upload` would.
 */
import { generateKeyPairSync } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import express from 'express';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { writeStatus } from '../queue/registry.js';
import { JobSigner } from '../queue/signing.js';
import { expandMatrix, parseMatrix, type MatrixInput } from '../contract/matrix.js';
import type { RunResult } from '../contract/result.js';
import { syntheticFingerprint, syntheticRuns } from './fixtures/synthetic.js';
import { buildApp } from '../coordinator/app.js';
import { Dispatcher, ProgressHub } from '../coordinator/matrices/index.js';
import { dashboardRouter } from '../coordinator/routes/index.js';
import { Store } from '../coordinator/store/index.js';
import { startRedis, uniquePrefix, type TestRedis } from './fixtures/redis-server.js';
import { openBrowser, type Browser } from './helpers/browser.js';
import { freshCli, runCli } from './helpers/local.js';
import { announcementOf, loadOrCreateAgentKey } from '../agent/identity.js';
import { Enrollment } from '../coordinator/enrollment/index.js';
import { agentKeysKey } from '../queue/keys.js';

const MiB = 1024 ** 2;

// Code evaluated in the page is plain browser JavaScript in strings (this project's TypeScript
// has no DOM types); what it returns is checked by a schema here.
const SWEEP_CHARTS_JS = `[...document.querySelectorAll('.charts canvas')].map((canvas) => {
  const chart = Chart.getChart(canvas);
  if (!chart) return null;
  const figure = canvas.closest('figure');
  return {
    files: figure.dataset.files,
    title: figure.querySelector('figcaption').textContent,
    datasets: chart.data.datasets.map((d, i) => ({
      label: d.label,
      axis: d.yAxisID ?? null,
      points: d.data.length,
      drawn: chart.getDatasetMeta(i).data.filter((p) => Number.isFinite(p.x) && Number.isFinite(p.y)).length,
      xs: d.data.map((p) => p.x),
    })),
    scales: Object.fromEntries(Object.entries(chart.scales).map(([k, s]) => [k, s.type + '/' + s.position])),
    markers: (chart.options.plugins.fsbenchMarkers?.lines ?? []).map((l) => l.label),
  };
})`;

const SweepChart = z.object({
  files: z.string(),
  title: z.string(),
  datasets: z.array(z.object({ label: z.string(), axis: z.string().nullable(), points: z.number(), drawn: z.number(), xs: z.array(z.number()) })),
  scales: z.record(z.string(), z.string()),
  markers: z.array(z.string()),
});

const BAR_CHARTS_JS = `[...document.querySelectorAll('.charts canvas')].map((canvas) => {
  const chart = Chart.getChart(canvas);
  return chart ? { type: chart.config.type, labels: chart.data.labels, series: chart.data.datasets.map((d) => d.label + ':' + d.data.length) } : null;
})`;

const deltaSelector = (label: string) => `table.compare-rows tbody tr[data-metric="eventsPerSec"][data-label="${label}"] td.delta`;
const colorOf = (label: string) => `getComputedStyle(document.querySelector('${deltaSelector(label)}')).color`;

/** Each Markdown table's rows, unescaped, by the heading above it ('' for none). */
function markdownTables(md: string): Map<string, string[][]> {
  const out = new Map<string, string[][]>();
  let heading = '';
  let rows: string[][] | null = null;
  for (const line of md.split('\n')) {
    if (line.startsWith('#### ')) heading = unescapeMarkdown(line.slice(5));
    if (!line.startsWith('| ') && !line.startsWith('|-') && !line.startsWith('|---')) {
      rows = null;
      continue;
    }
    if (rows === null) {
      // The header row; its separator follows.
      rows = [];
      out.set(heading, rows);
      heading = '';
      continue;
    }
    if (/^\|[-:|]+\|$/.test(line)) continue;
    rows.push(line.slice(2, -2).split(' | ').map(unescapeMarkdown));
  }
  return out;
}

const unescapeMarkdown = (s: string) => s.replace(/\\(.)/g, '$1');

/** Every data row's cell texts under a selector (browser JavaScript; checked by a schema here). */
const ROWS_JS = (selector: string) => `[...document.querySelectorAll('${selector}')].map((tr) => [...tr.children].map((td) => td.textContent))`;

/** What the HTML report and the dashboard show of a matrix: the cell rows, the knee rows and the notes. */
const SHOWN_JS = `({
  cells: ${ROWS_JS('table.cells tbody tr:not(.cell-notes)')},
  knees: ${ROWS_JS('table.knees tbody tr')},
  notes: [...document.querySelectorAll('ul.report-notes li')].map((li) => li.textContent),
})`;
const Shown = z.object({ cells: z.array(z.array(z.string())), knees: z.array(z.array(z.string())), notes: z.array(z.string()) });

const sweep: MatrixInput = {
  name: 'buffer-sweep',
  workload: 'inotify',
  repetitions: 5,
  params: { writers: 128, files: [128, 1024], bufferBytes: Array.from({ length: 16 }, (_, i) => 1024 * 2 ** i) },
};
const saturation: MatrixInput = {
  name: 'saturation',
  workload: 'inotify',
  repetitions: 5,
  params: { writers: 128, files: 1024, bufferBytes: ['8MiB', '16MiB', '32MiB'], maxQueuedEvents: [16384, 1048576] },
};
const metadata: MatrixInput = {
  name: 'inode-sizes',
  workload: 'metadata',
  repetitions: 5,
  params: { fs: 'xfs', inodeSize: [512, 2048], mountOptions: ['', 'inode32'] },
};

describe('GET /openapi.json and the static files', () => {
  const app = express().use(dashboardRouter());
  let server: Server;
  let base = '';
  beforeAll(async () => {
    server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => {
    server.close();
  });

  it('describes the API with schemas generated from the zod contract', async () => {
    const doc = (await (await fetch(`${base}/openapi.json`)).json()) as {
      openapi: string;
      paths: Record<string, unknown>;
      components: { schemas: Record<string, { oneOf?: unknown[]; properties?: Record<string, unknown> }> };
    };
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(['/v1/matrices', '/v1/matrices/{id}/results', '/v1/compare', '/v1/results', '/metrics']));
    expect(doc.components.schemas['RunResult']?.oneOf).toHaveLength(3);
    expect(Object.keys(doc.components.schemas['MachineFingerprint']?.properties ?? {})).toContain('cpu');
    expect(Object.keys(doc.components.schemas['InotifyMetrics']?.properties ?? {})).toContain('eventsPerSec');
    expect(Object.keys(doc.components.schemas['CompareReport']?.properties ?? {})).toEqual(expect.arrayContaining(['rows', 'summary', 'notes']));
    expect(Object.keys(doc.components.schemas['Report']?.properties ?? {})).toEqual(expect.arrayContaining(['cells', 'knees', 'notes', 'metrics', 'machines']));
  });

  it('serves the page, its bundled script and Chart.js, and nothing else', async () => {
    const page = await fetch(`${base}/`);
    expect(page.headers.get('content-type')).toContain('text/html');
    expect(await page.text()).toContain('<script type="module" src="/app.js"></script>');
    // The dashboard's TypeScript, bundled by esbuild with the report's exporters and chart choice.
    const app = await fetch(`${base}/app.js`);
    expect(app.headers.get('content-type')).toContain('javascript');
    expect((await app.text()).length).toBeGreaterThan(10_000);
    const chart = await fetch(`${base}/vendor/chart.umd.min.js`);
    expect(chart.status).toBe(200);
    expect((await chart.text()).length).toBeGreaterThan(100_000);
    for (const other of ['/app.ts', '/dom.ts', '/tsconfig.json', '/lib/report/format.js', '/lib/host/native.js', '/lib/../package.json', '/eslint.config.js']) {
      expect((await fetch(`${base}${other}`)).status).toBe(404);
    }
  });
});

// No skipping: without Chromium these tests fail and say what to install (`npm test` does it first, in scripts/prepare-host.sh).
describe('dashboard in headless Chromium', () => {
  let redis: TestRedis;
  let client: Redis;
  let store: Store;
  let hub: ProgressHub;
  let server: Server;
  let base = '';
  let browser: Browser;
  const ids: Record<string, string> = {};
  const page = () => browser.page;
  const problems = () => browser.problems;
  const open = (hash: string) => browser.open(base, hash);

  async function upload(runs: RunResult[]): Promise<string> {
    const res = await fetch(`${base}/v1/results`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-ndjson' },
      body: runs.map((r) => JSON.stringify(r)).join('\n'),
    });
    expect(res.status).toBe(201);
    const body = (await res.json()) as { matrices: { id: string }[] };
    return body.matrices[0]?.id ?? '';
  }

  beforeAll(async () => {
    redis = await startRedis();
    client = new Redis(redis.url);
    const prefix = uniquePrefix('dashboard');
    store = Store.open(':memory:');
    hub = new ProgressHub(store);
    const signer = new JobSigner(generateKeyPairSync('ed25519').privateKey);
    // Two agent keys: laptop's enrolled by approval, newbox's waiting.
    const enrollment = new Enrollment({ store, redis: client, prefix, signer, log: () => undefined, reportKey: generateKeyPairSync('x25519').privateKey });
    for (const [hostId, machine] of [['host-1', 'laptop'], ['host-2', 'newbox']] as const) {
      const dir = await mkdtemp(path.join(os.tmpdir(), 'fsbench-dashboard-key-'));
      const identity = await loadOrCreateAgentKey(dir);
      await rm(dir, { recursive: true, force: true });
      await client.hset(agentKeysKey(prefix), identity.fingerprint, announcementOf(identity, hostId, machine, []));
    }
    await enrollment.approve('laptop');
    const coordinator = buildApp({
      store,
      dispatcher: new Dispatcher(client, prefix, 3, 200_000, signer, (jobs) => {
        store.issued.record(jobs);
      }),
      enrollment,
      hub,
      redis: client,
      prefix,
      auth: { token: undefined, readAuth: 'open' },
      limits: { maxBody: 16 * MiB, maxRuns: 100_000, maxDuration: 86_400_000, maxQueued: 200_000 },
      log: () => undefined,
    });
    // The coordinator's own app serves the dashboard, /v1/compare and /v1/results.
    server = coordinator.listen(0, '127.0.0.1');
    await once(server, 'listening');
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

    ids['laptop'] = await upload(syntheticRuns({ matrix: sweep, machine: { machine: 'laptop', l3Bytes: 8 * MiB }, seed: 1, noise: 0.01 }));
    // The server is 25% faster with buffers up to 4 KiB and the same elsewhere.
    ids['server'] = await upload(
      syntheticRuns({
        matrix: sweep,
        machine: { machine: 'server', l3Bytes: 8 * MiB },
        seed: 2,
        noise: 0.01,
        effect: (c) => (Number(c.params['bufferBytes']) <= 4096 ? 1.25 : 1),
      }),
    );
    ids['saturation'] = await upload(syntheticRuns({ matrix: saturation, machine: { machine: 'laptop' }, seed: 3 }));
    ids['metadata'] = await upload(syntheticRuns({ matrix: metadata, machine: { machine: 'laptop' }, seed: 4 }));
    const now = new Date().toISOString();
    await writeStatus(client, prefix, {
      agentId: 'agent-1',
      hostId: 'host-1',
      machine: 'laptop',
      labels: ['ssd'],
      pid: 1234,
      startedAt: now,
      lastHeartbeat: now,
      ttlMs: 600_000,
      holdsHostLock: false,
      currentRun: null,
      runsDone: 42,
      warmupsDone: 3,
      fingerprint: syntheticFingerprint({ machine: 'laptop', l3Bytes: 8 * MiB }),
    });

    browser = await openBrowser();
  }, 120_000);

  afterAll(async () => {
    await browser.close();
    await new Promise((resolve) => server.close(resolve));
    client.disconnect();
    store.close();
    await redis.stop();
  });

  it('loads the matrices and agents without console errors', async () => {
    await open('#/');
    expect(await page().locator('table.matrices tbody tr').count()).toBe(4);
    expect(await page().locator('section.agents tbody tr').count()).toBe(1);
    const agent = await page().locator('section.agents tbody tr').innerText();
    expect(agent).toContain('Synthetic CPU');
    expect(agent).toContain('8MiB');
    // The agent keys: which host is enrolled, which waits, and how to approve it.
    const keys = await page().locator('section.agent-keys tbody tr').allInnerTexts();
    expect(keys).toHaveLength(2);
    expect(keys.find((k) => k.includes('laptop'))).toContain('enrolled (approval)');
    expect(keys.find((k) => k.includes('newbox'))).toContain('waiting for approval');
    expect(await page().locator('section.agent-keys h2').innerText()).toBe('Agent keys (1 enrolled, 1 waiting)');
    expect(await page().locator('section.agent-keys p').innerText()).toContain('fsbench agents approve');
    expect(problems()).toEqual([]);
  });

  it("draws a stored matrix like seed 000's figures, with every data point and the L3 line", async () => {
    await open(`#/matrix/${ids['laptop'] ?? ''}`);
    await page().screenshot({ path: path.join(os.tmpdir(), 'fsbench-dashboard-matrix.png'), fullPage: true });
    const charts = z.array(SweepChart.nullable()).parse(await page().evaluate(SWEEP_CHARTS_JS));
    expect(charts.map((c) => c?.files)).toEqual(['128', '1024']);
    for (const c of charts) {
      if (!c) throw new Error('a canvas without a chart');
      expect(c.title).toContain('(L3 8MiB)');
      const [throughput, events, knee] = c.datasets;
      expect(throughput).toMatchObject({ label: 'events/s', axis: 'y', points: 16, drawn: 16 });
      expect(throughput?.xs).toEqual(Array.from({ length: 16 }, (_, i) => 10 + i)); // log2(1 KiB) .. log2(32 MiB)
      expect(events).toMatchObject({ label: 'total events', axis: 'y1', points: 16, drawn: 16 });
      expect(knee).toMatchObject({ label: 'knee', points: 1, drawn: 1 });
      expect(c.scales).toMatchObject({ x: 'linear/bottom', y: 'linear/left', y1: 'linear/right' });
      expect(c.markers).toEqual(['L3 8MiB']);
    }
    expect(await page().locator('main').innerText()).not.toMatch(/^null$/m);
    const kneeRows = await page().locator('table.knees tbody tr').allInnerTexts();
    expect(kneeRows).toHaveLength(2);
    expect(kneeRows[0]).toMatch(/^files=128\s+(2|4)MiB\s/);
    expect(problems()).toEqual([]);
  });

  it('draws bars for the saturation benchmark and phases for the metadata workload', async () => {
    await open(`#/matrix/${ids['saturation'] ?? ''}`);
    const bars = await page().evaluate(BAR_CHARTS_JS);
    expect(bars).toEqual([{ type: 'bar', labels: ['8MiB', '16MiB', '32MiB'], series: ['maxQueuedEvents=16384:3', 'maxQueuedEvents=1048576:3'] }]);

    await open(`#/matrix/${ids['metadata'] ?? ''}`);
    const phases = (await page().evaluate<unknown[]>(BAR_CHARTS_JS))[0];
    expect(phases).toMatchObject({
      type: 'bar',
      labels: ['create', 'readByDir', 'readInterleaved', 'stat', 'unlink'],
      series: ['inodeSize=512B mountOptions=none:5', 'inodeSize=512B mountOptions=inode32:5', 'inodeSize=2KiB mountOptions=none:5', 'inodeSize=2KiB mountOptions=inode32:5'],
    });
    expect(problems()).toEqual([]);
  });

  it('shows a significant and a not-significant delta in the compare view', async () => {
    await open(`#/compare?baseline=${ids['laptop'] ?? ''}&candidate=${ids['server'] ?? ''}&metric=eventsPerSec`);
    await page().screenshot({ path: path.join(os.tmpdir(), 'fsbench-dashboard-compare.png'), fullPage: true });
    const row = (label: string) => page().locator(deltaSelector(label));
    const significant = row('files=128 bufferBytes=1KiB');
    expect(await significant.getAttribute('class')).toContain('sig-better');
    expect(await page().locator('table.compare-rows tbody tr[data-label="files=128 bufferBytes=1KiB"]').getAttribute('data-verdict')).toBe('better');
    expect(await significant.innerText()).toMatch(/^\+2\d\.\d\d%$/);
    const color = await page().evaluate(colorOf('files=128 bufferBytes=1KiB'));
    expect(color).toBe('rgb(21, 128, 61)');

    const flat = row('files=128 bufferBytes=1MiB');
    expect(await flat.getAttribute('class')).toContain('not-sig');
    expect(await flat.innerText()).toMatch(/^~ [+-]\d\.\d\d%$/);
    expect(await page().evaluate(colorOf('files=128 bufferBytes=1MiB'))).toBe('rgb(107, 114, 128)');

    expect(await page().locator('table.compare-summary tr[data-metric="eventsPerSec"] td.geomean').innerText()).toMatch(/^\+\d\.\d\d%$/);
    expect(await page().locator('main').innerText()).not.toMatch(/^null$/m);
    expect(problems()).toEqual([]);
  });

  it('shows a sweep\'s charts first, then its notes said once per kind, each cell keeping its own in its row', async () => {
    // examples/inotify-buffer-sweep.yaml's shape: every cell on the default queue overflows with a starved reader.
    const matrix: MatrixInput = {
      name: 'sweep-notes',
      workload: 'inotify',
      repetitions: 3,
      params: { writers: 128, files: [128, 1024], bufferBytes: ['1KiB', '4KiB', '16KiB', '64KiB', '256KiB', '1MiB'], maxQueuedEvents: [16384, 1048576] },
    };
    const runs = syntheticRuns({ matrix, machine: { machine: 'laptop', l3Bytes: 8 * MiB }, seed: 5, noise: 0.01 }).map((r) =>
      r.state === 'ok' && r.params['maxQueuedEvents'] === 16384 ? { ...r, metrics: { ...r.metrics, overflows: 500 + r.repetition, readerCpuFraction: 0.2 } } : r,
    );
    const id = await upload(runs);
    await open(`#/matrix/${id}`);
    const order = z
      .object({ chartsFirst: z.boolean(), items: z.number(), kinds: z.array(z.string()), cellNotes: z.number(), cells: z.number() })
      .parse(
        await page().evaluate(`(() => {
          const charts = document.querySelector('main .charts');
          const notes = document.querySelector('main section.notes-section');
          return {
            chartsFirst: Boolean(charts && notes && (charts.compareDocumentPosition(notes) & Node.DOCUMENT_POSITION_FOLLOWING)),
            items: notes.querySelectorAll('li').length,
            kinds: [...notes.querySelectorAll('li')].map((li) => li.dataset.kind),
            cellNotes: document.querySelectorAll('table.cells tr.cell-notes li').length,
            cells: document.querySelectorAll('table.cells tbody').length,
          };
        })()`),
      );
    expect(order.cells).toBe(24);
    expect(order.chartsFirst).toBe(true);
    // 12 cells with two notes each: two items, one per kind, and 24 sentences in the cells' rows.
    expect(order.kinds).toEqual(['overflow', 'starved-reader']);
    expect(order.items).toBeLessThan(order.cells);
    expect(order.cellNotes).toBe(24);
    const texts = await page().locator('ul.report-notes li').allTextContents();
    expect(texts[0]).toBe('12 of 24 cells (maxQueuedEvents=16384): the kernel dropped events (IN_Q_OVERFLOW per run, median: 501): raise maxQueuedEvents or give the reader more CPU.');
    expect(problems()).toEqual([]);
  });

  it("shows a matrix's cells, notes and knees, and a comparison's differing facts, in the very text Markdown prints", async () => {
    // One function builds each (report/results-view.ts cellsTable, notesOf, kneesTable; compare/view.ts
    // differingFactsTable); Markdown, the HTML report and the dashboard only render them.
    // The sweep again, its 128-file cells overflowing: notes of one kind over several cells, each cell's own in its rows.
    const runs = syntheticRuns({ matrix: { ...sweep, name: 'sweep-overflowing' }, machine: { machine: 'laptop', l3Bytes: 8 * MiB }, seed: 7, noise: 0.01 }).map((r) =>
      r.state === 'ok' && r.params['files'] === 128 ? { ...r, metrics: { ...r.metrics, overflows: 40 + r.repetition } } : r,
    );
    const id = await upload(runs);
    const md = await (await fetch(`${base}/v1/matrices/${id}/results?format=md`)).text();
    const tables = markdownTables(md);
    const mdCells = tables.get('');
    const mdKnees = [...tables.entries()].find(([heading]) => heading.startsWith('knee:'))?.[1];
    expect(mdCells?.length).toBeGreaterThan(32);
    expect(mdKnees).toHaveLength(2);
    const mdNotes = md.split('\n').filter((l) => l.startsWith('- ')).map((l) => unescapeMarkdown(l.slice(2)));
    expect(mdNotes.join('\n')).toContain('16 of 32 cells (files=128): the kernel dropped events');

    await open(`#/matrix/${id}`);
    const dashboard = Shown.parse(await page().evaluate(SHOWN_JS));
    browser.problems.length = 0;
    await page().goto(`${base}/v1/matrices/${id}/report.html`);
    await browser.waitFor(`['report', 'error'].includes(document.body.dataset.ready)`);
    const report = Shown.parse(await page().evaluate(SHOWN_JS));
    for (const shown of [dashboard, report]) {
      expect(shown.cells).toEqual(mdCells);
      expect(shown.knees).toEqual(mdKnees);
      expect(shown.notes).toEqual(mdNotes);
    }
    expect(problems()).toEqual([]);

    // A machine with another L3: the facts that differ, as Markdown names them.
    const bigCache = await upload(syntheticRuns({ matrix: sweep, machine: { machine: 'bigcache', l3Bytes: 32 * MiB }, seed: 6, noise: 0.01 }));
    const query = `baseline=${id}&candidate=${bigCache}&metric=eventsPerSec`;
    const compareMd = markdownTables(await (await fetch(`${base}/v1/compare?${query}&format=md`)).text());
    const mdFacts = [...compareMd.entries()].find(([heading]) => heading.startsWith('machine facts that differ'))?.[1];
    expect(mdFacts).toContainEqual(['L3', '8MiB', '32MiB']);
    await open(`#/compare?${query}`);
    const facts = z.array(z.array(z.string())).parse(await page().evaluate(ROWS_JS('table.differing-facts tbody tr')));
    expect(facts).toEqual(mdFacts);
    expect(problems()).toEqual([]);
  });

  it('shows the gate: a slower candidate fails, naming its cells, and a looser limit passes it', async () => {
    // The laptop is the server less its 25% at small buffers: 20% slower there, the same elsewhere.
    await open(`#/gate?baseline=${ids['server'] ?? ''}&candidate=${ids['laptop'] ?? ''}&metric=eventsPerSec`);
    const text = await page().locator('#gate-result').innerText();
    expect(text).toMatch(/gate: .* -> .*: FAIL/);
    const regressions = text.split('\n').filter((l) => /^regression\s/.test(l));
    expect(regressions.length).toBeGreaterThan(0);
    for (const l of regressions) expect(l).toMatch(/bufferBytes=(1|2|4)KiB/);
    expect(text).toMatch(/REGRESSION eventsPerSec files=\d+ bufferBytes=\dKiB/);
    await open(`#/gate?baseline=${ids['server'] ?? ''}&candidate=${ids['laptop'] ?? ''}&metric=eventsPerSec&maxRegression=30%25`);
    expect(await page().locator('#gate-result').innerText()).toMatch(/gate: .* -> .*: PASS/);
    expect(problems()).toEqual([]);
  });

  it('draws history: each series over the nightly matrices, with its change point marked where the level stepped', async () => {
    const DAY = 24 * 3600 * 1000;
    for (let k = 0; k < 16; k++) {
      const runs = syntheticRuns({
        matrix: { name: 'nightly', workload: 'inotify', repetitions: 5, params: { files: [64, 128] } },
        machine: { machine: 'laptop' },
        seed: 40 + k,
        noise: 0.02,
        effect: (c) => (c.params['files'] === 128 && k >= 9 ? 1.3 : 1),
      });
      // The commit under test changed with the step: the chart marks where, beside the change point.
      const annotations = { commit: k >= 9 ? 'b7e1d09' : 'a3f5c21' };
      await upload(runs.map((r) => ({ ...r, annotations, startedAt: new Date(Date.parse(r.startedAt) + k * DAY).toISOString() })));
    }
    await open('#/history?name=nightly&metric=eventsPerSec');
    const drawn = async (selector: string) =>
      z
        .array(z.object({ series: z.string(), changes: z.string(), points: z.number(), marked: z.array(z.number()), title: z.string() }))
        .parse(
          await page().evaluate(`[...document.querySelectorAll('${selector}')].map((f) => {
            const chart = Chart.getChart(f.querySelector('canvas'));
            const marks = chart ? chart.data.datasets.find((d) => d.label === 'machine or annotations changed') : undefined;
            return {
              series: f.dataset.series, changes: f.dataset.changes, points: chart ? chart.data.datasets[0].data.filter((v) => v !== null).length : -1,
              marked: marks ? marks.data.flatMap((v, i) => (v === null ? [] : [i])) : [-1], title: f.querySelector('figcaption').innerText,
            };
          })`),
        );
    const charts = await drawn('#history-result figure');
    expect(charts.map((c) => [c.title.split('\n')[0]?.split(' laptop')[0], c.changes, c.points, c.marked])).toEqual([
      ['eventsPerSec files=128', '9', 16, [9]],
      ['eventsPerSec files=64', '', 16, [9]],
    ]);
    const table = await page().locator('#history-result table').first().innerText();
    expect(table).toMatch(/files=128\s+16\s+\S+\s+\d\.\d+%\s+\d{4}-\d\d-\d\d \+\d\d\.\d+%/);
    expect(table).toMatch(/files=64\s+16\s+\S+\s+\d\.\d+%\s+none/);
    expect(problems()).toEqual([]);

    // The same history as one HTML page that opens offline, made by `fsbench history` from this
    // coordinator: the same charts, and every point listed with the change marked.
    await freshCli();
    const dir = await mkdtemp(path.join(os.tmpdir(), 'fsbench-history-html-'));
    try {
      const file = path.join(dir, 'history.html');
      const made = await runCli(['history', 'nightly', '--metric', 'eventsPerSec', '--url', base, '--html', file]);
      expect(made.stderr).toMatch(/history\.html: 2 series, \d+ KiB/);
      expect(made.code).toBe(0);
      await page().goto(pathToFileURL(file).href);
      await browser.waitFor(`['report', 'error'].includes(document.body.dataset.ready)`);
      expect(await page().evaluate('document.body.dataset.ready')).toBe('report');
      expect(await drawn('#charts figure')).toEqual(charts);
      const points = await page().locator('main table').nth(1).innerText();
      expect(points.split('\n').filter((l) => /^\d{4}-\d\d-\d\d /.test(l))).toHaveLength(16);
      expect(points).toMatch(/change \+\d\d\.\d+%/);
      expect(problems()).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('follows a running matrix live through server-sent events', async () => {
    const spec = parseMatrix({ name: 'live', workload: 'noop', repetitions: 2, warmup: 0, params: { value: [1, 2] } });
    const cells = expandMatrix(spec);
    store.createMatrix({ id: 'live0001', spec, targets: [{ target: 'any', machine: null }], cells, expectedRuns: 4, estimatedMs: 1000 });
    store.markEnqueued('live0001');
    await open('#/');
    const row = page().locator('tr[data-matrix="live0001"]');
    expect(await row.innerText()).toMatch(/queued\s+0\/4/);
    const runs = syntheticRuns({ matrix: { name: 'live', workload: 'noop', repetitions: 2, params: { value: [1, 2] } }, machine: { machine: 'laptop' } });
    const storeSome = (from: number, to: number) => {
      store.storeRuns(runs.slice(from, to).map((result) => ({ kind: 'result' as const, matrixId: 'live0001', target: 'any', result, attempts: 1 })));
      hub.changed(['live0001']);
    };
    storeSome(0, 2);
    // The stream may connect after the first change: its first event is a full snapshot anyway.
    await browser.waitFor(`/running\\s*2\\/4/.test(document.querySelector('tr[data-matrix="live0001"]')?.textContent ?? '')`);
    storeSome(2, 4);
    await browser.waitFor(`/done\\s*4\\/4/.test(document.querySelector('tr[data-matrix="live0001"]')?.textContent ?? '')`);
    expect(problems()).toEqual([]);
  });
});
