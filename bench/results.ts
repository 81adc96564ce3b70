/**
 * `npm run bench:results`: what aggregation and compare cost over stored runs, each measured
 * beside a bare scan of the same rows (read from the store, not aggregated) in the same run.
 *
 * The rows are real: synthetic inotify runs (28 metrics each) stored through the coordinator's
 * own Store into SQLite, 10,000 cells each time:
 * - aggregation over 100,000 runs (10 per cell) and 1,000,000 runs (100 per cell): the same
 *   cells with ten times the runs, so time should grow tenfold and memory not at all;
 * - compare of two matrices of 10,000 cells x 5 runs (the headline metrics, with a
 *   Mann-Whitney test and a ratio interval per cell and metric), read as GET /v1/compare reads
 *   them (without histograms);
 * - the gate of the same two matrices: that comparison, each of its rows judged.
 * Every measurement runs in a fresh child process, so its peak RSS is its own; scan and work
 * alternate over rounds (five for the short scenarios, three for a million runs) and the median
 * of the rounds' ratios is reported. Results go to
 * bench/results/results.json.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseMatrix, type Cell } from '../contract/matrix.js';
import { compareSides, readSide } from '../compare/compare.js';
import { gate } from '../gate/gate.js';
import { ReportBuilder } from '../report/build.js';
import { storeRunSource, Store, type StoredRun } from '../coordinator/store/index.js';
import { inotifySweepCells, syntheticRunStream } from '../tests/fixtures/synthetic.js';
import { median } from '../stats/summary.js';

const HERE = fileURLToPath(import.meta.url);
const OUT_DIR = path.join(path.dirname(HERE), '..', '..', 'bench', 'results');

/** 10,000 cells of the benchmarks' inotify sweep, the most one matrix may have. */
function benchCells(): Cell[] {
  return inotifySweepCells('bench', 25);
}

function populate(store: Store, id: string, cells: readonly Cell[], repetitions: number, seed: number, effect = 1): void {
  const spec = parseMatrix({ name: id, workload: 'inotify', repetitions: Math.min(repetitions, 1000), warmup: 0 });
  store.createMatrix({ id, spec, targets: [{ target: 'any', machine: null }], cells, expectedRuns: cells.length * repetitions, estimatedMs: 0 });
  store.markEnqueued(id);
  let batch: StoredRun[] = [];
  const stream = syntheticRunStream(cells, repetitions, { matrixId: id, machine: { machine: 'bench' }, seed, noise: 0.03, effect: (c) => (c.params['files'] === 64 ? effect : 1) });
  for (const result of stream) {
    batch.push({ kind: 'result', matrixId: id, target: 'any', result, attempts: 1 });
    if (batch.length === 5000) {
      store.storeRuns(batch);
      batch = [];
    }
  }
  if (batch.length > 0) store.storeRuns(batch);
}

interface Measurement {
  readonly ms: number;
  readonly rows: number;
  readonly cells: number;
  /** Peak resident set of the process doing it (it does nothing else). */
  readonly maxRssBytes: number;
  /** The peak above the resident set before the work began: what the work itself held. */
  readonly rssGrowthBytes: number;
  /** Largest V8 heap seen, sampled every 4096 rows. */
  readonly heapPeakBytes: number;
}

/** Counts rows and samples the heap as they pass, the same for every kind of work. */
function* sampled<T>(rows: Iterable<T>, state: { rows: number; heapPeak: number }): Generator<T> {
  for (const r of rows) {
    if ((++state.rows & 4095) === 0) state.heapPeak = Math.max(state.heapPeak, process.memoryUsage().heapUsed);
    yield r;
  }
}

