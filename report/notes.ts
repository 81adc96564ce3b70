/**
 * Notes: what a bare number hides, said in a sentence next to it. A workload's slice says what
 * its own numbers hide (WorkloadContract.notes); here are the notes any cell gets (spread,
 * interference, precision), and the grouping of every note over the cells. Each rule reads the
 * medians of a cell or its interference summary, and never recomputes a statistic.
 */
import { formatParam } from '../contract/params.js';
import type { FigureFormat } from '../contract/notes.js';
import { metricDoc, WORKLOADS, type WorkloadName } from '../contract/workloads/index.js';
import type { CellPrecision } from '../stats/aggregate.js';
import type { NoiseOptions } from '../stats/noise.js';
import { NOISE_DEFAULTS } from '../stats/noise.js';
import { formatCv, formatNumber, formatPercent } from './format.js';
import type { CellInterferenceSummary, CellReport, Note, NoteCellRef, NoteFigure, NoteGroup, NoteKind, NoteSeverity } from './model.js';

/** A cell before its notes are written, with what its interference notes read. */
export type NotelessCell = Omit<CellReport, 'notes' | 'findings'> & {
  readonly interference?: CellInterferenceSummary | undefined;
  /** The precision the cell was run to under `repetitions: auto`. */
  readonly precision?: CellPrecision | undefined;
};

/**
 * A headline metric moving with the interference this closely (|Spearman rho|), over at least
 * INTERFERENCE_MIN_RUNS runs, says the spread is the machine's: with 4 runs only a perfect
 * ranking reaches it, and 0.7 is the usual floor of a strong correlation.
 */
const INTERFERENCE_RHO = 0.7;
const INTERFERENCE_MIN_RUNS = 4;

const note = (kind: NoteKind, severity: NoteSeverity, text: string, figure: NoteFigure | null = null): Note => ({ kind, severity, text, figure });

/**
 * A spread too wide to conclude from, for the headline rates and durations (the cell's judged
 * metrics, see contract/metrics.ts isMeasure).
 * Too few runs alone is left to the cell's noise verdict: it would repeat on every cell of a
 * short matrix and drown the notes that matter.
 */
function spreadNotes(c: NotelessCell, headline: readonly string[], noise: NoiseOptions | undefined): Note[] {
  const maxCv = noise?.maxCv ?? NOISE_DEFAULTS.maxCv;
  const wide = headline.flatMap((m) => {
    const s = c.metrics[m];
    return s?.cv !== null && s?.cv !== undefined && s.n > 1 && s.cv > maxCv ? [{ m, cv: s.cv }] : [];
  });
  if (wide.length === 0) return [];
  const text = `spread too wide to conclude from (CV ${wide.map((w) => `${w.m} ${formatCv(w.cv)}`).join(', ')}, above ${formatPercent(maxCv)} over ${c.ok} runs): measure again on a quieter machine or with more repetitions.`;
  return [note('wide-spread', 'warning', text, { name: 'cv', value: Math.max(...wide.map((w) => w.cv)) })];
}

/** Runs measured while the machine was busy with something else, as their thresholds (stored with each run) judged. */
function flaggedNote(c: NotelessCell): Note[] {
  const i = c.interference;
  if (!i || i.flagged === 0) return [];
  const what = [
    ...(i.maxSteal !== null ? [`steal ${formatPercent(i.maxSteal)}`] : []),
    ...(i.maxOutsideCpu !== null ? [`outside CPU ${formatPercent(i.maxOutsideCpu)} of a CPU`] : []),
  ];
  const text = `${i.flagged} of ${i.runs} runs had interference above the threshold (${what.join(', ')}${i.flagged > 1 ? ' at worst' : ''}).`;
  return [note('interference', 'warning', text, { name: 'flaggedRuns', value: i.flagged })];
}

/** Whether a metric that moves with the interference by `rho` got worse as it rose. */
function worseWithInterference(c: NotelessCell, metric: string, rho: number): boolean {
  const direction = metricDoc(c.workload, metric)?.direction;
  return (direction === 'higher' && rho < 0) || (direction === 'lower' && rho > 0);
}

