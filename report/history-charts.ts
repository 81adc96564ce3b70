/**
 * The charts of a page of history, as specs the dashboard draws: one line chart per series (the
 * first few of the page), each point a matrix's median with its 95% interval dashed around it,
 * its change points marked where the level changed, and hollow squares where the machine's facts
 * or the matrix's annotations changed. Pure data, like report/charts.ts.
 */
import type { ChartSpec } from '../contract/charts.js';
import { seriesColor } from '../contract/charts.js';
import type { HistoryPage } from '../contract/history.js';

/** Series charted per page: more reads as noise; the table below lists them all. */
export const MAX_HISTORY_CHARTS = 6;

export function historyCharts(page: HistoryPage): ChartSpec[] {
  return page.series.slice(0, MAX_HISTORY_CHARTS).map((s, i): ChartSpec => {
    const color = seriesColor(i);
    const changedAt = new Set(s.changes.map((c) => c.index));
    const suspect = s.changes.some((c) => c.suspect);
    return {
      type: 'line',
      title: `${s.metric} ${s.label}`,
      subtitle: `${s.machine}; ${String(s.points.length)} matrices${s.changes.length > 0 ? `; ${String(s.changes.length)} change${s.changes.length === 1 ? '' : 's'}${suspect ? ' (suspect)' : ''}` : ''}`,
      data: { series: s.key, changes: s.changes.map((c) => String(c.index)).join(',') },
      labels: s.points.map((p) => p.at.slice(0, 10)),
      series: [
        { label: 'median', data: s.points.map((p) => p.median), color },
        { label: '95% CI low', data: s.points.map((p) => p.ciLow), color, dashed: true },
        { label: '95% CI high', data: s.points.map((p) => p.ciHigh), color, dashed: true },
        { label: 'change', data: s.points.map((p, k) => (changedAt.has(k) ? p.median : null)), color: '#111827', scatter: true, marker: 'triangle', markerSize: 8 },
        // Where the machine (kernel, a fact) or the matrix's annotations (the commit) changed: the usual suspects for a step.
        {
          label: 'machine or annotations changed',
          data: s.points.map((p) => (p.factChanges.length + p.annotationChanges.length > 0 ? p.median : null)),
          color: '#b45309',
          scatter: true,
          marker: 'rect',
          markerSize: 6,
          hollow: true,
        },
      ],
      y: { title: s.metric, ticks: 'compact' },
      legend: false,
    };
  });
}
