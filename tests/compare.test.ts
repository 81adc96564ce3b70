/**
 * compare: matching cells by parameters and machine, significance, formats; the CLI on real
 * `.jsonl` files (schema-valid runs written to disk) with its error messages; and the HTTP
 * routes against the coordinator's real SQLite store.
 */
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Cell } from '../contract/matrix.js';
import type { RunResult } from '../contract/result.js';
import { compareRunSets, type CompareReport } from '../compare/compare.js';
import { CSV_COLUMNS, exportableCompare } from '../compare/view.js';
import { render } from '../report/export/index.js';
import { compareRouter, resultsUploadRouter, resultsHandler } from '../coordinator/routes/index.js';
import { storeResultSink, storeRunSource, Store } from '../coordinator/store/index.js';
import { syntheticRuns } from './fixtures/synthetic.js';
import { errorHandler } from '../coordinator/http/index.js';
import { runCli, tempDir } from './helpers/local.js';

const sweep = {
  name: 'sweep',
  workload: 'inotify' as const,
  repetitions: 6,
  params: { files: [128, 256], bufferBytes: ['4KiB', '64KiB', '1MiB'] },
};
const isSmallBuffer = (c: Cell) => c.params['bufferBytes'] === 4096;

function baselineRuns(machine = 'laptop'): RunResult[] {
  return syntheticRuns({ matrix: sweep, machine: { machine }, seed: 1, noise: 0.01 });
}
/** The same matrix on a machine where small buffers are 20% faster and everything else equal. */
function candidateRuns(machine = 'server'): RunResult[] {
  return syntheticRuns({ matrix: sweep, machine: { machine }, seed: 2, noise: 0.01, effect: (c) => (isSmallBuffer(c) ? 1.2 : 1) });
}

/** Runs whose fingerprints say `governor` and an L3 of `l3Bytes`, everything else as the synthetic machine. */
function withFacts(runs: readonly RunResult[], governor: string, l3Bytes: number): RunResult[] {
  return runs.map((r) => ({
    ...r,
    fingerprint: { ...r.fingerprint, cpu: { ...r.fingerprint.cpu, l3Bytes }, facts: { ...r.fingerprint.facts, cpuGovernor: governor } },
  }));
}

function rowsOf(report: CompareReport, metric: string) {
  return report.rows.filter((r) => r.metric === metric);
}

