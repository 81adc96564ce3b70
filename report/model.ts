/**
 * The one report model: what every output of a result set says, built once (report/build.ts)
 * and then rendered by the exporters, served by the REST API, drawn by the dashboard and
 * compared by compare/. Nothing downstream computes a statistic of its own.
 */
import type { MachineFingerprint } from '../contract/fingerprint.js';
import type { CellParams } from '../contract/matrix.js';
import type { MetricInfo } from '../contract/metrics.js';
import type { WorkloadName } from '../contract/workloads/index.js';
import type { HistogramSummary } from '../stats/histogram.js';
import type { CellInterference, MetricAggregate } from '../stats/aggregate.js';

/** What a cell's interference notes read (stats/aggregate.ts summarises it); not part of the served report. */
export type CellInterferenceSummary = CellInterference;

/** One metric of one cell: the summary over its ok runs, and whether it can support a conclusion. */
export type MetricStats = MetricAggregate;

/**
 * What a note is about: renderers group, count and test notes by kind, never by their English.
 * The report's own kinds, for any workload: wide-spread (a CV too wide to conclude),
 * interference (runs flagged as disturbed), interference-spread (the spread follows the
 * interference), precision-reached / precision-short (`repetitions: auto` got there or not),
 * cache-size (a knee judged against an L3 size the kernel did not report: a machine's, not a
 * cell's). A workload's slice adds its own (contract/workloads/<name>/notes.ts: inotify's
 * overflow, starved-reader, drain-timeout, fanotify-merge, silent-loss).
 */
export type NoteKind = string;
import type { Note, NoteSeverity } from '../contract/notes.js';

export type { Note, NoteFigure, NoteSeverity } from '../contract/notes.js';

/** A cell a note group names. */
export interface NoteCellRef {
  readonly cellId: string;
  readonly machine: string;
  readonly label: string;
}

/**
 * The notes of one kind over the report's cells, said once: which cells (by the parameter values
 * they share, or their labels) and the range of the figure. A kind on one cell is that cell's
 * sentence with its label.
 */
export interface NoteGroup {
  readonly kind: NoteKind;
  readonly severity: NoteSeverity;
  readonly text: string;
  readonly cells: readonly NoteCellRef[];
  /** The range of the notes' figure over the cells; null when the kind states none. */
  readonly figure: { readonly name: string; readonly min: number; readonly max: number } | null;
}

/** The cell's verdict over its headline metrics that have a better direction. */
export interface NoiseVerdict {
  readonly noisy: boolean;
  readonly reasons: readonly string[];
}

export interface CellReport {
  /** The matrix the runs belong to (its name locally, its id on a coordinator). */
  readonly matrix: string;
  readonly cellId: string;
  readonly machine: string;
  readonly workload: WorkloadName;
  readonly params: Readonly<CellParams>;
  /** The parameters that vary across the report's cells of this workload, in their units. */
  readonly label: string;
  readonly runs: number;
  readonly ok: number;
  readonly failed: number;
  readonly skipped: number;
  /** The first failed or skipped run's code and message. */
  readonly problem: string | null;
  /** Every metric observed in at least one ok run (a metric null in every run, not observable, is absent). */
  readonly metrics: Readonly<Record<string, MetricStats>>;
  /** Latency histograms merged over the ok runs, percentiles read from the merge. */
  readonly histograms: Readonly<Record<string, HistogramSummary>>;
  readonly noise: NoiseVerdict;
  /** What the bare numbers hide (events lost, a starved reader, a library that cannot see loss, spread): `findings`' sentences. */
  readonly notes: readonly string[];
  /** The same notes, typed: kind, severity, sentence and the figure it states. */
  readonly findings: readonly Note[];
  /** Sorted values of the metrics a comparison asked for; absent otherwise. */
  readonly samples?: Readonly<Record<string, readonly number[]>>;
}

export interface MachineReport {
  readonly machine: string;
  /** Cache sizes, from the fingerprint (null where the machine does not say). */
  readonly caches: { readonly l1dBytes: number | null; readonly l2Bytes: number | null; readonly l3Bytes: number | null };
  /** The whole fingerprint where the source keeps it (local runs and the coordinator do). */
  readonly fingerprint: MachineFingerprint | null;
}

export interface SweepPointReport {
  readonly x: number;
  readonly median: number;
}

/** Where a swept parameter stops helping, per machine and combination of the other parameters. */
export interface KneeReport {
  readonly matrix: string;
  readonly machine: string;
  readonly workload: WorkloadName;
  /** The swept parameter and the metric whose median is read along it. */
  readonly param: string;
  readonly metric: string;
  /** The other varying parameters, held fixed along this sweep, in their units ('' when none vary). */
  readonly label: string;
  readonly fixed: Readonly<CellParams>;
  readonly points: readonly SweepPointReport[];
  /** The smallest value within `tolerance` of the best; null when no point has a median. */
  readonly knee: { readonly x: number; readonly median: number; readonly bestX: number; readonly best: number; readonly tolerance: number } | null;
  readonly l2Bytes: number | null;
  readonly l3Bytes: number | null;
  /**
   * Where the sizes came from (the fingerprint's cacheSource): the kernel's topology, glibc's
   * unverified sysconf figure (fingerprints recorded before sizes the kernel does not report were
   * left unknown), or null when no fingerprint says.
   */
  readonly cacheSource: 'sysfs' | 'sysconf' | null;
  /** What the L3 beside the knee cannot tell (a size glibc guessed, or none the machine reports); null when nothing. */
  readonly note: string | null;
  /** knee / L3: seed 000 claims the best buffer is about the L3 size (1). */
  readonly kneeOverL3: number | null;
}

export interface WorkloadMetrics {
  readonly workload: WorkloadName;
  /** Headline metrics first. */
  readonly metrics: readonly MetricInfo[];
}

export interface Report {
  readonly title: string;
  /** Units, directions and meanings of the metrics of the workloads present. */
  readonly metrics: readonly WorkloadMetrics[];
  readonly machines: readonly MachineReport[];
  readonly cells: readonly CellReport[];
  readonly knees: readonly KneeReport[];
  /** Every cell's notes, one group per kind: summarised over the cells that have it (each cell's own stay in `cells[].notes`). */
  readonly notes: readonly NoteGroup[];
}
