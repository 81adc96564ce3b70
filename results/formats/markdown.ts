/** A GitHub-flavoured Markdown table, for issues and mailing lists. */
import type { Report } from '../report.js';
import { COLUMNS, rows } from './rows.js';

const escape = (s: string) => s.replace(/\|/g, '\\|');

export function toMarkdown(report: Report): string {
  const head = `| ${COLUMNS.join(' | ')} |`;
  const sep = `|${COLUMNS.map((_, i) => (i >= 2 ? '---:' : '---')).join('|')}|`;
  const body = rows(report).map((r) => `| ${r.map(escape).join(' | ')} |`);
  const notes = report.notes.map((n) => `- ${n}`);
  return [`### ${report.matrix}`, '', head, sep, ...body, ...(notes.length > 0 ? ['', ...notes] : [])].join('\n') + '\n';
}