async function child(kind: string, dir: string, ids: string[]): Promise<Measurement> {
  const store = Store.open(dir);
  const source = storeRunSource(store);
  const state = { rows: 0, heapPeak: process.memoryUsage().heapUsed };
  const rss0 = process.memoryUsage().rss;
  const t0 = performance.now();
  let cells = 0;
  if (kind === 'scan') {
    // Read every row as the store returns it, and nothing more.
    let bytes = 0;
    for (const id of ids) for (const row of sampled(store.iterateRuns(id), state)) bytes += row.metrics?.length ?? 0;
    cells = bytes > 0 ? 0 : -1;
  } else if (kind === 'aggregate') {
    // The whole report a results request builds: statistics, noise verdicts, notes and knees.
    // As matrixReport (coordinator/reports/report-cache.ts) builds it for GET /v1/matrices/:id/results.
    const src = source(ids[0] ?? '');
    if (!src) throw new Error(`no matrix ${ids[0] ?? ''}`);
    const builder = new ReportBuilder({ title: src.id, grouped: true, cellOrder: src.cellOrder, fingerprintOf: src.fingerprintOf });
    for (const run of sampled(src.runs, state)) builder.add(run);
    cells = builder.finish().cells.length;
  } else if (kind === 'compare' || kind === 'gate') {
    // As GET /v1/compare and GET /v1/gate (coordinator/routes/compare.ts) read two stored
    // matrices: without their histograms, which neither reads.
    const [a, b] = ids.map((id) => source(id, { histograms: false }));
    const sa = await readSide('a', sampled(a?.runs ?? [], state), { grouped: true, ...(a ? { cellOrder: a.cellOrder } : {}) });
    const sb = await readSide('b', sampled(b?.runs ?? [], state), { grouped: true, ...(a ? { cellOrder: a.cellOrder } : {}) });
    const report = compareSides(sa, sb);
    // The gate judges every row of the comparison; its rows are the work's cells.
    cells = kind === 'gate' ? gate(report).rows.length : report.rows.length;
  }
  const ms = performance.now() - t0;
  store.close();
  const maxRssBytes = process.resourceUsage().maxRSS * 1024;
  return { ms, rows: state.rows, cells, maxRssBytes, rssGrowthBytes: maxRssBytes - rss0, heapPeakBytes: state.heapPeak };
}

function measure(kind: string, dir: string, ids: string[]): Measurement {
  const out = execFileSync(process.execPath, ['--max-old-space-size=4096', HERE, '--child', kind, dir, ...ids], { encoding: 'utf8', maxBuffer: 1 << 20 });
  return JSON.parse(out) as Measurement;
}

/**
 * Median time and worst memory over rounds that alternate the scan and the work, and the ratio
 * of each side-by-side pair: on a shared machine a round's scan and work see the same neighbours,
 * so the median of the pair ratios is steadier than a ratio of medians.
 */
function rounds(work: string, dir: string, ids: string[], n: number): { scan: Measurement; work: Measurement; ratios: number[] } {
  const scans: Measurement[] = [];
  const works: Measurement[] = [];
  for (let i = 0; i < n; i++) {
    scans.push(measure('scan', dir, ids));
    works.push(measure(work, dir, ids));
  }
  const pick = (ms: Measurement[]): Measurement => {
    const first = ms[0];
    if (!first) throw new Error('no measurement');
    return {
      ...first,
      ms: median(ms.map((m) => m.ms)),
      maxRssBytes: Math.max(...ms.map((m) => m.maxRssBytes)),
      rssGrowthBytes: Math.max(...ms.map((m) => m.rssGrowthBytes)),
      heapPeakBytes: Math.max(...ms.map((m) => m.heapPeakBytes)),
    };
  };
  const ratios = works.map((w, i) => w.ms / (scans[i]?.ms ?? Number.NaN));
  return { scan: pick(scans), work: pick(works), ratios };
}

