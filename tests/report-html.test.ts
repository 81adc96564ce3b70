/**
 * The HTML report in real headless Chromium: `fsbench report runs.jsonl --html out.html` opened
 * from the file with every request off the file refused, and `GET /v1/matrices/:id/report.html`
 * from a real coordinator and agent under the coordinator's Content-Security-Policy. Both must
 * draw the dashboard's charts, list the knees, the notes and the fingerprint, and show hostile
 * text as text.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { RunResult } from '../contract/result.js';
import type { RunningCoordinator } from '../coordinator/server.js';
import { syntheticRuns } from './fixtures/synthetic.js';
import { openBrowser, type Browser } from './helpers/browser.js';
import { useCluster } from './helpers/cluster.js';
import { freshCli, runCli, tempDir } from './helpers/local.js';

const HOSTILE = '<img src=x onerror=alert(1)>';

// Plain browser JavaScript (this project's TypeScript has no DOM types); checked by a schema here.
const CHARTS_JS = `[...document.querySelectorAll('#charts canvas')].map((canvas) => {
  const chart = Chart.getChart(canvas);
  if (!chart) return null;
  const { width, height } = canvas;
  const pixels = canvas.getContext('2d').getImageData(0, 0, width, height).data;
  let painted = 0;
  for (let i = 3; i < pixels.length; i += 4) if (pixels[i] !== 0) painted++;
  return {
    title: canvas.closest('figure').querySelector('figcaption').textContent,
    datasets: chart.data.datasets.map((d, i) => ({ label: d.label, points: d.data.length, drawn: chart.getDatasetMeta(i).data.filter((p) => Number.isFinite(p.x) && Number.isFinite(p.y)).length })),
    painted,
  };
})`;
const Charts = z.array(
  z.object({ title: z.string(), datasets: z.array(z.object({ label: z.string(), points: z.number(), drawn: z.number() })), painted: z.number() }).nullable(),
);

const PAGE_JS = `({
  ready: document.body.dataset.ready,
  images: document.querySelectorAll('img').length,
  knees: [...document.querySelectorAll('table.knees tbody tr')].map((tr) => tr.textContent),
  cpuModel: document.querySelector('table.fingerprint tr[data-field="cpu.model"] td')?.textContent ?? null,
  fields: [...document.querySelectorAll('table.fingerprint tr[data-field]')].map((tr) => tr.dataset.field),
  cells: [...document.querySelectorAll('table.cells tbody')].map((b) => ({
    label: b.querySelector('td.label').textContent,
    median: b.querySelector('tr[data-metric="eventsPerSec"] td.median')?.textContent ?? null,
    notes: [...b.querySelectorAll('tr.cell-notes li')].map((li) => li.textContent),
  })),
  description: document.querySelector('p.description')?.textContent ?? null,
})`;
const Page = z.object({
  ready: z.string(),
  images: z.number(),
  knees: z.array(z.string()),
  cpuModel: z.string().nullable(),
  fields: z.array(z.string()),
  cells: z.array(z.object({ label: z.string(), median: z.string().nullable(), notes: z.array(z.string()) })),
  description: z.string().nullable(),
});

/** A buffer sweep long enough for a knee (four points at least), 200 ms a run. */
const SWEEP = {
  workload: 'inotify',
  repetitions: 2,
  warmup: 0,
  params: { writers: 2, files: 32, duration: '200ms', latencySampling: 0, bufferBytes: ['4KiB', '16KiB', '64KiB', '256KiB'] },
};

let browser: Browser;
const dir = tempDir('fsbench-report-html-');
/** Every request the page tried that is not file://, refused. */
const offFile: string[] = [];
const dialogs: string[] = [];

async function cli(args: string[]): Promise<string> {
  const r = await runCli(args);
  if (r.code !== 0) throw new Error(`fsbench ${args.join(' ')} exited ${String(r.code)}: ${r.stderr}`);
  return r.stdout;
}

