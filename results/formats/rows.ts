/** The long form every tabular format shares: one row per (cell, headline metric). */
import type { Report } from '../report.js';

export const COLUMNS = ['cell', 'metric', 'n', 'median', 'min', 'max', 'cv', 'ci95'] as const;

/** Numbers with at most 4 significant digits beyond the integer part, for reading. */
export function formatNumber(x: number): string {
  if (!Number.isFinite(x)) return String(x);
  if (Number.isInteger(x)) return String(x);
  const abs = Math.abs(x);
  return abs >= 1000 ? x.toFixed(0) : abs >= 1 ? x.toFixed(2) : x.toPrecision(3);
}

export function rows(report: Report, format: (x: number) => string = formatNumber): string[][] {
  const out: string[][] = [];
  for (const c of report.cells) {
    if (c.ok === 0) {
      out.push([c.label, c.problem ?? 'no result', '0', '', '', '', '', '']);
      continue;
    }
    for (const m of c.metrics) {
      const s = m.summary;
      if (!s) {
        out.push([c.label, m.metric, '0', 'n/a', '', '', '', '']);
        continue;
      }
      const ci = s.ciLow !== null && s.ciHigh !== null ? `${format(s.ciLow)}..${format(s.ciHigh)}` : '';
      const cv = s.cv === null ? '' : `${(s.cv * 100).toFixed(1)}%`;
      out.push([c.label, m.metric, String(s.n), format(s.median), format(s.min), format(s.max), cv, ci]);
    }
  }
  return out;
}