/**
 * A noisy headline metric whose slow runs are the disturbed ones: its spread says more about
 * the machine than about the workload, which a reader of the CV alone would blame.
 */
function interferenceSpreadNotes(c: NotelessCell, headline: readonly string[], noise: NoiseOptions | undefined): Note[] {
  const i = c.interference;
  if (!i) return [];
  const maxCv = noise?.maxCv ?? NOISE_DEFAULTS.maxCv;
  return headline.flatMap((m) => {
    const cv = c.metrics[m]?.cv;
    if (cv === null || cv === undefined || cv <= maxCv) return [];
    const r = i.correlations[m];
    if (r && r.n >= INTERFERENCE_MIN_RUNS && Math.abs(r.rho) >= INTERFERENCE_RHO && worseWithInterference(c, m, r.rho)) {
      const measure = r.with === 'outsideCpu' ? 'outside CPU' : 'steal';
      const text = `${m}: the slow runs are the ones with interference (rank correlation ${r.rho.toFixed(1)} with ${measure}): the spread is the environment's, not the workload's.`;
      return [note('interference-spread', 'info', text, { name: 'rho', value: r.rho })];
    }
    if (i.flaggedAreOutliers.includes(m)) {
      return [note('interference-spread', 'info', `${m}: the outlying runs are exactly the ones with interference above the threshold: the spread is the environment's, not the workload's.`)];
    }
    return [];
  });
}

export function cellNotes(c: NotelessCell, all: readonly NotelessCell[], headline: readonly string[], noise?: NoiseOptions): Note[] {
  if (c.ok === 0) return [];
  return [
    // The workload's own notes come first: they say what its numbers hide.
    ...(WORKLOADS[c.workload].notes?.cell(c, all) ?? []),
    ...spreadNotes(c, headline, noise),
    ...flaggedNote(c),
    ...interferenceSpreadNotes(c, headline, noise),
    ...precisionNote(c),
  ];
}

/**
 * Under `repetitions: auto`: whether the cell's median got as precise as asked, from its own 95%
 * CI (the interval stats/precision.ts judged it by while it ran).
 */
function precisionNote(c: NotelessCell): Note[] {
  const p = c.precision;
  if (!p) return [];
  const m = c.metrics[p.metric];
  const hw = m && m.ciLow !== null && m.ciHigh !== null && m.median !== 0 ? (m.ciHigh - m.ciLow) / 2 / Math.abs(m.median) : null;
  const asked = `the ±${formatPercent(p.target)} asked for (repetitions: auto)`;
  const figure = hw === null ? null : { name: 'ciHalfWidth', value: hw };
  if (hw !== null && hw <= p.target) return [note('precision-reached', 'info', `the median of ${p.metric} is known to ±${formatPercent(hw)} (95% CI) after ${c.ok} runs: within ${asked}.`, figure)];
  return [
    note('precision-short', 'warning', `the median of ${p.metric} is ${hw === null ? 'without a 95% CI' : `known only to ±${formatPercent(hw)} (95% CI)`} after ${c.ok} runs: short of ${asked}.`, figure),
  ];
}

/**
 * What a summary over cells says of a kind the report notes for any workload, given the range of
 * its figure ('' when none); a workload's own kinds are summarised by its slice (WorkloadNotes.gist).
 */
const GIST: Readonly<Record<string, (range: string) => string>> = {
  'wide-spread': (r) => `spread too wide to conclude from (CV ${r}): measure again on a quieter machine or with more repetitions.`,
  interference: (r) => `some runs had interference above the threshold (runs flagged per cell: ${r}).`,
  'interference-spread': () => "the slow runs are the ones with interference: the spread is the environment's, not the workload's.",
  'precision-reached': (r) => `the median is known to ±${r} (95% CI): within what repetitions: auto asked for.`,
  'precision-short': (r) => `the median is known${r ? ` only to ±${r} (95% CI)` : ' without a 95% CI'}: short of what repetitions: auto asked for.`,
  // Never a cell's: made from the knees, once per sentence (build.ts).
  'cache-size': () => 'a knee is judged against an L3 size the kernel did not report.',
};

