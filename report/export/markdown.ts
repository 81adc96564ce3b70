/** GitHub-flavoured Markdown, for issues, pull requests and mailing lists. */
import { noteText, rowTexts, type Doc, type TextTable } from './doc.js';

/**
 * Markdown must not read `*`, `_`, `<` or backticks in a label or a note as markup; a `|` would
 * end a table cell and a line break the row.
 */
function escapeMarkdown(s: string): string {
  return (
    s
      .replace(/[\\`<>[\]|]/g, (c) => `\\${c}`)
      // `_` and `*` inside a word (IN_Q_OVERFLOW) are not emphasis in GFM: escape only the others.
      .replace(/(?<![A-Za-z0-9])[*_]|[*_](?![A-Za-z0-9])/g, (c) => `\\${c}`)
      .replace(/\r?\n|\r/g, ' ')
  );
}

function renderTable(t: TextTable): string[] {
  const head = `| ${t.columns.map((c) => escapeMarkdown(c.title) || ' ').join(' | ')} |`;
  const sep = `|${t.columns.map((c) => (c.align === 'right' ? '---:' : '---')).join('|')}|`;
  const rows = t.rows.map(rowTexts).map((r) => `| ${t.columns.map((_, i) => escapeMarkdown(r[i] ?? '')).join(' | ')} |`);
  return [...(t.heading === undefined ? [] : [`#### ${escapeMarkdown(t.heading)}`, '']), head, sep, ...rows];
}

export function toMarkdown(doc: Doc): string {
  const parts: string[][] = [[`### ${escapeMarkdown(doc.title)}`]];
  // Two trailing spaces: a line break inside one paragraph.
  if (doc.preamble.length > 0) parts.push(doc.preamble.map((l) => `${escapeMarkdown(l)}  `));
  parts.push(...doc.tables.map(renderTable));
  if (doc.notes.length > 0) parts.push(doc.notes.map((n) => `- ${escapeMarkdown(noteText(n))}`));
  return `${parts.map((p) => p.join('\n')).join('\n\n')}\n`;
}