const MiB = 1024 ** 2;
const fmtMs = (ms: number) => (ms >= 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${ms.toFixed(0)} ms`);
const fmtMiB = (b: number) => `${(b / MiB).toFixed(0)} MiB`;

function main(): void {
  const scale = Number(process.env['BENCH_SCALE'] ?? '1');
  const n = Number(process.env['BENCH_ROUNDS'] ?? '3');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'fsbench-bench-results-'));
  try {
    const cells = benchCells();
    const reps = (r: number) => Math.max(1, Math.round(r * scale));
    const store = Store.open(dir);
    const plan: [string, number, number, number][] = [
      ['agg100k', reps(10), 1, 1],
      ['agg1m', reps(100), 2, 1],
      ['cmpA', reps(5), 3, 1],
      ['cmpB', reps(5), 4, 1.1],
    ];
    for (const [id, r, seed, effect] of plan) {
      const t = performance.now();
      populate(store, id, cells, r, seed, effect);
      process.stderr.write(`bench:results: stored ${id}: ${cells.length} cells x ${r} runs in ${fmtMs(performance.now() - t)}\n`);
    }
    store.close();

    const scenarios = [
      // The short scenarios get more rounds: a few seconds each, where a neighbour's burst weighs most.
      { name: 'aggregate', label: `aggregation, ${cells.length * reps(10)} runs`, ids: ['agg100k'], work: 'aggregate', rounds: n + 2 },
      { name: 'aggregate', label: `aggregation, ${cells.length * reps(100)} runs`, ids: ['agg1m'], work: 'aggregate', rounds: n },
      { name: 'compare', label: `compare, 2 x ${cells.length} cells (${2 * cells.length * reps(5)} runs)`, ids: ['cmpA', 'cmpB'], work: 'compare', rounds: n + 2 },
      { name: 'gate', label: `gate, 2 x ${cells.length} cells (${2 * cells.length * reps(5)} runs)`, ids: ['cmpA', 'cmpB'], work: 'gate', rounds: n + 2 },
    ];
    const results = scenarios.map((s) => {
      const r = rounds(s.work, dir, s.ids, s.rounds);
      const ratio = median(r.ratios);
      process.stderr.write(
        `bench:results: ${s.label}: scan ${fmtMs(r.scan.ms)} (${fmtMiB(r.scan.rssGrowthBytes)}), ${s.work} ${fmtMs(r.work.ms)} (${fmtMiB(r.work.rssGrowthBytes)}): ${ratio.toFixed(2)}x (rounds ${r.ratios.map((x) => x.toFixed(2)).join(', ')})\n`,
      );
      return { ...s, rows: r.work.rows, cells: r.work.cells, scan: r.scan, result: r.work, timeRatio: ratio, roundRatios: r.ratios };
    });
    const [small, large] = results;
    const summary = small && large
      ? {
          runsGrowth: large.rows / small.rows,
          aggregationTimeGrowth: large.result.ms / small.result.ms,
          scanTimeGrowth: large.scan.ms / small.scan.ms,
          aggregationRssGrowth: large.result.rssGrowthBytes / small.result.rssGrowthBytes,
          aggregationHeapPeakGrowth: large.result.heapPeakBytes / small.result.heapPeakBytes,
          worstTimeRatio: Math.max(...results.map((x) => x.timeRatio)),
        }
      : null;
    const doc = {
      generatedAt: new Date().toISOString(),
      machine: { cpu: os.cpus()[0]?.model ?? 'unknown', cores: os.cpus().length, memoryBytes: os.totalmem(), node: process.version },
      scale,
      rounds: n,
      scenarios: results,
      summary,
    };
    mkdirSync(OUT_DIR, { recursive: true });
    writeFileSync(path.join(OUT_DIR, 'results.json'), `${JSON.stringify(doc, null, 2)}\n`);
    process.stdout.write(`${JSON.stringify(summary, null, 2)}\nwritten to ${path.join(OUT_DIR, 'results.json')}\n`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === '--child') {
  const [, , , kind = '', dir = '', ...ids] = process.argv;
  process.stdout.write(JSON.stringify(await child(kind, dir, ids)));
} else {
  main();
}
