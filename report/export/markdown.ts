/** GitHub-flavoured Markdown, for issues, pull requests and mailing lists. */
import type { Doc, TextTable } from './doc.js';

/**
 * Markdown must not read `*`, `_`, `<` or backticks in a label or a note as markup; a `|` would
 * end a table cell and a line break the row.
 */
function escape(s: string): string {
  return (
    s
      .replace(/[\\`<>[\]|]/g, (c) => `\\${c}`)
      // `_` and `*` inside a word (IN_Q_OVERFLOW) are not emphasis in GFM: escape only the others.
      .replace(/(?<![A-Za-z0-9])[*_]|[*_](?![A-Za-z0-9])/g, (c) => `\\${c}`)
      .replace(/\r?\n|\r/g, ' ')
  );
}

function renderTable(t: TextTable): string[] {
  const head = `| ${t.columns.map((c) => escape(c.title) || ' ').join(' | ')} |`;
  const sep = `|${t.columns.map((c) => (c.align === 'right' ? '---:' : '---')).join('|')}|`;
  const rows = t.rows.map((r) => `| ${t.columns.map((_, i) => escape(r[i] ?? '')).join(' | ')} |`);
  return [...(t.heading === undefined ? [] : [`#### ${escape(t.heading)}`, '']), head, sep, ...rows];
}

export function toMarkdown(doc: Doc): string {
  const parts: string[][] = [[`### ${escape(doc.title)}`]];
  // Two trailing spaces: a line break inside one paragraph.
  if (doc.preamble.length > 0) parts.push(doc.preamble.map((l) => `${escape(l)}  `));
  parts.push(...doc.tables.map(renderTable));
  if (doc.notes.length > 0) parts.push(doc.notes.map((n) => `- ${escape(n)}`));
  return `${parts.map((p) => p.join('\n')).join('\n\n')}\n`;
}
