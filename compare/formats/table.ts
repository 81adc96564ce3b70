/** Aligned plain text for a terminal, benchstat-like: `~` where the difference is not significant. */
import type { CompareReport } from '../compare.js';
import { COLUMNS, headerLines, rows, summaryLines } from './rows.js';

export function toTable(report: CompareReport): string {
  const body = rows(report);
  const all = [[...COLUMNS], ...body];
  const widths = COLUMNS.map((_, i) => Math.max(...all.map((r) => (r[i] ?? '').length)));
  const right = new Set([2, 3, 4, 6]);
  const line = (r: readonly string[]) =>
    r.map((cell, i) => (right.has(i) ? cell.padStart(widths[i] ?? 0) : cell.padEnd(widths[i] ?? 0))).join('  ').trimEnd();
  let lastMetric = '';
  const lines = [line(all[0] ?? []), ...body.map((r) => {
    // The metric name once per block, so each metric reads as its own table.
    const shown = r[0] === lastMetric ? ['', ...r.slice(1)] : r;
    lastMetric = r[0] ?? '';
    return line(shown);
  })];
  const unmatched = [
    ...report.unmatched.baseline.map((l) => `only in baseline: ${l}`),
    ...report.unmatched.candidate.map((l) => `only in candidate: ${l}`),
  ];
  return [
    ...headerLines(report),
    '',
    ...lines,
    '',
    ...summaryLines(report),
    ...(unmatched.length > 0 ? ['', ...unmatched] : []),
    ...(report.notes.length > 0 ? ['', ...report.notes.map((n) => `note: ${n}`)] : []),
  ].join('\n') + '\n';
}
