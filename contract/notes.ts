/**
 * Notes: what a bare number hides, said in a sentence next to it. The types every part shares,
 * and what a workload's slice provides to say its own (contract/workloads/<name>/notes.ts):
 * report/notes.ts adds the notes any workload gets (spread, interference, precision) and
 * groups them over the cells. Renderers and programs read a note's kind, never its English.
 */
import type { ParamValue } from './params.js';

/** warning: a number here should not be read as it stands; info: how it was measured. */
export type NoteSeverity = 'warning' | 'info';

/** The one figure a note states for its cell, whose range a summary over cells gives. */
export interface NoteFigure {
  readonly name: string;
  readonly value: number;
}

/** One note of one cell. `kind` is the report's (wide-spread, interference ...) or a workload's own. */
export interface Note {
  readonly kind: string;
  readonly severity: NoteSeverity;
  /** The sentence about this cell. */
  readonly text: string;
  readonly figure: NoteFigure | null;
}

/** A cell as a workload's note rules read it: its parameters and the medians of its ok runs. */
export interface NoteSubject {
  readonly workload: string;
  readonly matrix: string;
  readonly machine: string;
  readonly label: string;
  readonly ok: number;
  readonly params: Readonly<Record<string, ParamValue>>;
  readonly metrics: Readonly<Record<string, { readonly median: number }>>;
}

/** How a note's figure reads in a summary over cells: a share as a percentage, one decimal, or a number. */
export type FigureFormat = 'percent' | 'one-decimal' | 'number';

export interface WorkloadNotes {
  /** The notes of one cell with ok runs; `all` holds the report's cells (a watcher library is measured against the raw reader beside it). */
  readonly cell: (c: NoteSubject, all: readonly NoteSubject[]) => Note[];
  /** What a summary over several cells says of each kind these rules note, given the range of its figure ('' when none). */
  readonly gist: Readonly<Record<string, (range: string, cells: readonly Pick<NoteSubject, 'params'>[]) => string>>;
  /** How the figures these rules state read in a summary; a figure not named here reads as a number. */
  readonly figures: Readonly<Record<string, FigureFormat>>;
}

/** A cell's median of a metric; null when the metric was not observed. */
export function noteMedian(c: NoteSubject, metric: string): number | null {
  return c.metrics[metric]?.median ?? null;
}