async function show(url: string): Promise<z.infer<typeof Page>> {
  browser.problems.length = 0;
  await browser.page.goto(url);
  await browser.waitFor(`['report', 'error'].includes(document.body.dataset.ready)`);
  return Page.parse(await browser.page.evaluate(PAGE_JS));
}

beforeAll(async () => {
  await freshCli();
  browser = await openBrowser();
  browser.page.on('dialog', (d) => {
    dialogs.push(d.message());
    void d.dismiss();
  });
}, 120_000);

afterAll(async () => {
  await browser.close();
  dir.remove();
});

describe('fsbench report --html', () => {
  const realRuns = path.join(dir.dir, 'real.jsonl');
  const synthetic = path.join(dir.dir, 'synthetic.jsonl');

  beforeAll(async () => {
    await browser.page.route('**/*', (route) => {
      const url = route.request().url();
      if (url.startsWith('file:')) return route.continue();
      offFile.push(url);
      return route.abort();
    });
    const matrix = path.join(dir.dir, 'sweep.json');
    await writeFile(matrix, JSON.stringify({ name: 'html-local', ...SWEEP }));
    await cli(['run', matrix, '--out', realRuns, '--no-progress', '--scratch', path.join(dir.dir, 'scratch')]);
    // A CPU model is free text a machine reports about itself: here, markup. One cell overflowed.
    const runs = syntheticRuns({
      matrix: { name: 'html-synthetic', workload: 'inotify', repetitions: 5, params: { writers: 4, files: [128, 1024], bufferBytes: [4096, 16384, 65536, 262144, 1048576, 8388608] } },
      machine: { machine: 'laptop' },
      noise: 0.01,
    }).map((r) => {
      const run = { ...r, fingerprint: { ...r.fingerprint, cpu: { ...r.fingerprint.cpu, model: HOSTILE } } };
      if (run.state === 'ok' && run.params['bufferBytes'] === 4096 && run.params['files'] === 128) return { ...run, metrics: { ...run.metrics, overflows: 7 } };
      return run;
    });
    await writeFile(synthetic, runs.map((r) => JSON.stringify(RunResult.parse(r))).join('\n') + '\n');
  }, 120_000);

  afterAll(async () => {
    await browser.page.unroute('**/*');
  });

  it('draws a real local run offline: the sweep chart, the knee and the machine', async () => {
    const out = path.join(dir.dir, 'real.html');
    await cli(['report', realRuns, '--html', out]);
    const page = await show(pathToFileURL(out).href);
    expect(page.ready).toBe('report');
    const charts = Charts.parse(await browser.page.evaluate(CHARTS_JS));
    expect(charts).toHaveLength(1);
    const [chart] = charts;
    expect(chart?.title).toContain('32 files');
    expect(chart?.datasets.map((d) => d.label)).toEqual(['events/s', 'total events', 'knee']);
    expect(chart?.datasets[0]).toMatchObject({ points: 4, drawn: 4 });
    expect(chart?.painted).toBeGreaterThan(1000);
    expect(page.knees).toHaveLength(1);
    expect(page.knees[0]).toMatch(/^\(all\)(4|16|64|256)KiB/);
    const first = RunResult.parse(JSON.parse((await readFile(realRuns, 'utf8')).split('\n')[0] ?? ''));
    expect(page.cpuModel).toBe(first.fingerprint.cpu.model);
    // Every field, nested ones as dotted rows: nothing hand-picked.
    expect(page.fields).toEqual(expect.arrayContaining(['hostname', 'kernel.release', 'cpu.l3Bytes', 'memoryBytes', 'container.inContainer', 'inotifyLimits.maxQueuedEvents', 'targetFs', 'node']));
    expect(page.cells).toHaveLength(4);
    expect(page.cells.every((c) => c.median !== null && c.median !== 'n/a')).toBe(true);
    expect(offFile).toEqual([]);
    expect(browser.problems).toEqual([]);
  });

  it('shows hostile text as text, and each cell its notes', async () => {
    const out = path.join(dir.dir, 'synthetic.html');
    await cli(['report', synthetic, '--html', out]);
    const html = await readFile(out, 'utf8');
    expect(html).not.toContain(HOSTILE);
    // Chart.js names its home page and a dependency's in its licence comment; nothing else has a URL.
    const chartJs = await readFile(path.join(path.dirname(createRequire(import.meta.url).resolve('chart.js')), 'chart.umd.min.js'), 'utf8');
    expect(html).toContain(chartJs);
    expect(html.replace(chartJs, '')).not.toMatch(/https?:|\/\/[a-z]/i);
    const page = await show(pathToFileURL(out).href);
    expect(page.ready).toBe('report');
    expect(page.cpuModel).toBe(HOSTILE);
    expect(page.images).toBe(0);
    expect(dialogs).toEqual([]);
    const charts = Charts.parse(await browser.page.evaluate(CHARTS_JS));
    expect(charts.map((c) => c?.datasets.length)).toEqual([3, 3]);
    expect(charts.every((c) => (c?.painted ?? 0) > 1000)).toBe(true);
    expect(page.knees).toHaveLength(2);
    const overflowed = page.cells.find((c) => c.label === 'files=128 bufferBytes=4KiB');
    expect(overflowed?.notes.join(' ')).toMatch(/7 IN_Q_OVERFLOW per run \(median\): the kernel dropped events/);
    expect(page.cells.find((c) => c.label === 'files=128 bufferBytes=16KiB')?.notes).toEqual([]);
    // The charts come first, then the notes, one item per kind.
    const layout = z
      .object({ chartsFirst: z.boolean(), kinds: z.array(z.string()) })
      .parse(
        await browser.page.evaluate(`({
          chartsFirst: Boolean(document.getElementById('charts-section').compareDocumentPosition(document.getElementById('notes')) & Node.DOCUMENT_POSITION_FOLLOWING),
          kinds: [...document.querySelectorAll('#notes li')].map((li) => li.dataset.kind),
        })`),
      );
    expect(layout.chartsFirst).toBe(true);
    expect(layout.kinds).toEqual(['overflow']);
    expect(offFile).toEqual([]);
    expect(browser.problems).toEqual([]);
  });

  it('writes the page to stdout with --html -, and the tables without --html', async () => {
    const file = await readFile(path.join(dir.dir, 'synthetic.html'), 'utf8');
    expect(await cli(['report', synthetic, '--html', '-'])).toBe(file);
    const table = await cli(['report', synthetic]);
    expect(table).toMatch(/^matrix html-synthetic\n/);
    expect(table).toContain('knee: the smallest bufferBytes');
    expect(table).toContain('note: files=128 bufferBytes=4KiB: 7 IN_Q_OVERFLOW per run');
    expect(await cli(['report', synthetic, '--format', 'md'])).toMatch(/^### matrix html-synthetic\n/);
  });

  it('says so under a chart that shows only the first bars', async () => {
    const many = path.join(dir.dir, 'many.jsonl');
    const runs = syntheticRuns({ matrix: { name: 'many', workload: 'noop', repetitions: 1, params: { value: Array.from({ length: 250 }, (_, i) => i + 1) } }, machine: { machine: 'laptop' } });
    await writeFile(many, runs.map((r) => JSON.stringify(r)).join('\n') + '\n');
    const out = path.join(dir.dir, 'many.html');
    await cli(['report', many, '--html', out]);
    const page = await show(pathToFileURL(out).href);
    expect(page.ready).toBe('report');
    expect(page.cells).toHaveLength(250);
    const capped = await browser.page.evaluate(`[...document.querySelectorAll('#charts figure')].map((f) => [f.dataset.capped, Chart.getChart(f.querySelector('canvas')).data.labels.length])`);
    expect(capped).toEqual([['shows only the first 200 of 250 bars', 200]]);
    expect(await browser.page.locator('#charts figcaption small.capped').innerText()).toContain('shows only the first 200 of 250 bars');
    expect(offFile).toEqual([]);
    expect(browser.problems).toEqual([]);
  });

  it('refuses a file that holds no runs', async () => {
    const bad = path.join(dir.dir, 'bad.jsonl');
    await writeFile(bad, '{"not":"a run"}\n');
    const r = await runCli(['report', bad, '--html', path.join(dir.dir, 'bad.html')]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/line 1: not a RunResult/);
  });
});

describe('GET /v1/matrices/:id/report.html', () => {
  const cluster = useCluster('report-html');
  let coordinator: RunningCoordinator & { prefix: string };
  let id = '';

  beforeAll(async () => {
    coordinator = await cluster.coordinator({ maxBody: 1024 ** 2 });
    await cluster.agent(coordinator.prefix, 'report-html-host', 'alpha', [], { heartbeat: 200, stallTimeout: 5000, stopGrace: 2000 });
    const res = await fetch(`${coordinator.url}/v1/matrices`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'html-served', description: `a matrix described as ${HOSTILE}`, ...SWEEP }),
    });
    expect(res.status).toBe(202);
    id = z.object({ id: z.string() }).parse(await res.json()).id;
    for (const end = Date.now() + 120_000; ; ) {
      const m = z.object({ state: z.string() }).loose().parse(await (await fetch(`${coordinator.url}/v1/matrices/${id}`)).json());
      if (m.state === 'done') break;
      if (Date.now() > end) throw new Error(`matrix ${id} is still ${m.state}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }, 180_000);

  it('serves the page, which renders under its CSP', async () => {
    const res = await fetch(`${coordinator.url}/v1/matrices/${id}/report.html`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('content-disposition')).toBe('inline; filename="html-served.html"');
    const csp = res.headers.get('content-security-policy') ?? '';
    expect(csp).toMatch(/(^|; )default-src 'self'/);
    expect(csp).toMatch(/script-src 'self' 'sha256-[^']+' 'sha256-[^']+'/);
    expect(csp).not.toMatch(/unsafe-inline|unsafe-eval/);
    const html = await res.text();
    expect(html).not.toContain(HOSTILE);

    const page = await show(`${coordinator.url}/v1/matrices/${id}/report.html`);
    expect(page.ready).toBe('report');
    expect(page.description).toBe(`a matrix described as ${HOSTILE}`);
    expect(page.images).toBe(0);
    expect(dialogs).toEqual([]);
    const charts = Charts.parse(await browser.page.evaluate(CHARTS_JS));
    expect(charts).toHaveLength(1);
    expect(charts[0]?.datasets[0]).toMatchObject({ label: 'events/s', points: 4, drawn: 4 });
    expect(charts[0]?.painted).toBeGreaterThan(1000);
    expect(page.knees).toHaveLength(1);
    expect(page.cpuModel).not.toBeNull();
    // A CSP violation is a console error: there is none.
    expect(browser.problems).toEqual([]);
  });

  it('answers an unknown matrix with 404 and the JSON error shape', async () => {
    const res = await fetch(`${coordinator.url}/v1/matrices/nosuchmatrix/report.html`);
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ error: { code: 'NOT_FOUND', message: 'no matrix nosuchmatrix' } });
  });

  it('needs the token when reads are token-protected', async () => {
    const guarded = await cluster.coordinator({ token: 'report-secret', readAuth: 'token' });
    const url = `${guarded.url}/v1/matrices/${id}/report.html`;
    expect((await fetch(url)).status).toBe(401);
    const withToken = await fetch(url, { headers: { authorization: 'Bearer report-secret' } });
    expect(withToken.status).toBe(404);
  });
});
