/**
 * Runs summarised per (matrix, machine, cell), in one pass over a stream of runs: the one
 * aggregation behind every report (`fsbench run`, `fsbench results`, the REST API, compare,
 * the dashboard and `bench:results` all read what it makes, through report/).
 *
 * Memory: when the runs arrive grouped (every run of a cell next to each other, as a store
 * returns them ordered by its (matrix, machine, cell) index), each cell is summarised and its
 * raw values dropped as soon as the next cell starts, so memory is bounded by the number of
 * cells, not of runs; with `onCell` not even the summaries are kept. Ungrouped input keeps each
 * cell's values (8 bytes per value) until `finish()`.
 */
import type { Interference, InterferenceFlag } from '../contract/interference.js';
import type { CellParams } from '../contract/matrix.js';
import type { Histogram } from '../contract/result.js';
import { WORKLOADS, type WorkloadName } from '../contract/workloads/index.js';
import { HistogramAccumulator, summarizeHistogram, type HistogramSummary } from './histogram.js';
import { checkNoise, type NoiseOptions } from './noise.js';
import { outlierIndexes } from './outliers.js';
import { sortedCopy, summarizeSorted, type Summary } from './summary.js';

/** What aggregation reads of a run; every `RunResult` is one. */
export interface AggregatableRun {
  readonly matrix: string;
  readonly cellId: string;
  readonly workload: WorkloadName;
  readonly params: Readonly<CellParams>;
  readonly state: 'ok' | 'failed' | 'skipped';
  readonly fingerprint: MachineFacts;
  readonly metrics?: Readonly<Record<string, number | null>>;
  readonly histograms?: Readonly<Record<string, Histogram>>;
  readonly error?: { readonly code: string; readonly message: string };
  readonly reason?: string;
  /** What else the machine did during the run; absent from runs of versions that did not measure it. */
  readonly interference?: RunInterference;
  /** How the run was made (an ok run's `info`): aggregation reads the precision its cell was run to. */
  readonly info?: Readonly<Record<string, string | number | boolean | null>>;
}

/** The precision a cell was run to under `repetitions: auto` (its runs' `info`). */
export interface CellPrecision {
  readonly metric: string;
  readonly target: number;
}

/** What aggregation reads of a run's interference. */
export type RunInterference = Pick<Interference, 'stealFraction' | 'outsideCpuFraction' | 'flagged'>;

/** How strongly a headline metric follows the interference across a cell's runs. */
export interface InterferenceCorrelation {
  /** The interference measure it follows more closely. */
  readonly with: 'outsideCpu' | 'steal';
  /** Spearman's rank correlation between the metric and that measure, over `n` runs. */
  readonly rho: number;
  readonly n: number;
}

/**
 * A cell's interference, summarised over its ok runs that measured it: how many crossed their
 * thresholds and by how much, and whether its headline metrics move with it. The per-run
 * values it is made from are dropped with the cell's other values.
 */
export interface CellInterference {
  /** Ok runs that carried interference. */
  readonly runs: number;
  /** Runs flagged for anything, for steal, for outside CPU. */
  readonly flagged: number;
  readonly flaggedSteal: number;
  readonly flaggedOutsideCpu: number;
  /** The largest steal fraction and outside CPU (in CPUs) among the runs flagged for them; null when none was. */
  readonly maxSteal: number | null;
  readonly maxOutsideCpu: number | null;
  /** Per headline metric, its stronger rank correlation with outside CPU or steal; absent where neither varies. */
  readonly correlations: Readonly<Record<string, InterferenceCorrelation>>;
  /** Headline metrics whose outliers (modified z-score) are exactly the flagged runs. */
  readonly flaggedAreOutliers: readonly string[];
}

/** What aggregation keeps of a run's fingerprint: its machine, and the caches a sweep's knee is set against. */
export interface MachineFacts {
  readonly machine: string;
  readonly cpu: { readonly l1dBytes?: number | null; readonly l2Bytes?: number | null; readonly l3Bytes: number | null };
}

/**
 * One metric of one cell: its summary and whether it can support a conclusion, flat (a report
 * of 10,000 cells holds 280,000 of these, and uses them as they are).
 */
