/**
 * One results pipeline. A real matrix (an inotify buffer sweep plus one cell that overflows the
 * kernel's queue) runs on two machines through a real coordinator, real agents and a real
 * redis-server; then every way of reading it must state the same statistics and notes: the REST
 * JSON, `fsbench results` as JSON, CSV and Markdown, and the dashboard in Chromium. And the notes
 * `fsbench run` prints for a set of runs are the ones the coordinator serves for the same runs.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CoordinatorClient } from '../cli/client.js';
import { HistoryPageSchema } from '../contract/history.js';
import type { RunningCoordinator } from '../coordinator/server.js';
import { formatNumber, formatSize } from '../report/format.js';
import type { Report } from '../report/model.js';
import { ReportSchema } from '../report/schema.js';
import { openBrowser, type Browser } from './helpers/browser.js';
import { useCluster } from './helpers/cluster.js';
import { runCli } from './helpers/local.js';

/**
 * Four buffer sizes (a sweep with a knee) read while the writers write, and one cell read only
 * after they stop (`mode: drain`): 200 ms of 4 writers on 64 files fill the default 16384-event
 * queue long before the reader starts, so it overflows every time without touching the global
 * max_queued_events, which two agents on one kernel must not race on.
 */
const MATRIX = {
  name: 'pipeline',
  workload: 'inotify',
  repetitions: 3,
  warmup: 0,
  placement: 'all',
  params: { writers: 4, files: 64, duration: '200ms', latencySampling: 0, bufferBytes: ['4KiB', '16KiB', '64KiB', '256KiB'], mode: 'concurrent' },
  include: [{ mode: 'drain' }],
};
const MACHINES = ['alpha', 'beta'];

const Results = z.object({ matrix: z.object({ id: z.string(), state: z.string() }).loose(), report: ReportSchema, runs: z.array(z.unknown()) });

/** RFC 4180: quoted fields may hold commas, quotes (doubled) and line breaks; records end with CRLF. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charAt(i);
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') {
      row.push(field);
      field = '';
    } else if (c === '\r' && text[i + 1] === '\n') {
      row.push(field);
      rows.push(row);
      row = [];
      field = '';
      i++;
    } else field += c;
  }
  return rows;
}

/** Markdown's bullet list after the tables, unescaped: the notes as the reader sees them rendered. */
function markdownNotes(md: string): string[] {
  return md
    .split('\n')
    .filter((l) => l.startsWith('- '))
    .map((l) => l.slice(2).replace(/\\(.)/g, '$1'));
}

/** The Markdown table row the exporter writes for one cell and metric, from the report's numbers. */
function markdownRow(report: Report, c: Report['cells'][number], metric: string): string {
  const s = c.metrics[metric];
  const several = report.machines.length > 1;
  const ci = s && s.ciLow !== null && s.ciHigh !== null ? `${formatNumber(s.ciLow)}..${formatNumber(s.ciHigh)}` : '';
  const cells = s
    ? [c.label, ...(several ? [c.machine] : []), metric, String(s.n), formatNumber(s.median), formatNumber(s.min), formatNumber(s.max), s.cv === null ? '' : `${(s.cv * 100).toFixed(1)}%`, ci]
    : [c.label, ...(several ? [c.machine] : []), metric, '0', 'n/a', '', '', '', ''];
  return `| ${cells.join(' | ')} |`;
}

async function cli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<string> {
  const r = await runCli(args, env);
  if (r.code !== 0) throw new Error(`fsbench ${args.join(' ')} exited ${String(r.code)}: ${r.stderr}`);
  return r.stdout;
}

const cluster = useCluster('pipeline');
let coordinator: RunningCoordinator & { prefix: string };
let client: CoordinatorClient;
let browser: Browser;
let id = '';
let rest: z.infer<typeof Results>;
const HEADLINE = ['eventsPerSec', 'events', 'writes', 'overflows', 'coalescedFraction', 'readerCpuFraction', 'latencyP99Us'];

