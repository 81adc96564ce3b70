/** The long form the tabular compare formats share: one row per (metric, cell). */
import { formatNumber } from '../../results/formats/rows.js';
import type { CompareReport, CompareRow, MetricSummary } from '../compare.js';

export const COLUMNS = ['metric', 'cell', 'baseline', 'candidate', 'delta', 'ratio 95% CI', 'p', ''] as const;

const cvText = (cv: number | null) => (cv === null ? '' : ` ±${(cv * 100).toFixed(cv < 0.1 ? 1 : 0)}%`);

export function sideText(s: CompareRow['baseline']): string {
  return s ? `${formatNumber(s.median)}${cvText(s.cv)} n=${s.n}` : 'n/a';
}

export function deltaText(r: CompareRow): string {
  if (r.deltaPct === null) return 'n/a';
  if (!r.significant) return '~';
  return `${r.deltaPct >= 0 ? '+' : ''}${r.deltaPct.toFixed(2)}%`;
}

export function ciText(r: CompareRow): string {
  return r.ci ? `${r.ci.low.toFixed(3)}..${r.ci.high.toFixed(3)}` : '';
}

export function pText(r: CompareRow): string {
  if (r.pValue === null) return '';
  return r.pValue < 0.001 ? r.pValue.toExponential(1) : r.pValue.toFixed(3);
}

/** `!` marks a cell too noisy to conclude; `better`/`worse` only when significant and the metric has a direction. */
export function flagText(r: CompareRow): string {
  const noisy = r.warnings.some((w) => w.includes('too noisy') || w.includes('cannot reach'));
  const verdict = r.verdict === 'better' || r.verdict === 'worse' ? r.verdict : '';
  return [verdict, noisy ? '!' : ''].filter((s) => s !== '').join(' ');
}

export function rows(report: CompareReport): string[][] {
  return report.rows.map((r) => [r.metric, r.label, sideText(r.baseline), sideText(r.candidate), deltaText(r), ciText(r), pText(r), flagText(r)]);
}

export function geomeanText(s: MetricSummary): string {
  if (s.geomeanDeltaPct === null) return 'n/a';
  return `${s.geomeanDeltaPct >= 0 ? '+' : ''}${s.geomeanDeltaPct.toFixed(2)}%`;
}

export function summaryLines(report: CompareReport): string[] {
  return report.summary.map(
    (s) => `${s.metric}: geomean ${geomeanText(s)} over ${s.cells} cells; ${s.significant} significant (${s.better} better, ${s.worse} worse)`,
  );
}

export function headerLines(report: CompareReport): string[] {
  const side = (label: string, s: CompareReport['baseline']) =>
    `${label}: ${s.name} (${s.machines.join(', ') || 'no machine'}; ${s.okRuns} ok runs of ${s.runs})`;
  return [side('baseline', report.baseline), side('candidate', report.candidate)];
}