export interface MetricAggregate extends Summary {
  /** Too few runs or a CV above the limit (noise.ts). */
  readonly noisy: boolean;
  /** Why it is noisy, and any outliers, in words. */
  readonly noise: readonly string[];
  /** Values with a modified z-score above 3.5. */
  readonly outliers: number;
}

export interface CellAggregate {
  readonly matrix: string;
  readonly machine: string;
  /** The machine's facts from the cell's first run. */
  readonly fingerprint: MachineFacts;
  readonly cellId: string;
  readonly workload: WorkloadName;
  readonly params: Readonly<CellParams>;
  readonly ok: number;
  readonly failed: number;
  readonly skipped: number;
  /** The first failed or skipped run's message. */
  readonly problem: string | null;
  /** Per metric over the ok runs; a metric that is null in every run (not observable) is absent. */
  readonly metrics: Readonly<Record<string, MetricAggregate>>;
  /**
   * The values, sorted, of the metrics named in `AggregateOptions.samples` (tests between two
   * sets need them); absent when none was observed. Apart from `metrics`, so that a report
   * keeps both without copying 140,000 metric objects to take them out again.
   */
  readonly samples?: Readonly<Record<string, readonly number[]>>;
  /** Each latency histogram merged over the ok runs, with percentiles read from the merge. */
  readonly histograms: Readonly<Record<string, { readonly merged: Histogram; readonly summary: HistogramSummary }>>;
  /** Present when any ok run measured interference. */
  readonly interference?: CellInterference;
  /** Present when the cell was run under `repetitions: auto`. */
  readonly precision?: CellPrecision;
}

export interface AggregateOptions {
  /** Metrics to summarise; every metric present when omitted. */
  readonly metrics?: readonly string[];
  /** Runs arrive grouped by (matrix, machine, cell): summarise each cell when the next starts. */
  readonly grouped?: boolean;
  /** Receives each cell as it is finished; `finish()` then returns nothing, so no summary is kept. */
  readonly onCell?: (cell: CellAggregate) => void;
  readonly noise?: NoiseOptions;
  /** Merge histograms too (default true). */
  readonly histograms?: boolean;
  /** Metrics whose sorted values each cell keeps, for a rank test against another set. */
  readonly samples?: readonly string[];
}

export function cellKey(run: Pick<AggregatableRun, 'matrix' | 'cellId' | 'fingerprint'>): string {
  return `${run.matrix}\u0000${run.fingerprint.machine}\u0000${run.cellId}`;
}

class CellAccumulator {
  ok = 0;
  failed = 0;
  skipped = 0;
  problem: string | null = null;
  readonly values = new Map<string, number[]>();
  readonly histograms = new Map<string, HistogramAccumulator>();
  /** Ok runs' interference, each with its headline metrics' values, for the cell's summary. */
  readonly disturbed: DisturbedRun[] = [];
  precision: CellPrecision | undefined;

  constructor(readonly first: AggregatableRun) {}

  add(run: AggregatableRun, metrics: readonly string[] | undefined, withHistograms: boolean): void {
    if (run.state !== 'ok') {
      if (run.state === 'failed') this.failed++;
      else this.skipped++;
      this.problem ??= run.error ? `${run.error.code}: ${run.error.message}` : `skipped: ${run.reason ?? ''}`;
      return;
    }
    this.ok++;
    const info = run.info;
    if (this.precision === undefined && typeof info?.['precisionMetric'] === 'string' && typeof info['precisionTarget'] === 'number') {
      this.precision = { metric: info['precisionMetric'], target: info['precisionTarget'] };
    }
    const m = run.metrics ?? {};
    if (run.interference) {
      const { stealFraction, outsideCpuFraction, flagged } = run.interference;
      this.disturbed.push({ steal: stealFraction, outside: outsideCpuFraction, flagged, values: WORKLOADS[run.workload].headline.map((h) => m[h] ?? null) });
    }
    if (metrics) {
      for (const name of metrics) this.push(name, m[name]);
    } else {
      for (const name in m) this.push(name, m[name]);
    }
    if (withHistograms && run.histograms) {
      for (const name in run.histograms) {
        const h = run.histograms[name];
        if (!h) continue;
        let acc = this.histograms.get(name);
        if (!acc) this.histograms.set(name, (acc = new HistogramAccumulator()));
        acc.add(h);
      }
    }
  }

