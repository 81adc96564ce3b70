/** RFC 4180 CSV with full-precision numbers, one row per (metric, cell), for spreadsheets and scripts. */
import type { CompareReport } from '../compare.js';

export const CSV_COLUMNS = [
  'metric', 'direction', 'workload', 'cell', 'params', 'baseline_machine', 'candidate_machine',
  'baseline_n', 'baseline_median', 'baseline_cv', 'candidate_n', 'candidate_median', 'candidate_cv',
  'delta_pct', 'ratio', 'ratio_ci_low', 'ratio_ci_high', 'ratio_ci_level', 'p_value', 'significant', 'verdict', 'warnings',
] as const;

const quote = (s: string) => (/[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s);
const num = (x: number | null | undefined) => (x === null || x === undefined ? '' : String(x));

export function toCsv(report: CompareReport): string {
  const body = report.rows.map((r) => [
    r.metric, r.direction, r.workload, r.label, JSON.stringify(r.params), r.baselineMachine, r.candidateMachine,
    num(r.baseline?.n), num(r.baseline?.median), num(r.baseline?.cv), num(r.candidate?.n), num(r.candidate?.median), num(r.candidate?.cv),
    num(r.deltaPct), num(r.ratio), num(r.ci?.low), num(r.ci?.high), num(r.ci?.level), num(r.pValue), String(r.significant), r.verdict,
    r.warnings.join('; '),
  ]);
  return [CSV_COLUMNS.join(','), ...body.map((r) => r.map(quote).join(','))].join('\n') + '\n';
}
