/**
 * RFC 4180 CSV: CRLF line ends, and a field holding a comma, a double quote, CR or LF is quoted
 * with its quotes doubled. Numbers keep full precision; null and missing values are empty.
 */
import type { CsvTable, CsvValue } from './doc.js';

export function csvField(v: CsvValue): string {
  if (v === null || v === undefined || (typeof v === 'number' && !Number.isFinite(v))) return '';
  const s = String(v);
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

export function csvLine(fields: readonly CsvValue[]): string {
  return `${fields.map(csvField).join(',')}\r\n`;
}

export function toCsv(t: CsvTable): string {
  return csvLine(t.columns) + t.rows.map(csvLine).join('');
}
