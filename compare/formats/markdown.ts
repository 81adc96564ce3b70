/** A GitHub-flavoured Markdown table, for issues and mailing lists. */
import type { CompareReport } from '../compare.js';
import { COLUMNS, headerLines, rows, summaryLines } from './rows.js';

const escape = (s: string) => s.replace(/\|/g, '\\|');

export function toMarkdown(report: CompareReport): string {
  const head = `| ${COLUMNS.map((c) => (c === '' ? ' ' : c)).join(' | ')} |`;
  const sep = `|${COLUMNS.map((_, i) => (i >= 2 && i <= 6 ? '---:' : '---')).join('|')}|`;
  const body = rows(report).map((r) => `| ${r.map(escape).join(' | ')} |`);
  const bullets = [
    ...summaryLines(report),
    ...report.unmatched.baseline.map((l) => `only in baseline: ${l}`),
    ...report.unmatched.candidate.map((l) => `only in candidate: ${l}`),
    ...report.notes,
  ].map((l) => `- ${escape(l)}`);
  return [...headerLines(report).map((l) => `${escape(l)}  `), '', head, sep, ...body, '', ...bullets].join('\n') + '\n';
}