  private push(name: string, v: number | null | undefined): void {
    if (typeof v !== 'number' || !Number.isFinite(v)) return;
    const list = this.values.get(name);
    if (list) list.push(v);
    else this.values.set(name, [v]);
  }

  finish(noise: NoiseOptions | undefined, samples: readonly string[] | undefined): CellAggregate {
    const metrics: Record<string, MetricAggregate> = {};
    let kept: Record<string, readonly number[]> | undefined;
    for (const [name, values] of this.values) {
      const sorted = sortedCopy(values);
      const m = summarizeSorted(sorted);
      const check = checkNoise(values, noise, { cv: m.cv, median: m.median, sorted });
      metrics[name] = {
        n: m.n, median: m.median, mean: m.mean, stddev: m.stddev, cv: m.cv, min: m.min, max: m.max,
        ciLow: m.ciLow, ciHigh: m.ciHigh, ciLevel: m.ciLevel,
        noisy: check.noisy, noise: check.reasons, outliers: check.outliers.length,
      };
      if (samples?.includes(name)) (kept ??= {})[name] = sorted;
    }
    const histograms: Record<string, { merged: Histogram; summary: HistogramSummary }> = {};
    for (const [name, acc] of this.histograms) {
      const merged = acc.toHistogram();
      histograms[name] = { merged, summary: summarizeHistogram(merged) };
    }
    const r = this.first;
    const interference = this.disturbed.length > 0 ? summarizeInterference(this.disturbed, WORKLOADS[r.workload].headline) : undefined;
    return {
      matrix: r.matrix,
      machine: r.fingerprint.machine,
      fingerprint: r.fingerprint,
      cellId: r.cellId,
      workload: r.workload,
      params: r.params,
      ok: this.ok,
      failed: this.failed,
      skipped: this.skipped,
      problem: this.problem,
      metrics,
      ...(kept ? { samples: kept } : {}),
      histograms,
      ...(interference ? { interference } : {}),
      ...(this.precision ? { precision: this.precision } : {}),
    };
  }
}

interface DisturbedRun {
  readonly steal: number | null;
  readonly outside: number | null;
  readonly flagged: readonly InterferenceFlag[];
  /** The workload's headline metrics, in headline order. */
  readonly values: readonly (number | null)[];
}

/** Ranks from 1, ties sharing their mean rank. */
function ranks(values: readonly number[]): number[] {
  const order = values.map((v, i) => [v, i] as const).sort((a, b) => a[0] - b[0]);
  const out = new Array<number>(values.length).fill(0);
  for (let i = 0; i < order.length; ) {
    let j = i;
    while (j + 1 < order.length && order[j + 1]?.[0] === order[i]?.[0]) j++;
    for (let k = i; k <= j; k++) out[order[k]?.[1] ?? 0] = (i + j) / 2 + 1;
    i = j + 1;
  }
  return out;
}

/** Spearman's rho (Pearson's r of the ranks, so ties are handled); null below 3 pairs or when either side is constant. */
export function spearman(xs: readonly number[], ys: readonly number[]): number | null {
  const n = Math.min(xs.length, ys.length);
  if (n < 3) return null;
  const rx = ranks(xs.slice(0, n));
  const ry = ranks(ys.slice(0, n));
  const mid = (n + 1) / 2;
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (let i = 0; i < n; i++) {
    const dx = (rx[i] ?? mid) - mid;
    const dy = (ry[i] ?? mid) - mid;
    sxy += dx * dy;
    sxx += dx * dx;
    syy += dy * dy;
  }
  return sxx === 0 || syy === 0 ? null : sxy / Math.sqrt(sxx * syy);
}

