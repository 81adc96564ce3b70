/** The whole report as JSON: every field, the summary and the notes. */
import type { CompareReport } from '../compare.js';

export function toJson(report: CompareReport): string {
  return JSON.stringify(report, null, 2) + '\n';
}
