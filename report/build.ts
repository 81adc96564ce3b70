/**
 * Runs -> the one aggregator (stats/aggregate.ts) -> the report model. Streaming: runs are
 * added one by one and summarised per cell, so memory is bounded by cells, not runs; labels,
 * notes, noise verdicts and knees are then made from the cells alone.
 */
import type { MachineFingerprint } from '../contract/fingerprint.js';
import { describeCell, varyingParams, type Cell } from '../contract/matrix.js';
import { isMeasure } from '../contract/metrics.js';
import { metricDoc, metricInfos, WORKLOADS, type WorkloadName } from '../contract/workloads/index.js';
import { CellAggregator, type AggregatableRun, type CellAggregate, type CellPrecision } from '../stats/aggregate.js';
import type { NoiseOptions } from '../stats/noise.js';
import { sweepKnees } from './knees.js';
import type { CellReport, KneeReport, MachineReport, MetricStats, NoiseVerdict, NoteGroup, Report } from './model.js';
import { cellNotes, groupNotes, type NotelessCell } from './notes.js';

export interface ReportOptions {
  readonly title: string;
  readonly noise?: NoiseOptions;
  /** Runs arrive grouped by (matrix, machine, cell), as the coordinator's store returns them. */
  readonly grouped?: boolean;
  /** Cells in this order (positions by cell id; unknown ids last), then by machine; else as their runs arrived. */
  readonly cellOrder?: ReadonlyMap<string, number>;
  /** Metrics whose sorted values each cell keeps (`CellReport.samples`), for a comparison. */
  readonly samples?: readonly string[];
  /** Summarise only these metrics (a comparison of a few); every metric when omitted. */
  readonly metrics?: readonly string[];
  /**
   * A machine's whole fingerprint, where the runs carry only the facts aggregation keeps (the
   * coordinator's store); asked when the report is finished.
   */
  readonly fingerprintOf?: (machine: string) => MachineFingerprint | null;
  /**
   * The precision every cell was run to under `repetitions: auto`, where the runs do not say
   * (the coordinator's store keeps runs' info apart; the matrix's spec says it).
   */
  readonly precision?: CellPrecision | undefined;
}

