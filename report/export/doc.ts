/**
 * What every exporter renders: a report of any kind (a matrix's results, a comparison, a gate)
 * turns itself into these typed documents once, and the table, Markdown, CSV, JSON and HTML
 * exporters render them without knowing which report they came from. The HTML report and the
 * dashboard render the very same documents (the coordinator serves them as JSON), so a table
 * reads the same in a terminal, a pull request, the page and the browser.
 *
 * The shapes are zod schemas because they cross a boundary: the dashboard parses what it
 * fetches with them. Types are inferred, so the two cannot drift.
 */
import { z } from 'zod';

export const Column = z.object({
  title: z.string(),
  /** Numbers align right, words left. */
  align: z.enum(['left', 'right']),
  /** The column names its row (a fingerprint's field): HTML renders it as a row header. */
  rowHeader: z.boolean().optional(),
});
export type Column = z.infer<typeof Column>;

/**
 * One cell: the text every exporter shows, plus what it means for a renderer that can say more
 * (a class for colour, a title for a tooltip, the raw value a script or a test may read).
 */
export const DocCell = z.object({
  text: z.string(),
  class: z.string().optional(),
  title: z.string().optional(),
  value: z.union([z.number(), z.string(), z.boolean(), z.null()]).optional(),
});
export type DocCell = z.infer<typeof DocCell>;
/** A plain string is a cell with nothing but its text. */
export const Cell = z.union([z.string(), DocCell]);
export type Cell = z.infer<typeof Cell>;

/**
 * A note said about a report, a cell or a comparison, typed so that renderers and programs
 * read its kind and severity, never its English.
 */
export const DocNote = z.object({
  kind: z.string(),
  severity: z.enum(['warning', 'info']),
  text: z.string(),
  /** How many cells the note is about, where it summarises several. */
  cells: z.number().int().nonnegative().optional(),
});
export type DocNote = z.infer<typeof DocNote>;

/** Data attributes the HTML exporter puts on an element, so a page's script or test finds a row by meaning. */
const Data = z.record(z.string(), z.string());

/**
 * Rows that belong together (the metrics of one cell) start with a row that opens the group;
 * the group's own notes and verdict follow its last row in HTML (text formats leave them to
 * the report's notes and the CSV).
 */
const RowGroup = z.object({ data: Data, notes: z.array(DocNote) });
type RowGroup = z.infer<typeof RowGroup>;

export const DocRow = z.object({
  cells: z.array(Cell),
  data: Data.optional(),
  class: z.string().optional(),
  opens: RowGroup.optional(),
});
export type DocRow = z.infer<typeof DocRow>;
export const Row = z.union([z.array(Cell), DocRow]);
export type Row = z.infer<typeof Row>;

/** A table of text already formatted for reading (see report/format.ts). */
export const TextTable = z.object({
  /** What the table is (cells, knees, machines, compare-rows ...): the HTML section's id and the table's class. */
  name: z.string().optional(),
  heading: z.string().optional(),
  /** A sentence on how to read the table, for the pages (HTML) that have room for it. */
  hint: z.string().optional(),
  /** A line saying the table is cut, shown under its heading. */
  capped: z.string().optional(),
  /** A long table a page shows folded under its heading (HTML: a closed `<details>`); text formats print it whole. */
  fold: z.boolean().optional(),
  columns: z.array(Column),
  rows: z.array(Row),
  /**
   * Columns (from the first) whose value is shown only when it changes from the row above,
   * so each cell or metric reads as a block in a terminal.
   */
  blockColumns: z.number().int().nonnegative().optional(),
});
export type TextTable = z.infer<typeof TextTable>;

export const Doc = z.object({
  title: z.string(),
  /** Lines under the title: what was compared, what the numbers are. */
  preamble: z.array(z.string()),
  tables: z.array(TextTable),
  /** Sentences that say what a bare number hides; shown after the tables (before them in HTML, under the charts). */
  notes: z.array(z.union([z.string(), DocNote])),
});
export type Doc = z.infer<typeof Doc>;

export const cellText = (c: Cell | undefined): string => (c === undefined ? '' : typeof c === 'string' ? c : c.text);
export const rowCells = (r: Row): readonly Cell[] => (Array.isArray(r) ? r : r.cells);
/** A row as the text formats see it: one string per column. */
export const rowTexts = (r: Row): string[] => rowCells(r).map(cellText);
export const noteText = (n: string | DocNote): string => (typeof n === 'string' ? n : n.text);

export type CsvValue = string | number | boolean | null | undefined;

/** One flat table with full-precision values, for spreadsheets and scripts. */
export interface CsvTable {
  readonly columns: readonly string[];
  readonly rows: readonly (readonly CsvValue[])[];
}

/** A report as each exporter needs it. */
export interface Exportable {
  doc(): Doc;
  csv(): CsvTable;
  /** The whole report as plain data: every statistic, note and verdict, nothing formatted. */
  json(): unknown;
}
