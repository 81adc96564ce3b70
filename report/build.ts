/**
 * Runs -> the one aggregator (stats/aggregate.ts) -> the report model. Streaming: runs are
 * added one by one and summarised per cell, so memory is bounded by cells, not runs; labels,
 * notes, noise verdicts and knees are then made from the cells alone.
 */
import type { MachineFingerprint } from '../contract/fingerprint.js';
import { describeCell, varyingParams, type Cell } from '../contract/matrix.js';
import { isMeasure } from '../contract/metrics.js';
import { metricDoc, metricInfos, WORKLOADS, type WorkloadName } from '../contract/workloads/index.js';
import { CellAggregator, type AggregatableRun, type CellAggregate } from '../stats/aggregate.js';
import type { NoiseOptions } from '../stats/noise.js';
import { sweepKnees } from './knees.js';
import type { CellReport, MachineReport, MetricStats, NoiseVerdict, Report } from './model.js';
import { cellNotes, type NotelessCell } from './notes.js';

export interface ReportOptions {
  readonly title: string;
  readonly noise?: NoiseOptions;
  /** Runs arrive grouped by (matrix, machine, cell), as the coordinator's store returns them. */
  readonly grouped?: boolean;
  /** Metrics whose sorted values each cell keeps (`CellReport.samples`), for a comparison. */
  readonly samples?: readonly string[];
  /** Whole fingerprints by machine, where the runs carry only the facts aggregation keeps. */
  readonly fingerprints?: ReadonlyMap<string, MachineFingerprint>;
}

function isFingerprint(f: AggregatableRun['fingerprint']): f is MachineFingerprint {
  return 'hostname' in f && 'kernel' in f;
}

function metricStats(a: CellAggregate['metrics'][string]): MetricStats {
  return { ...a.summary, noisy: a.noise.noisy, noise: a.noise.reasons, outliers: a.noise.outliers.length };
}

/** Noisy when any judged metric is; its reasons named by metric, repeated ones once. */
function verdict(metrics: Readonly<Record<string, MetricStats>>, judged: readonly string[]): NoiseVerdict {
  const reasons: string[] = [];
  let noisy = false;
  for (const name of judged) {
    const m = metrics[name];
    if (!m) continue;
    noisy ||= m.noisy;
    for (const r of m.noise) {
      // "only 3 runs" is the same for every metric of a cell: say it once, without a name.
      const text = r.startsWith('only ') ? r : `${name}: ${r}`;
      if (!reasons.includes(text)) reasons.push(text);
    }
  }
  return { noisy, reasons };
}

/** Headline rates and durations: the metrics a verdict about spread is about (see isMeasure). */
function judgedMetrics(workload: WorkloadName): string[] {
  return WORKLOADS[workload].headline.filter((m) => {
    const doc = metricDoc(workload, m);
    return doc !== undefined && isMeasure(doc);
  });
}

export class ReportBuilder {
  private readonly aggregator: CellAggregator;
  private readonly machines = new Map<string, MachineReport>();

  constructor(private readonly options: ReportOptions) {
    this.aggregator = new CellAggregator({
      grouped: options.grouped ?? false,
      ...(options.noise ? { noise: options.noise } : {}),
      ...(options.samples ? { samples: options.samples } : {}),
    });
  }

  add(run: AggregatableRun): void {
    const f = run.fingerprint;
    if (!this.machines.has(f.machine)) {
      const whole = this.options.fingerprints?.get(f.machine) ?? (isFingerprint(f) ? f : null);
      this.machines.set(f.machine, {
        machine: f.machine,
        caches: { l1dBytes: f.cpu.l1dBytes ?? null, l2Bytes: f.cpu.l2Bytes ?? null, l3Bytes: f.cpu.l3Bytes },
        fingerprint: whole,
      });
    }
    this.aggregator.add(run);
  }

  finish(): Report {
    const aggregates = this.aggregator.finish();
    const machines = [...this.machines.values()].sort((a, b) => a.machine.localeCompare(b.machine));
    const workloads = [...new Set(aggregates.map((a) => a.workload))];
    // Labels name what varies among this report's cells of a workload; a lone cell, what differs from the defaults.
    const varying = new Map(
      workloads.map((w) => {
        const cells: Cell[] = aggregates.filter((a) => a.workload === w).map((a) => ({ id: a.cellId, workload: w, params: { ...a.params } }));
        return [w, varyingParams(cells)] as const;
      }),
    );
    const varyingOf = (w: WorkloadName) => varying.get(w) ?? [];
    const noteless: NotelessCell[] = aggregates.map((a) => {
      const metrics: Record<string, MetricStats> = {};
      for (const [name, m] of Object.entries(a.metrics)) metrics[name] = metricStats(m);
      const histograms = Object.fromEntries(Object.entries(a.histograms).map(([name, h]) => [name, h.summary]));
      const samples = this.options.samples
        ? Object.fromEntries(Object.entries(a.metrics).flatMap(([name, m]) => (m.samples ? [[name, m.samples] as const] : [])))
        : undefined;
      return {
        matrix: a.matrix,
        cellId: a.cellId,
        machine: a.machine,
        workload: a.workload,
        params: a.params,
        label: describeCell({ id: a.cellId, workload: a.workload, params: { ...a.params } }, varyingOf(a.workload)),
        runs: a.ok + a.failed + a.skipped,
        ok: a.ok,
        failed: a.failed,
        skipped: a.skipped,
        problem: a.problem,
        metrics,
        histograms,
        noise: verdict(metrics, judgedMetrics(a.workload)),
        ...(samples ? { samples } : {}),
      };
    });
    const severalMachines = machines.length > 1;
    const notes: string[] = [];
    const cells: CellReport[] = noteless.map((c) => {
      const own = cellNotes(c, noteless, judgedMetrics(c.workload), this.options.noise);
      for (const n of own) notes.push(`${c.label}${severalMachines ? ` @${c.machine}` : ''}: ${n}`);
      return { ...c, notes: own };
    });
    return {
      title: this.options.title,
      metrics: workloads.map((w) => ({ workload: w, metrics: metricInfos(w) })),
      machines,
      cells,
      knees: sweepKnees(noteless, machines, varyingOf),
      notes,
    };
  }
}

export function buildReport(runs: Iterable<AggregatableRun>, options: ReportOptions): Report {
  const b = new ReportBuilder(options);
  for (const run of runs) b.add(run);
  return b.finish();
}

export async function buildReportAsync(runs: AsyncIterable<AggregatableRun> | Iterable<AggregatableRun>, options: ReportOptions): Promise<Report> {
  const b = new ReportBuilder(options);
  for await (const run of runs) b.add(run);
  return b.finish();
}