/** The kinds the report notes for any workload; a workload's slice adds its own. */
export const REPORT_NOTE_KINDS: readonly string[] = Object.keys(GIST);

/** How the report's own figures read in a summary; a workload's say so in its slice. */
const FIGURES: Readonly<Record<string, FigureFormat | 'cv'>> = { ciHalfWidth: 'percent', cv: 'cv', rho: 'one-decimal' };

function formatFigure(workload: WorkloadName | undefined, name: string, x: number): string {
  switch (FIGURES[name] ?? (workload ? WORKLOADS[workload].notes?.figures[name] : undefined)) {
    case 'percent':
      return formatPercent(x);
    case 'cv':
      return formatCv(x);
    case 'one-decimal':
      return x.toFixed(1);
    default:
      return formatNumber(x);
  }
}

/** The summary sentence of a kind over several cells: the report's own kinds, else the workload's. */
function gistOf(kind: string, range: string, cells: readonly NotedCell[]): string {
  const own = GIST[kind];
  if (own) return own(range);
  const workload = cells[0]?.workload;
  const gist = workload ? WORKLOADS[workload].notes?.gist[kind] : undefined;
  // A workload that notes a kind says how to summarise it; without, the first cell's sentence stands for all.
  return gist ? gist(range, cells) : (cells[0]?.findings.find((n) => n.kind === kind)?.text ?? kind);
}

/** A cell as the note groups read it. */
export type NotedCell = Pick<CellReport, 'cellId' | 'machine' | 'label' | 'workload' | 'params' | 'findings'>;

/** Cells named by their labels, at most `max`, then how many more. */
function someLabels(cells: readonly NotedCell[], severalMachines: boolean, max: number): string {
  const named = cells.slice(0, max).map((c) => `${c.label}${severalMachines ? ` @${c.machine}` : ''}`);
  return cells.length > max ? `${named.join('; ')} and ${cells.length - max} more` : named.join('; ');
}

/**
 * Which cells of `universe` the group's are, in a few words: the values of each varying
 * parameter they are limited to (when those values pick out exactly these cells), else their labels.
 */
function whichCells(group: readonly NotedCell[], universe: readonly NotedCell[], severalMachines: boolean): string {
  const keys = [...new Set(universe.flatMap((c) => Object.keys(c.params)))];
  const constraints: { key: string; values: Set<unknown> }[] = [];
  const said: string[] = [];
  const machinesOf = (cells: readonly NotedCell[]) => new Set(cells.map((c) => c.machine));
  const ourMachines = machinesOf(group);
  if (severalMachines && ourMachines.size < machinesOf(universe).size) said.push(`on ${[...ourMachines].join(', ')}`);
  for (const key of keys) {
    const all = [...new Set(universe.map((c) => c.params[key]))];
    const ours = new Set(group.map((c) => c.params[key]));
    if (all.length < 2 || ours.size === all.length) continue;
    constraints.push({ key, values: ours });
    const workload = group[0]?.workload;
    const spec = workload ? WORKLOADS[workload].params[key] : undefined;
    const fmt = (v: unknown) => (spec && (typeof v === 'number' || typeof v === 'string' || typeof v === 'boolean') ? formatParam(spec, v) : String(v));
    const sorted = all.every((v) => typeof v === 'number') ? [...all].sort((a, b) => a - b) : all;
    const idx = sorted.flatMap((v, i) => (ours.has(v) ? [i] : []));
    const first = idx[0] ?? 0;
    const last = idx.at(-1) ?? 0;
    const contiguous = last - first + 1 === idx.length;
    const values = idx.map((i) => sorted[i]);
    if (values.length === 1) said.push(`${key}=${fmt(values[0])}`);
    else if (contiguous && values.length >= 3) said.push(`${key} ${fmt(sorted[first])} to ${fmt(sorted[last])}`);
    else if (values.length <= 5) said.push(`${key} ${values.map(fmt).join(', ')}`);
    else said.push(`${key} ${fmt(sorted[first])} to ${fmt(sorted[last])} (${values.length} of ${all.length} values)`);
  }
  const count = (ks: readonly { key: string; values: Set<unknown> }[]) =>
    universe.filter((c) => ourMachines.has(c.machine) && ks.every((k) => k.values.has(c.params[k.key]))).length;
  if (said.length > 0 && count(constraints) === group.length) {
    // Only the values needed to pick the cells out: `mode=drain`, not `bufferBytes=4KiB, mode=drain` when only that cell drains.
    const machinesSaid = said.length - constraints.length;
    const keep = constraints.map(() => true);
    for (let i = 0; i < constraints.length; i++) {
      keep[i] = false;
      if (count(constraints.filter((_, j) => keep[j])) !== group.length) keep[i] = true;
    }
    return said.filter((_, i) => i < machinesSaid || keep[i - machinesSaid]).join(', ');
  }
  return group.length <= 6 ? someLabels(group, severalMachines, 6) : `${said.length > 0 ? `some with ${said.join(', ')}: ` : ''}${someLabels(group, severalMachines, 3)}`;
}

