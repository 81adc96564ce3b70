/**
 * What every exporter renders: a report of any kind (a matrix's results, a comparison) turns
 * itself into these plain shapes once, and the table, Markdown, CSV and JSON exporters render
 * the shapes without knowing which report they came from.
 */

export interface Column {
  readonly title: string;
  /** Numbers align right, words left. */
  readonly align: 'left' | 'right';
}

/** A table of text already formatted for reading (see report/format.ts). */
export interface TextTable {
  readonly heading?: string;
  readonly columns: readonly Column[];
  readonly rows: readonly (readonly string[])[];
  /**
   * Columns (from the first) whose value is shown only when it changes from the row above,
   * so each cell or metric reads as a block in a terminal.
   */
  readonly blockColumns?: number;
}

export interface Doc {
  readonly title: string;
  /** Lines under the title: what was compared, what the numbers are. */
  readonly preamble: readonly string[];
  readonly tables: readonly TextTable[];
  /** Sentences that say what a bare number hides; shown after the tables. */
  readonly notes: readonly string[];
}

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
