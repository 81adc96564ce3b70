/**
 * The fifth exporter: a document as HTML, a string built without a DOM. The HTML report renders
 * its tables and notes with it in Node, and the dashboard with the same function in the browser
 * (bundled), so the page and the dashboard cannot disagree on a table, and the text of each row
 * is the text the table and Markdown exporters print.
 *
 * Every text is escaped here, for element content and double-quoted attributes alike; nothing a
 * document holds (a CPU model, a label, a note) can start or end an element.
 */
import { cellText, rowCells, type Cell, type Column, type Doc, type DocNote, type DocRow, type Row, type TextTable } from './doc.js';

const ESCAPES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);
}

type Attrs = Readonly<Record<string, string | number | undefined>>;

function attrs(a: Attrs): string {
  return Object.entries(a)
    .filter((e): e is [string, string | number] => e[1] !== undefined && e[1] !== '')
    .map(([k, v]) => ` ${k}="${escapeHtml(String(v))}"`)
    .join('');
}

/** An element whose children are markup already made by these functions; `text` escapes. */
export const el = (tag: string, a: Attrs, ...children: string[]): string => `<${tag}${attrs(a)}>${children.join('')}</${tag}>`;
export const text = (tag: string, a: Attrs, content: string): string => el(tag, a, escapeHtml(content));

const dataAttrs = (data: Readonly<Record<string, string>> | undefined): Attrs =>
  Object.fromEntries(Object.entries(data ?? {}).map(([k, v]) => [`data-${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`, v]));

const classes = (...names: (string | undefined)[]) => names.filter((n) => n !== undefined && n !== '').join(' ') || undefined;

function cellHtml(c: Cell | undefined, column: Column | undefined): string {
  const own = typeof c === 'object' ? c : undefined;
  const value = own?.value;
  const a: Attrs = {
    class: classes(column?.align === 'right' ? 'num' : undefined, own?.class),
    title: own?.title,
    'data-value': value === undefined || value === null ? undefined : String(value),
  };
  return column?.rowHeader ? text('th', { scope: 'row', ...a }, cellText(c)) : text('td', a, cellText(c));
}

function rowHtml(r: Row, columns: readonly Column[]): string {
  const cells = rowCells(r);
  const own: DocRow | undefined = Array.isArray(r) ? undefined : r;
  return el('tr', { class: own?.class, ...dataAttrs(own?.data) }, ...columns.map((col, i) => cellHtml(cells[i], col)));
}

function notesListHtml(notes: readonly (string | DocNote)[], listClass: string): string {
  return el(
    'ul',
    { class: listClass },
    ...notes.map((n) => (typeof n === 'string' ? text('li', { class: 'note' }, n) : text('li', { class: `note ${n.severity}`, 'data-kind': n.kind, 'data-cells': n.cells }, n.text))),
  );
}

/** The rows, grouped: each group (a cell's metrics) one tbody, its notes in a row after its last. */
function bodies(t: TextTable): string[] {
  const groups: { opens: DocRow['opens']; rows: Row[] }[] = [];
  for (const r of t.rows) {
    const opens = Array.isArray(r) ? undefined : r.opens;
    const last = groups.at(-1);
    if (opens !== undefined || last === undefined) groups.push({ opens, rows: [r] });
    else last.rows.push(r);
  }
  return groups.map((g) => {
    const notes = g.opens && g.opens.notes.length > 0 ? el('tr', { class: 'cell-notes' }, el('td', { colspan: t.columns.length }, notesListHtml(g.opens.notes, 'cell-notes'))) : '';
    return el('tbody', dataAttrs(g.opens?.data), ...g.rows.map((r) => rowHtml(r, t.columns)), notes);
  });
}

function tableHtml(t: TextTable): string {
  const head = el('thead', {}, el('tr', {}, ...t.columns.map((c) => text('th', { class: c.align === 'right' ? 'num' : undefined }, c.title))));
  const heading = t.heading === undefined ? '' : text('h3', {}, t.heading);
  const body = [
    t.hint === undefined ? '' : text('p', { class: 'hint' }, t.hint),
    t.capped === undefined ? '' : text('p', { class: 'hint capped' }, t.capped),
    el('table', { class: t.name }, head, ...bodies(t)),
  ];
  // Folded, the heading stays in view and the rows are one click away (and in the page all along).
  if (t.fold) return el('details', { id: t.name, class: 'doc-table' }, el('summary', {}, heading || escapeHtml(t.name ?? 'table')), ...body);
  return el('section', { id: t.name, class: 'doc-table' }, heading, ...body);
}

/** The document's notes as a section: one item per note, its kind and severity as attributes. */
function notesHtml(doc: Doc): string {
  if (doc.notes.length === 0) return '';
  return el(
    'section',
    { id: 'notes', class: 'notes-section' },
    text('h3', {}, 'Notes'),
    notesListHtml(doc.notes, 'notes report-notes'),
  );
}

/** The lines under a document's title. */
export const preambleHtml = (doc: Doc): string => doc.preamble.map((l) => text('p', { class: 'preamble' }, l)).join('');

/**
 * A document's body: its notes first (on a page they sit under the charts and explain them),
 * then its tables in order. The preamble goes with the page's heading (preambleHtml).
 */
export function docHtml(doc: Doc): string {
  return el('div', { class: 'doc' }, notesHtml(doc), ...doc.tables.map(tableHtml));
}
