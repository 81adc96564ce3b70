/** Aligned plain text for a terminal. */
import { noteText, rowTexts, type Doc, type TextTable } from './doc.js';

function renderTable(t: TextTable): string[] {
  const texts = t.rows.map(rowTexts);
  const all = [t.columns.map((c) => c.title), ...texts];
  const widths = t.columns.map((_, i) => Math.max(...all.map((r) => (r[i] ?? '').length)));
  const line = (r: readonly string[]) =>
    r.map((cell, i) => (t.columns[i]?.align === 'right' ? cell.padStart(widths[i] ?? 0) : cell.padEnd(widths[i] ?? 0))).join('  ').trimEnd();
  const block = t.blockColumns ?? 0;
  let previous: readonly string[] = [];
  const body = texts.map((r) => {
    const sameBlock = block > 0 && r.slice(0, block).every((v, i) => v === previous[i]);
    previous = r;
    return line(sameBlock ? [...r.slice(0, block).map(() => ''), ...r.slice(block)] : r);
  });
  return [...(t.heading === undefined ? [] : [t.heading]), line(t.columns.map((c) => c.title)), ...body];
}

export function toTable(doc: Doc): string {
  const parts: string[][] = [[doc.title, ...doc.preamble], ...doc.tables.map(renderTable)];
  if (doc.notes.length > 0) parts.push(doc.notes.map((n) => `note: ${noteText(n)}`));
  return `${parts.map((p) => p.join('\n')).join('\n\n')}\n`;
}
