/** Aligned plain text for a terminal. */
import type { Report } from '../report.js';
import { COLUMNS, rows } from './rows.js';

export function toTable(report: Report): string {
  const body = rows(report);
  const all = [[...COLUMNS], ...body];
  const widths = COLUMNS.map((_, i) => Math.max(...all.map((r) => (r[i] ?? '').length)));
  const line = (r: readonly string[]) =>
    r.map((cell, i) => (i >= 2 ? cell.padStart(widths[i] ?? 0) : cell.padEnd(widths[i] ?? 0))).join('  ').trimEnd();
  let lastCell = '';
  const lines = [line(all[0] ?? []), ...body.map((r) => {
    // Repeat the cell label only when it changes, so each cell reads as a block.
    const shown = r[0] === lastCell ? ['', ...r.slice(1)] : r;
    lastCell = r[0] ?? '';
    return line(shown);
  })];
  const notes = report.notes.map((n) => `note: ${n}`);
  return [`matrix ${report.matrix}`, ...lines, ...(notes.length > 0 ? ['', ...notes] : [])].join('\n') + '\n';
}