function isFingerprint(f: AggregatableRun['fingerprint']): f is MachineFingerprint {
  return 'hostname' in f && 'kernel' in f;
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

/** A cell in report form as the aggregator finished it, before its label, noise verdict and notes. */
export type SummarizedCell = Omit<NotelessCell, 'label' | 'noise'>;

/** The machines, and the cells in the report's order, before labels, notes and knees. */
export interface SummarizedReport {
  readonly machines: readonly MachineReport[];
  readonly cells: readonly SummarizedCell[];
}

function compactCell(a: CellAggregate): SummarizedCell {
  // The aggregator's metric objects and samples are the report's: a cell is not copied again.
  const { metrics, samples } = a;
  const histograms = Object.fromEntries(Object.entries(a.histograms).map(([name, h]) => [name, h.summary]));
  return {
    matrix: a.matrix,
    cellId: a.cellId,
    machine: a.machine,
    workload: a.workload,
    params: a.params,
    runs: a.ok + a.failed + a.skipped,
    ok: a.ok,
    failed: a.failed,
    skipped: a.skipped,
    problem: a.problem,
    metrics,
    histograms,
    ...(samples ? { samples } : {}),
    ...(a.interference ? { interference: a.interference } : {}),
    ...(a.precision ? { precision: a.precision } : {}),
  };
}

export class ReportBuilder {
  private readonly aggregator: CellAggregator;
  private readonly machines = new Map<string, MachineReport>();

  /** Cells as the aggregator finishes them, already in report form: its own summaries are dropped at once. */
  private readonly cells: SummarizedCell[] = [];

  constructor(private readonly options: ReportOptions) {
    this.aggregator = new CellAggregator({
      grouped: options.grouped ?? false,
      onCell: (a) => this.cells.push(compactCell(a)),
      ...(options.metrics ? { metrics: options.metrics } : {}),
      ...(options.noise ? { noise: options.noise } : {}),
      ...(options.samples ? { samples: options.samples } : {}),
    });
  }

  add(run: AggregatableRun): void {
    const f = run.fingerprint;
    if (!this.machines.has(f.machine)) {
      this.machines.set(f.machine, {
        machine: f.machine,
        caches: { l1dBytes: f.cpu.l1dBytes ?? null, l2Bytes: f.cpu.l2Bytes ?? null, l3Bytes: f.cpu.l3Bytes },
        fingerprint: isFingerprint(f) ? f : null,
      });
    }
    this.aggregator.add(run);
  }

  /**
   * The cells in order and the machines, without what finish() makes of them (labels, noise
   * verdicts, notes, knees): all a comparison reads of a side. Making the rest for two sides of
   * 10,000 cells took 0.3 s of a 4 s compare, for nothing. A builder is finished once, either way.
   */
  summarize(): SummarizedReport {
    this.aggregator.finish();
    const order = this.options.cellOrder;
    if (order) {
      // Each cell's position looked up once, not twice per comparison (10,000 cells: 140,000 of them).
      const keyed = this.cells.map((cell) => ({ cell, at: order.get(cell.cellId) ?? Number.MAX_SAFE_INTEGER }));
      keyed.sort((a, b) => a.at - b.at || a.cell.machine.localeCompare(b.cell.machine));
      for (const [i, k] of keyed.entries()) this.cells[i] = k.cell;
    }
    const fingerprintOf = this.options.fingerprintOf;
    const machines = [...this.machines.values()]
      .map((m) => (fingerprintOf ? { ...m, fingerprint: fingerprintOf(m.machine) ?? m.fingerprint } : m))
      .sort((a, b) => a.machine.localeCompare(b.machine));
    return { machines, cells: this.cells };
  }

  finish(): Report {
    const { machines } = this.summarize();
    const workloads = [...new Set(this.cells.map((a) => a.workload))];
    // Labels name what varies among this report's cells of a workload; a lone cell, what differs from the defaults.
    const varying = new Map(
      workloads.map((w) => {
        const cells: Cell[] = this.cells.filter((a) => a.workload === w).map((a) => ({ id: a.cellId, workload: w, params: { ...a.params } }));
        return [w, varyingParams(cells)] as const;
      }),
    );
    const varyingOf = (w: WorkloadName) => varying.get(w) ?? [];
    // Cells as object literals of one shape, field by field: spreading 10,000 of them twice cost more than the rest of this.
    const noteless: NotelessCell[] = this.cells.map((c) => ({
      matrix: c.matrix, cellId: c.cellId, machine: c.machine, workload: c.workload, params: c.params,
      label: describeCell({ id: c.cellId, workload: c.workload, params: { ...c.params } }, varyingOf(c.workload)),
      runs: c.runs, ok: c.ok, failed: c.failed, skipped: c.skipped, problem: c.problem,
      metrics: c.metrics, histograms: c.histograms, noise: verdict(c.metrics, judgedMetrics(c.workload)), samples: c.samples,
      interference: c.interference,
      precision: c.precision ?? this.options.precision,
    }));
    const severalMachines = machines.length > 1;
    const cells: CellReport[] = noteless.map((c) => {
      const findings = cellNotes(c, noteless, judgedMetrics(c.workload), this.options.noise);
      return {
        matrix: c.matrix, cellId: c.cellId, machine: c.machine, workload: c.workload, params: c.params, label: c.label,
        runs: c.runs, ok: c.ok, failed: c.failed, skipped: c.skipped, problem: c.problem,
        metrics: c.metrics, histograms: c.histograms, noise: c.noise, notes: findings.map((n) => n.text), findings, samples: c.samples,
      };
    });
    const knees = sweepKnees(cells, machines, varyingOf);
    return {
      title: this.options.title,
      metrics: workloads.map((w) => ({ workload: w, metrics: metricInfos(w) })),
      machines,
      cells,
      knees,
      // A knee's note is about its machine's cache sizes, not a cell: said once per sentence, after the cells' groups.
      notes: [...groupNotes(cells, severalMachines), ...kneeNoteGroups(knees)],
    };
  }
}

/** The knees' notes (an L3 size the kernel did not report) as note groups, each sentence once. */
function kneeNoteGroups(knees: readonly KneeReport[]): NoteGroup[] {
  const texts = [...new Set(knees.flatMap((k) => (k.note === null ? [] : [k.note])))];
  return texts.map((text) => ({ kind: 'cache-size', severity: 'info', text, cells: [], figure: null }));
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
