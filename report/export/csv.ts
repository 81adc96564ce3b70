/**
 * RFC 4180 CSV: CRLF line ends, and a field holding a comma, a double quote, CR or LF is quoted
 * with its quotes doubled. Numbers keep full precision; null and missing values are empty.
 *
 * Text that a spreadsheet would run as a formula is neutralised, as OWASP's CSV injection
 * guidance says: a field starting with `=`, `+`, `-`, `@`, tab or CR gets a leading single quote
 * and is quoted. Such text reaches a CSV from whoever runs an agent or uploads results (error
 * messages, machine names, labels, info strings), and `=HYPERLINK(...)` or a DDE call in a cell
 * acts when the file is opened. Numbers stay numbers: `-0.5` and `-3e-7` are never formulas.
 */
import type { CsvTable, CsvValue } from './doc.js';

/**
 * What a spreadsheet may take for a formula: one of OWASP's characters first, or after leading
 * white space (some importers trim it).
 */
const FORMULA = /^(?:[\t\r]|\s*[=+\-@])/;
/** A decimal number as text, which a spreadsheet reads as that number. */
const NUMBER = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/;

const quote = (s: string) => `"${s.replace(/"/g, '""')}"`;

export function csvField(v: CsvValue): string {
  if (v === null || v === undefined || (typeof v === 'number' && !Number.isFinite(v))) return '';
  const s = String(v);
  if (typeof v === 'string' && FORMULA.test(s) && !NUMBER.test(s)) return quote(`'${s}`);
  return /[",\r\n]/.test(s) ? quote(s) : s;
}

export function csvLine(fields: readonly CsvValue[]): string {
  return `${fields.map(csvField).join(',')}\r\n`;
}

export function toCsv(t: CsvTable): string {
  return csvLine(t.columns) + t.rows.map(csvLine).join('');
}