/** The metric's stronger correlation with outside CPU or with steal, over the runs that have both numbers. */
function correlationOf(runs: readonly DisturbedRun[], at: number): InterferenceCorrelation | null {
  let best: InterferenceCorrelation | null = null;
  for (const measure of ['outsideCpu', 'steal'] as const) {
    const xs: number[] = [];
    const ys: number[] = [];
    for (const r of runs) {
      const x = measure === 'outsideCpu' ? r.outside : r.steal;
      const y = r.values[at];
      if (x === null || typeof y !== 'number' || !Number.isFinite(y)) continue;
      xs.push(x);
      ys.push(y);
    }
    const rho = spearman(xs, ys);
    if (rho !== null && (best === null || Math.abs(rho) > Math.abs(best.rho))) best = { with: measure, rho, n: xs.length };
  }
  return best;
}

/** Whether the metric's outliers are exactly the flagged runs (and there are some). */
function flaggedAreOutliers(runs: readonly DisturbedRun[], at: number): boolean {
  const values: number[] = [];
  const flagged = new Set<number>();
  for (const r of runs) {
    const v = r.values[at];
    if (typeof v !== 'number' || !Number.isFinite(v)) continue;
    if (r.flagged.length > 0) flagged.add(values.length);
    values.push(v);
  }
  const outliers = outlierIndexes(values);
  return outliers.length > 0 && outliers.length === flagged.size && outliers.every((i) => flagged.has(i));
}

function maxOf(runs: readonly DisturbedRun[], flag: InterferenceFlag, value: (r: DisturbedRun) => number | null): number | null {
  let max: number | null = null;
  for (const r of runs) {
    const v = value(r);
    if (r.flagged.includes(flag) && v !== null && (max === null || v > max)) max = v;
  }
  return max;
}

function summarizeInterference(runs: readonly DisturbedRun[], headline: readonly string[]): CellInterference {
  const correlations: Record<string, InterferenceCorrelation> = {};
  const outlying: string[] = [];
  headline.forEach((metric, at) => {
    const c = correlationOf(runs, at);
    if (c) correlations[metric] = c;
    if (flaggedAreOutliers(runs, at)) outlying.push(metric);
  });
  return {
    runs: runs.length,
    flagged: runs.filter((r) => r.flagged.length > 0).length,
    flaggedSteal: runs.filter((r) => r.flagged.includes('steal')).length,
    flaggedOutsideCpu: runs.filter((r) => r.flagged.includes('outsideCpu')).length,
    maxSteal: maxOf(runs, 'steal', (r) => r.steal),
    maxOutsideCpu: maxOf(runs, 'outsideCpu', (r) => r.outside),
    correlations,
    flaggedAreOutliers: outlying,
  };
}

/** Feed runs with `add`, then `finish()`. */
export class CellAggregator {
  private readonly open = new Map<string, CellAccumulator>();
  private readonly done: CellAggregate[] = [];
  /** Keys already finished, to catch input that claims to be grouped and is not. */
  private readonly closed = new Set<string>();
  private current: string | null = null;

  constructor(private readonly options: AggregateOptions = {}) {}

  add(run: AggregatableRun): void {
    const key = cellKey(run);
    if (this.options.grouped && key !== this.current) {
      if (this.current !== null) this.close(this.current);
      if (this.closed.has(key)) {
        throw new Error(`runs are not grouped by cell: cell ${run.cellId} on ${run.fingerprint.machine} appeared again after other cells`);
      }
      this.current = key;
    }
    let acc = this.open.get(key);
    if (!acc) this.open.set(key, (acc = new CellAccumulator(run)));
    acc.add(run, this.options.metrics, this.options.histograms ?? true);
  }

  private close(key: string): void {
    const acc = this.open.get(key);
    if (!acc) return;
    this.open.delete(key);
    this.closed.add(key);
    const cell = acc.finish(this.options.noise, this.options.samples);
    if (this.options.onCell) this.options.onCell(cell);
    else this.done.push(cell);
  }

  /** Every cell, in the order its first run arrived (empty when `onCell` received them). */
  finish(): CellAggregate[] {
    for (const key of [...this.open.keys()]) this.close(key);
    this.current = null;
    return this.done;
  }
}

export function aggregateRuns(runs: Iterable<AggregatableRun>, options: AggregateOptions = {}): CellAggregate[] {
  const agg = new CellAggregator(options);
  for (const run of runs) agg.add(run);
  return agg.finish();
}
