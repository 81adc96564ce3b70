/** Compare output formats behind one interface: a report in, text out. */
import type { CompareReport } from '../compare.js';
import { toCsv } from './csv.js';
import { toJson } from './json.js';
import { toMarkdown } from './markdown.js';
import { toTable } from './table.js';

export const COMPARE_FORMATS = { table: toTable, json: toJson, csv: toCsv, md: toMarkdown } as const satisfies Record<
  string,
  (r: CompareReport) => string
>;
export type CompareFormatName = keyof typeof COMPARE_FORMATS;
export const COMPARE_FORMAT_NAMES = Object.keys(COMPARE_FORMATS) as CompareFormatName[];

export const COMPARE_CONTENT_TYPES: Readonly<Record<CompareFormatName, string>> = {
  table: 'text/plain; charset=utf-8',
  json: 'application/json; charset=utf-8',
  csv: 'text/csv; charset=utf-8',
  md: 'text/markdown; charset=utf-8',
};
