/** The whole report as JSON: every summary field, notes included. */
import type { Report } from '../report.js';

export function toJson(report: Report): string {
  return JSON.stringify(
    {
      matrix: report.matrix,
      varying: report.varying,
      notes: report.notes,
      cells: report.cells.map((c) => ({
        cellId: c.cell.id,
        params: c.cell.params,
        ok: c.ok,
        failed: c.failed,
        skipped: c.skipped,
        problem: c.problem,
        metrics: Object.fromEntries(c.metrics.map((m) => [m.metric, m.summary])),
      })),
    },
    null,
    2,
  ) + '\n';
}
