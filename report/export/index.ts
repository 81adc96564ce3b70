/** The exporters behind one interface: a report in, text out, the same four for every kind of report. */
import type { Exportable } from './doc.js';
import { toCsv } from './csv.js';
import { toMarkdown } from './markdown.js';
import { toTable } from './table.js';

export type { Cell, Column, CsvTable, CsvValue, Doc, DocCell, DocNote, DocRow, Exportable, Row, TextTable } from './doc.js';

export const FORMAT_NAMES = ['table', 'md', 'csv', 'json'] as const;
export type FormatName = (typeof FORMAT_NAMES)[number];

export const CONTENT_TYPES: Readonly<Record<FormatName, string>> = {
  table: 'text/plain; charset=utf-8',
  md: 'text/markdown; charset=utf-8',
  csv: 'text/csv; charset=utf-8',
  json: 'application/json; charset=utf-8',
};

export function render(format: FormatName, report: Exportable): string {
  switch (format) {
    case 'table':
      return toTable(report.doc());
    case 'md':
      return toMarkdown(report.doc());
    case 'csv':
      return toCsv(report.csv());
    case 'json':
      return `${JSON.stringify(report.json(), null, 2)}\n`;
  }
}