/**
 * The report's notes, one group per kind over the cells that have it, in the order kinds first
 * appear: a kind on several cells is said once with which cells and the range of its figure;
 * on one cell it is that cell's own sentence, named by its label.
 */
export function groupNotes(cells: readonly NotedCell[], severalMachines: boolean): NoteGroup[] {
  const byKind = new Map<NoteKind, { cell: NotedCell; note: Note }[]>();
  for (const cell of cells) {
    for (const n of cell.findings) {
      const list = byKind.get(n.kind);
      if (list) list.push({ cell, note: n });
      else byKind.set(n.kind, [{ cell, note: n }]);
    }
  }
  const ref = (c: NotedCell): NoteCellRef => ({ cellId: c.cellId, machine: c.machine, label: c.label });
  const groups: NoteGroup[] = [];
  for (const [kind, items] of byKind) {
    const noted = [...new Set(items.map((i) => i.cell))];
    const first = items[0];
    if (!first) continue;
    if (noted.length === 1) {
      for (const { cell, note: n } of items) {
        groups.push({
          kind,
          severity: n.severity,
          text: `${cell.label}${severalMachines ? ` @${cell.machine}` : ''}: ${n.text}`,
          cells: [ref(cell)],
          figure: n.figure ? { name: n.figure.name, min: n.figure.value, max: n.figure.value } : null,
        });
      }
      continue;
    }
    const figures = items.flatMap((i) => (i.note.figure ? [i.note.figure] : []));
    const name = figures[0]?.name;
    const values = figures.filter((f) => f.name === name).map((f) => f.value);
    const figure = name === undefined || values.length === 0 ? null : { name, min: Math.min(...values), max: Math.max(...values) };
    // A few cells: each one's figure, named; more: the range.
    const each = items.every((i) => i.note.figure?.name === name) && noted.length === items.length && noted.length <= 4;
    const range = !figure
      ? ''
      : figure.min === figure.max
        ? formatFigure(first.cell.workload, figure.name, figure.min)
        : each
          ? items.map((i) => `${formatFigure(first.cell.workload, figure.name, i.note.figure?.value ?? Number.NaN)} in ${i.cell.label}${severalMachines ? ` @${i.cell.machine}` : ''}`).join(', ')
          : `${formatFigure(first.cell.workload, figure.name, figure.min)} to ${formatFigure(first.cell.workload, figure.name, figure.max)}`;
    const universe = cells.filter((c) => noted.some((n) => n.workload === c.workload));
    groups.push({
      kind,
      severity: items.some((i) => i.note.severity === 'warning') ? 'warning' : 'info',
      text: `${noted.length === universe.length ? `all ${noted.length} cells` : `${noted.length} of ${universe.length} cells (${whichCells(noted, universe, severalMachines)})`}: ${gistOf(kind, range, noted)}`,
      cells: noted.map(ref),
      figure,
    });
  }
  return groups;
}
