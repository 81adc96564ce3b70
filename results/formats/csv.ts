/** RFC 4180 CSV with full-precision numbers, for spreadsheets and scripts. */
import type { Report } from '../report.js';
import { COLUMNS, rows } from './rows.js';

const quote = (s: string) => (/[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s);

export function toCsv(report: Report): string {
  const body = rows(report, (x) => String(x));
  return [COLUMNS.join(','), ...body.map((r) => r.map(quote).join(','))].join('\n') + '\n';
}