beforeAll(async () => {
  coordinator = await cluster.coordinator({ maxBody: 1024 ** 2 });
  for (const machine of MACHINES) await cluster.agent(coordinator.prefix, `pipeline-${machine}`, machine, [], { heartbeat: 200, stallTimeout: 5000, stopGrace: 2000 });
  client = new CoordinatorClient(coordinator.url);
  // Both agents must be live when the matrix is placed on `all` of them.
  for (const end = Date.now() + 10_000; ; ) {
    const { agents } = z.object({ agents: z.array(z.unknown()) }).parse(await client.json('GET', '/v1/agents'));
    if (agents.length === MACHINES.length) break;
    if (Date.now() > end) throw new Error(`${agents.length} of ${MACHINES.length} agents registered`);
    await new Promise((r) => setTimeout(r, 50));
  }
  id = z.object({ id: z.string() }).parse(await client.json('POST', '/v1/matrices', MATRIX)).id;
  for (const end = Date.now() + 150_000; ; ) {
    const m = z.object({ state: z.string() }).loose().parse(await client.json('GET', `/v1/matrices/${id}`));
    if (m.state === 'done') break;
    if (Date.now() > end) throw new Error(`matrix ${id} is still ${m.state}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  rest = Results.parse(await client.json('GET', `/v1/matrices/${id}/results`));
  browser = await openBrowser();
}, 200_000);

afterAll(async () => {
  await browser.close();
});

describe('one matrix on two machines, read every way', () => {
  it('has the cells, machines, knees and overflow notes the matrix asks for', () => {
    const { report } = rest;
    expect(report.machines.map((m) => m.machine)).toEqual(MACHINES);
    expect(report.cells).toHaveLength(5 * MACHINES.length);
    expect(report.cells.every((c) => c.ok === 3)).toBe(true);
    // One sweep per machine: the four concurrent buffers; the drain cell has no neighbours to sweep.
    expect(report.knees.map((k) => `${k.machine} ${k.label} ${k.points.length}`)).toEqual(MACHINES.map((m) => `${m} mode=concurrent 4`));
    for (const machine of MACHINES) {
      const drain = report.cells.find((c) => c.machine === machine && c.params['mode'] === 'drain');
      expect(drain?.metrics['overflows']?.median).toBeGreaterThan(0);
      expect(drain?.notes.join(' ')).toMatch(/IN_Q_OVERFLOW per run \(median\): the kernel dropped events/);
      expect(drain?.findings[0]?.kind).toBe('overflow');
      // Three runs are too few to conclude anything: every cell's verdict says so.
      expect(drain?.noise.noisy).toBe(true);
      expect(drain?.noise.reasons).toContainEqual(expect.stringMatching(/^only 3 runs \(at least 5 needed/));
    }
  });

  it('says the overflow once for both machines, naming their drain cells', () => {
    const overflow = rest.report.notes.find((g) => g.kind === 'overflow');
    const named = overflow?.cells.map((c) => `${c.label} @${c.machine}`) ?? [];
    for (const m of MACHINES) expect(named).toContain(`bufferBytes=4KiB mode=drain @${m}`);
    // The drain cells always overflow; a busy machine may add concurrent ones.
    const which = named.length === 10 ? 'all 10 cells' : `${String(named.length)} of 10 cells \\(.+\\)`;
    expect(overflow?.text).toMatch(new RegExp(`^${which}: the kernel dropped events \\(IN_Q_OVERFLOW per run, median: `));
    if (named.length === 2) expect(overflow?.text).toMatch(/^2 of 10 cells \(mode=drain\): /);
    expect(rest.report.notes.filter((g) => g.kind === 'overflow')).toHaveLength(1);
  });

  it('`fsbench results --format json` is the REST answer', async () => {
    const out = Results.parse(JSON.parse(await cli(['results', id, '--format', 'json'], { FSBENCH_URL: coordinator.url })));
    expect(out.report).toEqual(rest.report);
    expect(out.runs).toHaveLength(5 * 3 * MACHINES.length);
  });

  it('CSV holds every statistic of every cell and metric, at full precision, with the notes', async () => {
    const rows = parseCsv(await cli(['results', id, '--format', 'csv'], { FSBENCH_URL: coordinator.url }));
    const [head, ...body] = rows;
    const col = (name: string) => head?.indexOf(name) ?? -1;
    const expected = rest.report.cells.reduce((n, c) => n + Object.keys(c.metrics).length, 0);
    expect(body).toHaveLength(expected);
    for (const row of body) {
      const cell = rest.report.cells.find((c) => c.cellId === row[col('cellId')] && c.machine === row[col('machine')]);
      const stats = cell?.metrics[row[col('metric')] ?? ''];
      if (!cell || !stats) throw new Error(`a CSV row for no cell of the report: ${row.join(',')}`);
      for (const field of ['n', 'median', 'mean', 'stddev', 'cv', 'min', 'max', 'ciLow', 'ciHigh', 'ciLevel', 'outliers'] as const) {
        const text = row[col(field)] ?? '';
        expect(text === '' ? null : Number(text)).toBe(stats[field]);
      }
      expect(row[col('noisy')]).toBe(String(stats.noisy));
      expect(row[col('notes')]).toBe(cell.notes.join(' | '));
    }
  });

  it('Markdown shows each headline median as the report states it, and the same notes', async () => {
    const md = await cli(['results', id, '--format', 'md'], { FSBENCH_URL: coordinator.url });
    const lines = new Set(md.split('\n'));
    for (const c of rest.report.cells) for (const metric of HEADLINE) expect(lines).toContain(markdownRow(rest.report, c, metric));
    expect(markdownNotes(md)).toEqual(rest.report.notes.map((g) => g.text));
    // The REST Markdown is the same text.
    expect(await client.text(`/v1/matrices/${id}/results?format=md`)).toBe(md);
  });

  it('the dashboard shows the report: every headline median, the noise verdicts, the knees and the notes', async () => {
    await browser.open(coordinator.url, `#/matrix/${id}`);
    const shown = z
      .array(z.object({ cell: z.string(), machine: z.string(), label: z.string(), verdict: z.string(), medians: z.record(z.string(), z.string()) }))
      .parse(
        await browser.page.evaluate(`[...document.querySelectorAll('table.cells tbody')].map((b) => ({
          cell: b.dataset.cell, machine: b.dataset.machine, label: b.querySelector('td.label').textContent,
          verdict: b.dataset.verdict,
          medians: Object.fromEntries([...b.querySelectorAll('tr[data-metric]')].map((tr) => [tr.dataset.metric, tr.querySelector('td.median').textContent])),
        }))`),
      );
    expect(shown).toHaveLength(rest.report.cells.length);
    for (const c of rest.report.cells) {
      const row = shown.find((r) => r.cell === c.cellId && r.machine === c.machine);
      expect(row?.label).toBe(c.label);
      expect(row?.verdict).toBe(c.noise.noisy ? 'too noisy' : 'ok');
      for (const metric of HEADLINE) expect(row?.medians[metric]).toBe(formatNumber(c.metrics[metric]?.median));
    }
    const notes = await browser.page.locator('ul.report-notes li').allTextContents();
    expect(notes).toEqual(rest.report.notes.map((g) => g.text));
    const knees = await browser.page.locator('table.knees tbody tr').allInnerTexts();
    expect(knees).toHaveLength(rest.report.knees.length);
    rest.report.knees.forEach((k, i) => {
      expect(knees[i]).toContain(k.machine);
      expect(knees[i]).toContain(k.knee ? formatSize(k.knee.x) : 'n/a');
    });
    expect(browser.problems).toEqual([]);
  });
});

describe('fsbench run and the coordinator, on the same runs', () => {
  it('print the same notes: `fsbench run`, GET results and `fsbench results --format md`', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'fsbench-pipeline-local-'));
    try {
      const file = path.join(dir, 'pipeline.json');
      await writeFile(file, JSON.stringify({ ...MATRIX, placement: 'any' }));
      const out = path.join(dir, 'runs.jsonl');
      const table = await cli(['run', file, '--out', out, '--no-progress', '--machine', 'gamma', '--scratch', path.join(dir, 'scratch')]);
      const printed = table.split('\n').filter((l) => l.startsWith('note: ')).map((l) => l.slice('note: '.length));
      expect(printed.join('\n')).toMatch(/IN_Q_OVERFLOW/);

      const uploaded = await cli(['upload', out], { FSBENCH_URL: coordinator.url });
      const upId = /^matrix (\S+):/m.exec(uploaded)?.[1] ?? '';
      const served = Results.parse(await client.json('GET', `/v1/matrices/${upId}/results`));
      expect(served.report.notes.map((g) => g.text)).toEqual(printed);
      expect(markdownNotes(await cli(['results', upId, '--format', 'md'], { FSBENCH_URL: coordinator.url }))).toEqual(printed);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('carries annotations from the matrix file and --annotate through run, upload and submit into history', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'fsbench-pipeline-annotate-'));
    try {
      const file = path.join(dir, 'annotated.yaml');
      await writeFile(file, 'name: annotated\nworkload: noop\nrepetitions: 2\nwarmup: 0\nplacement: all\nannotations:\n  ticket: FS-12\nparams:\n  value: [1, 2]\n');
      const out = path.join(dir, 'runs.jsonl');
      await cli(['run', file, '--out', out, '--no-progress', '--machine', 'gamma', '--scratch', path.join(dir, 'scratch'), '--annotate', 'commit=a3f5c21']);
      const lines = (await readFile(out, 'utf8')).trim().split('\n');
      expect(lines).toHaveLength(4);
      for (const l of lines) expect(z.object({ annotations: z.record(z.string(), z.string()) }).loose().parse(JSON.parse(l)).annotations).toEqual({ ticket: 'FS-12', commit: 'a3f5c21' });

      await cli(['upload', out, '--annotate', 'build=7'], { FSBENCH_URL: coordinator.url });
      await cli(['submit', file, '--annotate', 'commit=b7e1d09', '--annotate', 'ticket=FS-13', '--wait'], { FSBENCH_URL: coordinator.url });
      const history = HistoryPageSchema.parse(await client.json('GET', '/v1/history?name=annotated&metric=value'));
      const byMachine = (m: string) => history.series.find((x) => x.machine === m && x.label === 'value=1')?.points.map((p) => p.annotations);
      expect(byMachine('gamma')).toEqual([{ ticket: 'FS-12', commit: 'a3f5c21', build: '7' }]);
      for (const m of MACHINES) expect(byMachine(m)).toEqual([{ ticket: 'FS-13', commit: 'b7e1d09' }]);

      // A name that is not one is refused before anything runs or is sent, naming the flag.
      for (const args of [['run', file, '--no-progress', '--scratch', path.join(dir, 'scratch')], ['submit', file], ['upload', out]]) {
        const bad = await runCli([...args, '--annotate', '__proto__=x'], { FSBENCH_URL: coordinator.url });
        expect([args[0], bad.code, bad.stderr]).toEqual([args[0], 2, expect.stringMatching(/--annotate __proto__=x is not NAME=VALUE .*\[CONFIG_INVALID\]/)]);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 90_000);
});
