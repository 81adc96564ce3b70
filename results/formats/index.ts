/** Output formats behind one interface: a report in, text out. */
import type { Report } from '../report.js';
import { toCsv } from './csv.js';
import { toJson } from './json.js';
import { toMarkdown } from './markdown.js';
import { toTable } from './table.js';

export const FORMATS = { table: toTable, json: toJson, csv: toCsv, md: toMarkdown } as const satisfies Record<string, (r: Report) => string>;
export type FormatName = keyof typeof FORMATS;
export const FORMAT_NAMES = Object.keys(FORMATS) as FormatName[];