describe('compareRunSets', () => {
  it('finds the planted difference and calls the rest not significant', async () => {
    const report = await compareRunSets(baselineRuns(), candidateRuns(), { metrics: ['eventsPerSec'] });
    expect(report.matchedBy).toBe('params');
    expect(report.notes).toContainEqual({ kind: 'compared-machines', severity: 'info', text: 'compared machines: laptop (baseline) against server (candidate)' });
    const rows = rowsOf(report, 'eventsPerSec');
    expect(rows).toHaveLength(6);
    for (const r of rows) {
      if (r.label.includes('bufferBytes=4KiB')) {
        expect(r.verdict).toBe('better');
        expect(r.pValue).toBeCloseTo(2 / 924, 12); // 6 vs 6 fully separated: exact p = 2 / C(12, 6)
        expect(r.deltaPct).toBeGreaterThan(15);
        expect(r.ci?.low).toBeGreaterThan(1.1);
      } else {
        expect(r.verdict).toBe('~');
        expect(r.ci && r.ci.low < 1 && r.ci.high > 1).toBe(true);
      }
    }
    const [summary] = report.summary;
    expect(summary).toMatchObject({ metric: 'eventsPerSec', cells: 6, significant: 2, better: 2, worse: 0 });
    // Two cells 20% up, four about even: the geometric mean is about 1.2^(2/6) = 1.063.
    expect(summary?.geomeanRatio).toBeGreaterThan(1.04);
    expect(summary?.geomeanRatio).toBeLessThan(1.09);
  });

  it('matches cells by parameters when a constant parameter differs between the sides', async () => {
    const a = syntheticRuns({ matrix: { ...sweep, params: { ...sweep.params, maxQueuedEvents: 16384 } }, machine: { machine: 'vm' }, seed: 5 });
    const b = syntheticRuns({ matrix: { ...sweep, params: { ...sweep.params, maxQueuedEvents: 1048576 } }, machine: { machine: 'vm' }, seed: 6 });
    expect(a[0]?.cellId).not.toBe(b[0]?.cellId);
    const report = await compareRunSets(a, b, { metrics: ['eventsPerSec'] });
    expect(report.differing).toEqual([{ workload: 'inotify', param: 'maxQueuedEvents', baseline: '16384', candidate: '1048576' }]);
    expect(report.rows).toHaveLength(6);
    expect(report.unmatched).toEqual({ baseline: [], candidate: [] });
    expect(report.rows[0]?.label).toBe('files=128 bufferBytes=4KiB');
  });

  it('matches by machine when the sets hold several machines, and reports the unmatched', async () => {
    const a = [...baselineRuns('m1'), ...baselineRuns('m2')];
    const b = [...candidateRuns('m1'), ...candidateRuns('m3')];
    const report = await compareRunSets(a, b, { metrics: ['eventsPerSec'] });
    expect(report.matchedBy).toBe('params+machine');
    expect(report.rows).toHaveLength(6);
    expect(report.rows.every((r) => r.baselineMachine === 'm1' && r.candidateMachine === 'm1')).toBe(true);
    expect(report.unmatched.baseline).toHaveLength(6);
    expect(report.unmatched.candidate[0]).toMatch(/@m3$/);
    // Picking one machine per side turns it into a machine-against-machine comparison.
    const picked = await compareRunSets(a, b, { metrics: ['eventsPerSec'], baselineMachine: 'm2', candidateMachine: 'm3' });
    expect(picked.matchedBy).toBe('params');
    expect(picked.rows).toHaveLength(6);
  });

  it('warns that 3 against 3 runs can never be significant', async () => {
    const few = { ...sweep, repetitions: 3 };
    const report = await compareRunSets(
      syntheticRuns({ matrix: few, machine: { machine: 'a' }, seed: 1 }),
      syntheticRuns({ matrix: few, machine: { machine: 'b' }, seed: 2, effect: () => 2 }),
      { metrics: ['eventsPerSec'] },
    );
    expect(report.rows).toHaveLength(6);
    expect(report.rows.every((r) => r.verdict === '~' && r.pValue === 0.1)).toBe(true);
    expect(report.rows[0]?.warnings).toContainEqual({ kind: 'untestable', side: null, text: '3 vs 3 runs cannot reach p < 0.05' });
    expect(report.notes.find((n) => n.kind === 'untestable')?.text).toContain('run at least 5 repetitions');
  });

  it('defaults to the headline metrics and leaves out metrics a backend cannot observe', async () => {
    const report = await compareRunSets(baselineRuns(), candidateRuns());
    expect(report.metrics).toEqual(['eventsPerSec', 'events', 'writes', 'overflows', 'coalescedFraction', 'readerCpuFraction', 'latencyP99Us']);
    expect(rowsOf(report, 'latencyP99Us').every((r) => r.verdict === '~' || r.verdict === 'n/a')).toBe(true);
  });

  it('names exactly the machine facts that differ between the sides: governor and L3', async () => {
    const a = withFacts(baselineRuns(), 'performance', 32 * 1024 ** 2);
    const b = withFacts(candidateRuns(), 'powersave', 16 * 1024 ** 2);
    const report = await compareRunSets(a, b, { metrics: ['eventsPerSec'] });
    expect(report.differingFacts).toEqual([
      { fact: 'L3', a: '32MiB', b: '16MiB' },
      { fact: 'governor', a: 'performance', b: 'powersave' },
    ]);
    const table = render('table', exportableCompare(report));
    expect(table).toMatch(/^machine facts that differ/m);
    expect(table).toMatch(/^governor\s+performance\s+powersave\s*$/m);
    expect(table).toMatch(/^L3\s+32MiB\s+16MiB\s*$/m);
    // Same facts on both sides: nothing named, no table.
    const same = await compareRunSets(baselineRuns(), candidateRuns(), { metrics: ['eventsPerSec'] });
    expect(same.differingFacts).toEqual([]);
    expect(render('table', exportableCompare(same))).not.toMatch(/machine facts that differ/);
  });

  it('names differing facts per machine when the sides hold several', async () => {
    const a = [...withFacts(baselineRuns('m1'), 'performance', 8 * 1024 ** 2), ...baselineRuns('m2')];
    const b = [...withFacts(candidateRuns('m1'), 'schedutil', 8 * 1024 ** 2), ...candidateRuns('m2')];
    const report = await compareRunSets(a, b, { metrics: ['eventsPerSec'] });
    expect(report.matchedBy).toBe('params+machine');
    expect(report.differingFacts).toEqual([{ fact: 'governor @m1', a: 'performance', b: 'schedutil' }]);
  });

  it('writes table, Markdown, CSV and JSON', async () => {
    const report = await compareRunSets(baselineRuns(), candidateRuns(), { metrics: ['eventsPerSec'] });
    const out = exportableCompare(report);
    const table = render('table', out);
    expect(table).toMatch(/eventsPerSec\s+files=128 bufferBytes=4KiB\s+\S+ ±\S+ n=6\s+\S+ ±\S+ n=6\s+\+\d+\.\d+%\s+\d\.\d+\.\.\d\.\d+\s+0\.002\s+\d+\.\d%\s+better/);
    expect(table).toMatch(/files=128 bufferBytes=64KiB .* ~ /);
    expect(table).toMatch(/^eventsPerSec\s+\+\d+\.\d+%\s+6\s+2\s+2\s+0$/m);
    const md = render('md', out);
    expect(md).toContain('| metric | cell | baseline | candidate | delta | ratio 95% CI | p | detectable |   |');
    // Rows that are ~ say how small a change they could have shown.
    expect(md).toMatch(/4 rows without a significant difference: no change larger than \d+\.\d% to \d+\.\d% \(its row's detectable\) would have gone unseen at 80% power/);
    const csv = render('csv', out).split('\r\n').filter((l) => l !== '');
    expect(csv[0]).toBe(CSV_COLUMNS.join(','));
    expect(csv).toHaveLength(7);
    const json = JSON.parse(render('json', out)) as CompareReport;
    expect(json.rows).toHaveLength(6);
  });
});

describe('fsbench compare (CLI on .jsonl files)', () => {
  const tmp = tempDir('fsbench-compare-');
  const a = path.join(tmp.dir, 'a.jsonl');
  const b = path.join(tmp.dir, 'b.jsonl');
  const bad = path.join(tmp.dir, 'bad.jsonl');
  afterAll(() => {
    tmp.remove();
  });
  beforeAll(() => {
    writeFileSync(a, baselineRuns().map((r) => JSON.stringify(r)).join('\n') + '\n');
    writeFileSync(b, candidateRuns().map((r) => JSON.stringify(r)).join('\n') + '\n');
    const [good, second] = baselineRuns();
    const broken = { ...second, fingerprint: { ...second?.fingerprint, cpu: { ...second?.fingerprint.cpu, l3Bytes: '8MiB' } } };
    writeFileSync(bad, [JSON.stringify(good), '{"matrix": "sweep", ', JSON.stringify(broken), ''].join('\n'));
  });

  const cli = runCli;

  it('compares two files and prints any format', async () => {
    const r = await cli(['compare', a, b, '--metric', 'eventsPerSec', '--format', 'json']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout) as CompareReport;
    expect(report.baseline.name).toBe(a);
    expect(report.rows.filter((x) => x.verdict === 'better')).toHaveLength(2);
    const table = await cli(['compare', a, b, '-m', 'eventsPerSec,events']);
    expect(table.code).toBe(0);
    // Both metrics' rows, then their geometric means.
    expect(table.stdout).toMatch(/^per metric: geometric mean/m);
    expect(table.stdout).toMatch(/^events\s+[+-]\d+\.\d+%\s+6\s/m);
  });

  it('prints the machine facts that differ next to the deltas, and lists them in the JSON', async () => {
    const fa = path.join(tmp.dir, 'fa.jsonl');
    const fb = path.join(tmp.dir, 'fb.jsonl');
    writeFileSync(fa, withFacts(baselineRuns(), 'performance', 32 * 1024 ** 2).map((r) => JSON.stringify(r)).join('\n') + '\n');
    writeFileSync(fb, withFacts(candidateRuns(), 'powersave', 16 * 1024 ** 2).map((r) => JSON.stringify(r)).join('\n') + '\n');
    const json = await cli(['compare', fa, fb, '-m', 'eventsPerSec', '--format', 'json']);
    expect(json.code).toBe(0);
    expect((JSON.parse(json.stdout) as CompareReport).differingFacts).toEqual([
      { fact: 'L3', a: '32MiB', b: '16MiB' },
      { fact: 'governor', a: 'performance', b: 'powersave' },
    ]);
    const table = await cli(['compare', fa, fb, '-m', 'eventsPerSec']);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^governor\s+performance\s+powersave\s*$/m);
  });

  it('names each bad line with its number and reason, without a stack trace', async () => {
    const r = await cli(['compare', bad, b]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${bad}: 2 lines are not fsbench results:`);
    expect(r.stderr).toMatch(/line 2: not JSON \(/);
    expect(r.stderr).toMatch(/line 3: not a RunResult: fingerprint\.cpu\.l3Bytes: .*number/);
    expect(r.stderr).toContain('[CONFIG_INVALID]');
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it('says so when a file cannot be read, or a metric or machine is unknown', async () => {
    const missing = await cli(['compare', path.join(tmp.dir, 'nope.jsonl'), b]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/^fsbench: cannot read results file .*nope\.jsonl: ENOENT/);
    const metric = await cli(['compare', a, b, '--metric', 'noSuchMetric']);
    expect(metric.code).toBe(2);
    expect(metric.stderr).toContain('no run has the metric noSuchMetric');
    const machine = await cli(['compare', a, b, '--baseline-machine', 'ghost']);
    expect(machine.code).toBe(2);
    expect(machine.stderr).toContain('has no runs from machine ghost (--baseline-machine)');
  });
});

describe('GET /v1/compare and POST /v1/results on the coordinator store', () => {
  const store = Store.open(':memory:');
  const app = express();
  app.use(resultsUploadRouter({ sink: storeResultSink(store) }));
  app.use(compareRouter({ source: storeRunSource(store) }));
  // The coordinator's own results answer (its matrices router needs Redis; this route does not).
  app.get('/v1/matrices/:id/results', resultsHandler(store));
  app.use(errorHandler(() => undefined));
  let server: ReturnType<typeof app.listen> | undefined;
  let base = '';
  beforeAll(async () => {
    server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => {
    server?.close();
    store.close();
  });

  const ndjson = (runs: RunResult[]) => runs.map((r) => JSON.stringify(r)).join('\n') + '\n';
  const post = (body: string, type = 'application/x-ndjson') => fetch(`${base}/v1/results`, { method: 'POST', headers: { 'content-type': type }, body });

  it('stores an uploaded file exactly once, and compares two uploads', async () => {
    const first = await post(ndjson(baselineRuns()));
    expect(first.status).toBe(201);
    const a = (await first.json()) as { stored: number; duplicates: number; matrices: { id: string }[] };
    expect(a).toMatchObject({ stored: 36, duplicates: 0 });
    const again = await post(ndjson(baselineRuns()));
    expect(again.status).toBe(200);
    expect(await again.json()).toMatchObject({ stored: 0, duplicates: 36 });

    // JSON Lines is the upload's only media type: a plain JSON body is refused and stores nothing.
    const asJson = await post(JSON.stringify({ runs: candidateRuns() }), 'application/json');
    expect(asJson.status).toBe(415);
    const second = await post(ndjson(candidateRuns()), 'application/jsonl');
    expect(second.status).toBe(201);
    const b = (await second.json()) as { matrices: { id: string }[] };
    const idA = a.matrices[0]?.id ?? '';
    const idB = b.matrices[0]?.id ?? '';

    const res = await fetch(`${base}/v1/compare?baseline=${idA}&candidate=${idB}&metric=eventsPerSec`);
    expect(res.status).toBe(200);
    const report = (await res.json()) as CompareReport;
    expect(report.rows).toHaveLength(6);
    expect(report.rows.filter((r) => r.significant).map((r) => r.label)).toEqual(['files=128 bufferBytes=4KiB', 'files=256 bufferBytes=4KiB']);
    const md = await fetch(`${base}/v1/compare?baseline=${idA}&candidate=${idB}&metric=eventsPerSec&format=md`);
    expect(md.headers.get('content-type')).toContain('text/markdown');
  });

  it('takes `fsbench upload FILE` and compares a stored matrix with a local file', async () => {
    const tmp = tempDir('fsbench-upload-');
    try {
      const file = path.join(tmp.dir, 'laptop.jsonl');
      const runs = syntheticRuns({ matrix: { ...sweep, repetitions: 40 }, machine: { machine: 'uploader' }, seed: 11 });
      writeFileSync(file, runs.map((r) => JSON.stringify(r)).join('\n') + '\n');
      const first = await runCli(['upload', file, '--url', base]);
      expect(first.stderr).toBe('');
      expect(first.code).toBe(0);
      expect(first.stdout).toMatch(/^matrix up[0-9a-f]{14}: sweep from uploader\n240 runs stored, 0 already there\n$/);
      const again = await runCli(['upload', file, '--url', base]);
      expect(again.stdout).toContain('0 runs stored, 240 already there');
      const id = /matrix (up[0-9a-f]{14})/.exec(first.stdout)?.[1] ?? '';
      const other = path.join(tmp.dir, 'server.jsonl');
      writeFileSync(other, candidateRuns().map((r) => JSON.stringify(r)).join('\n') + '\n');
      const cmp = await runCli(['compare', `matrix:${id}`, other, '--url', base, '-m', 'eventsPerSec', '-f', 'json']);
      expect(cmp.code).toBe(0);
      const report = JSON.parse(cmp.stdout) as CompareReport;
      expect(report.baseline.runs).toBe(240);
      expect(report.rows).toHaveLength(6);
      const down = await runCli(['compare', 'matrix:nope', other, '--url', base]);
      expect(down.code).toBe(5);
      expect(down.stderr).toContain('reading matrix nope: no matrix nope [NOT_FOUND]');
    } finally {
      tmp.remove();
    }
  });

  it('refuses a body with a bad line, naming it, and stores nothing', async () => {
    const runs = baselineRuns('other');
    const text = ndjson(runs).split('\n');
    text[4] = text[4]?.replace('"state":"ok"', '"state":"maybe"') ?? '';
    const res = await post(text.join('\n'));
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: string; issues: { path: string; message: string }[] } };
    expect(body.error.code).toBe('BODY_INVALID');
    expect(body.error.issues[0]?.path).toBe('line 5');
    expect(store.listMatrices(100).some((m) => m.spec.description === 'uploaded from other')).toBe(false);
  });

  it('answers 404 for an unknown matrix and 400 for a bad query', async () => {
    const missing = await fetch(`${base}/v1/compare?baseline=nope&candidate=nope2`);
    expect(missing.status).toBe(404);
    const badAlpha = await fetch(`${base}/v1/compare?baseline=x&alpha=2`);
    expect(badAlpha.status).toBe(400);
    expect(((await badAlpha.json()) as { error: { code: string } }).error.code).toBe('BODY_INVALID');
  });
});
