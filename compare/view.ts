/**
 * A comparison as the exporters take it, one function per table: the machine facts that differ
 * (differingFactsTable), one row per (metric, cell) with both sides' medians, the delta (marked
 * `~` when not significant), the ratio's interval and the p-value (compareRowsTable), the
 * geometric means per metric; then the unmatched cells and the notes. The dashboard renders the
 * same document (GET /v1/compare?format=document).
 */
import type { Column, CsvTable, Doc, DocCell, DocNote, Exportable, TextTable } from '../report/export/index.js';
import { formatDelta, formatInterval, formatNumber, formatPercent, formatPValue, formatRatio } from '../report/format.js';
import type { CompareReport, CompareRow, SideStats } from './compare.js';

const left = (title: string): Column => ({ title, align: 'left' });
const right = (title: string): Column => ({ title, align: 'right' });

export function sideText(s: SideStats | null): string {
  return s ? `${formatNumber(s.median)}${s.cv === null ? '' : ` ±${formatPercent(s.cv)}`} n=${s.n}` : 'n/a';
}

export function deltaText(r: CompareRow): string {
  if (r.deltaPct === null) return 'n/a';
  // The delta stays visible when not significant, marked: a reader sees what did not reach p.
  return r.significant ? formatDelta(r.deltaPct) : `~ ${formatDelta(r.deltaPct)}`;
}

/** `!` marks a cell too noisy to conclude; better/worse only when significant and the metric has a direction. */
export function flagText(r: CompareRow): string {
  const noisy = r.warnings.some((w) => w.kind === 'noisy' || w.kind === 'untestable');
  const verdict = r.verdict === 'better' || r.verdict === 'worse' ? r.verdict : '';
  return [verdict, noisy ? '!' : ''].filter((s) => s !== '').join(' ');
}

/** A delta's colour: better or worse when significant and the metric has a direction, grey when not significant. */
const VERDICT_CLASS: Readonly<Record<CompareRow['verdict'], string>> = { better: 'sig-better', worse: 'sig-worse', changed: 'sig-changed', '~': 'not-sig', 'n/a': 'no-data' };

function sideCell(s: SideStats | null): DocCell {
  return { text: sideText(s), class: s?.noisy ? 'side noisy' : 'side', title: s ? s.noise.join('; ') : 'no ok run', value: s?.median ?? null };
}

function deltaCell(r: CompareRow): DocCell {
  const title = r.pValue === null ? 'no test' : `p = ${formatPValue(r.pValue)}${r.significant ? '' : ' (not significant)'}`;
  return { text: deltaText(r), class: `delta ${VERDICT_CLASS[r.verdict]}`, title, value: r.deltaPct };
}

/** The compare rows: per metric and cell, both sides' medians, the delta, the ratio's interval and p. */
function compareRowsTable(report: CompareReport): TextTable {
  return {
    name: 'compare-rows',
    columns: [left('metric'), left('cell'), right('baseline'), right('candidate'), right('delta'), right('ratio 95% CI'), right('p'), right('detectable'), left('')],
    rows: report.rows.map((r) => ({
      cells: [
        r.metric, { text: r.label, class: 'label' }, sideCell(r.baseline), sideCell(r.candidate), deltaCell(r),
        { text: formatInterval(r.ci?.low, r.ci?.high, formatRatio), title: r.ci ? `ratio ${formatRatio(r.ratio)}` : 'no interval' },
        { text: formatPValue(r.pValue), value: r.pValue },
        { text: r.detectable === null ? 'n/a' : formatPercent(r.detectable), value: r.detectable, title: 'the smallest change these runs would have detected with 80% power' },
        { text: flagText(r), class: 'flags', title: r.warnings.map((w) => w.text).join('; ') },
      ],
      data: { metric: r.metric, label: r.label, verdict: r.verdict },
    })),
    blockColumns: 1,
  };
}

/** What differs between the machines, shown above the deltas it may explain. */
export function differingFactsTable(report: CompareReport): TextTable | null {
  if (report.differingFacts.length === 0) return null;
  const value = (v: string | null): DocCell => (v === null ? { text: 'unknown', class: 'unknown', value: null } : { text: v, value: v });
  return {
    name: 'differing-facts',
    heading: 'machine facts that differ between the sides: a delta may be theirs',
    columns: [left('fact'), left('baseline'), left('candidate')],
    rows: report.differingFacts.map((d) => ({ cells: [d.fact, value(d.a), value(d.b)], data: { fact: d.fact } })),
  };
}

function summaryTable(report: CompareReport): TextTable {
  return {
    name: 'compare-summary',
    heading: 'per metric: geometric mean of the ratios over every compared cell',
    columns: [left('metric'), right('geomean'), right('cells'), right('significant'), right('better'), right('worse')],
    rows: report.summary.map((s) => ({
      cells: [s.metric, { text: formatDelta(s.geomeanDeltaPct), class: 'geomean', value: s.geomeanDeltaPct }, String(s.cells), String(s.significant), String(s.better), String(s.worse)],
      data: { metric: s.metric },
    })),
  };
}

export function compareDoc(report: CompareReport): Doc {
  const facts = differingFactsTable(report);
  const side = (label: string, s: CompareReport['baseline']) => `${label}: ${s.name} (${s.machines.join(', ') || 'no machine'}; ${s.okRuns} ok runs of ${s.runs})`;
  return {
    title: `compare: ${report.baseline.name} -> ${report.candidate.name}`,
    preamble: [side('baseline', report.baseline), side('candidate', report.candidate), `~: not significant at p < ${report.alpha} (Mann-Whitney U); ratio CI at ${report.level * 100}% (Hodges-Lehmann)`],
    tables: [...(facts ? [facts] : []), compareRowsTable(report), summaryTable(report)],
    notes: [
      ...report.unmatched.baseline.map((l): DocNote => ({ kind: 'unmatched', severity: 'info', text: `only in baseline: ${l}` })),
      ...report.unmatched.candidate.map((l): DocNote => ({ kind: 'unmatched', severity: 'info', text: `only in candidate: ${l}` })),
      ...report.notes.map((n): DocNote => ({ kind: n.kind, severity: n.severity, text: n.text })),
    ],
  };
}

export const CSV_COLUMNS = [
  'metric', 'direction', 'workload', 'cell', 'params', 'baseline_machine', 'candidate_machine',
  'baseline_n', 'baseline_median', 'baseline_cv', 'candidate_n', 'candidate_median', 'candidate_cv',
  'delta_pct', 'ratio', 'ratio_ci_low', 'ratio_ci_high', 'ratio_ci_level', 'p_value', 'detectable', 'significant', 'verdict', 'warnings',
] as const;

export function compareCsv(report: CompareReport): CsvTable {
  return {
    columns: CSV_COLUMNS,
    rows: report.rows.map((r) => [
      r.metric, r.direction, r.workload, r.label, JSON.stringify(r.params), r.baselineMachine, r.candidateMachine,
      r.baseline?.n, r.baseline?.median, r.baseline?.cv, r.candidate?.n, r.candidate?.median, r.candidate?.cv,
      r.deltaPct, r.ratio, r.ci?.low, r.ci?.high, r.ci?.level, r.pValue, r.detectable, r.significant, r.verdict, r.warnings.map((w) => w.text).join('; '),
    ]),
  };
}

export function exportableCompare(report: CompareReport): Exportable {
  return { doc: () => compareDoc(report), csv: () => compareCsv(report), json: () => report };
}
