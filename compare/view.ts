/**
 * A comparison as the exporters take it: one row per (metric, cell) with both sides' medians,
 * the delta (`~` when not significant), the ratio's interval and the p-value; a table of
 * geometric means per metric; the unmatched cells and the notes.
 */
import type { Column, CsvTable, Doc, Exportable, TextTable } from '../report/export/index.js';
import { formatDelta, formatInterval, formatNumber, formatPercent, formatPValue, formatRatio } from '../report/format.js';
import type { CompareReport, CompareRow, SideStats } from './compare.js';

const left = (title: string): Column => ({ title, align: 'left' });
const right = (title: string): Column => ({ title, align: 'right' });

export function sideText(s: SideStats | null): string {
  return s ? `${formatNumber(s.median)}${s.cv === null ? '' : ` ±${formatPercent(s.cv)}`} n=${s.n}` : 'n/a';
}

export function deltaText(r: CompareRow): string {
  if (r.deltaPct === null) return 'n/a';
  return r.significant ? formatDelta(r.deltaPct) : '~';
}

/** `!` marks a cell too noisy to conclude; better/worse only when significant and the metric has a direction. */
export function flagText(r: CompareRow): string {
  const noisy = r.warnings.some((w) => w.kind === 'noisy' || w.kind === 'untestable');
  const verdict = r.verdict === 'better' || r.verdict === 'worse' ? r.verdict : '';
  return [verdict, noisy ? '!' : ''].filter((s) => s !== '').join(' ');
}

function rowsTable(report: CompareReport): TextTable {
  return {
    columns: [left('metric'), left('cell'), right('baseline'), right('candidate'), right('delta'), right('ratio 95% CI'), right('p'), left('')],
    rows: report.rows.map((r) => [
      r.metric, r.label, sideText(r.baseline), sideText(r.candidate), deltaText(r), formatInterval(r.ci?.low, r.ci?.high, formatRatio), formatPValue(r.pValue), flagText(r),
    ]),
    blockColumns: 1,
  };
}

/** What differs between the machines, shown above the deltas it may explain. */
function factsTable(report: CompareReport): TextTable[] {
  if (report.differingFacts.length === 0) return [];
  return [{
    heading: 'machine facts that differ between the sides: a delta may be theirs',
    columns: [left('fact'), left('baseline'), left('candidate')],
    rows: report.differingFacts.map((d) => [d.fact, d.a ?? 'unknown', d.b ?? 'unknown']),
  }];
}

function summaryTable(report: CompareReport): TextTable {
  return {
    heading: 'per metric: geometric mean of the ratios over every compared cell',
    columns: [left('metric'), right('geomean'), right('cells'), right('significant'), right('better'), right('worse')],
    rows: report.summary.map((s) => [s.metric, formatDelta(s.geomeanDeltaPct), String(s.cells), String(s.significant), String(s.better), String(s.worse)]),
  };
}

export function compareDoc(report: CompareReport): Doc {
  const side = (label: string, s: CompareReport['baseline']) => `${label}: ${s.name} (${s.machines.join(', ') || 'no machine'}; ${s.okRuns} ok runs of ${s.runs})`;
  return {
    title: `compare: ${report.baseline.name} -> ${report.candidate.name}`,
    preamble: [side('baseline', report.baseline), side('candidate', report.candidate), `~: not significant at p < ${report.alpha} (Mann-Whitney U); ratio CI at ${report.level * 100}% (Hodges-Lehmann)`],
    tables: [...factsTable(report), rowsTable(report), summaryTable(report)],
    notes: [
      ...report.unmatched.baseline.map((l) => `only in baseline: ${l}`),
      ...report.unmatched.candidate.map((l) => `only in candidate: ${l}`),
      ...report.notes.map((n) => n.text),
    ],
  };
}

export const CSV_COLUMNS = [
  'metric', 'direction', 'workload', 'cell', 'params', 'baseline_machine', 'candidate_machine',
  'baseline_n', 'baseline_median', 'baseline_cv', 'candidate_n', 'candidate_median', 'candidate_cv',
  'delta_pct', 'ratio', 'ratio_ci_low', 'ratio_ci_high', 'ratio_ci_level', 'p_value', 'significant', 'verdict', 'warnings',
] as const;

export function compareCsv(report: CompareReport): CsvTable {
  return {
    columns: CSV_COLUMNS,
    rows: report.rows.map((r) => [
      r.metric, r.direction, r.workload, r.label, JSON.stringify(r.params), r.baselineMachine, r.candidateMachine,
      r.baseline?.n, r.baseline?.median, r.baseline?.cv, r.candidate?.n, r.candidate?.median, r.candidate?.cv,
      r.deltaPct, r.ratio, r.ci?.low, r.ci?.high, r.ci?.level, r.pValue, r.significant, r.verdict, r.warnings.map((w) => w.text).join('; '),
    ]),
  };
}

export function exportableCompare(report: CompareReport): Exportable {
  return { doc: () => compareDoc(report), csv: () => compareCsv(report), json: () => report };
}
