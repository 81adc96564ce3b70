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
import type { CellParams } from '../contract/matrix.js';
import type { Histogram } from '../contract/result.js';
import type { WorkloadName } from '../contract/workloads/index.js';
import { HistogramAccumulator, summarizeHistogram, type HistogramSummary } from './histogram.js';
import { checkNoise, type NoiseOptions } from './noise.js';
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
  /** The values, sorted, for the metrics named in `AggregateOptions.samples` (tests between two sets need them). */
  readonly samples?: readonly number[];
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
  /** Each latency histogram merged over the ok runs, with percentiles read from the merge. */
  readonly histograms: Readonly<Record<string, { readonly merged: Histogram; readonly summary: HistogramSummary }>>;
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

  constructor(readonly first: AggregatableRun) {}

  add(run: AggregatableRun, metrics: readonly string[] | undefined, withHistograms: boolean): void {
    if (run.state !== 'ok') {
      if (run.state === 'failed') this.failed++;
      else this.skipped++;
      this.problem ??= run.error ? `${run.error.code}: ${run.error.message}` : `skipped: ${run.reason ?? ''}`;
      return;
    }
    this.ok++;
    const m = run.metrics ?? {};
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
    for (const [name, values] of this.values) {
      const sorted = sortedCopy(values);
      const m = summarizeSorted(sorted);
      const check = checkNoise(values, noise, { cv: m.cv, median: m.median, sorted });
      const flat = {
        n: m.n, median: m.median, mean: m.mean, stddev: m.stddev, cv: m.cv, min: m.min, max: m.max,
        ciLow: m.ciLow, ciHigh: m.ciHigh, ciLevel: m.ciLevel,
        noisy: check.noisy, noise: check.reasons, outliers: check.outliers.length,
      };
      metrics[name] = samples?.includes(name) ? { ...flat, samples: sorted } : flat;
    }
    const histograms: Record<string, { merged: Histogram; summary: HistogramSummary }> = {};
    for (const [name, acc] of this.histograms) {
      const merged = acc.toHistogram();
      histograms[name] = { merged, summary: summarizeHistogram(merged) };
    }
    const r = this.first;
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
      histograms,
    };
  }
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

export async function aggregateRunsAsync(
  runs: AsyncIterable<AggregatableRun> | Iterable<AggregatableRun>,
  options: AggregateOptions = {},
): Promise<CellAggregate[]> {
  const agg = new CellAggregator(options);
  for await (const run of runs) agg.add(run);
  return agg.finish();
}
