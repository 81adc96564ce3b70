/**
 * Draws chart specs (report/charts.ts) with Chart.js, loaded as the global `Chart` (its UMD
 * build: the dashboard links it, the HTML report inlines it). What to draw is decided by the
 * specs; this file only turns them into Chart.js configurations and figures.
 */
import type { Chart as ChartJs, ChartConfiguration, ChartDataset, ChartType, Plugin } from 'chart.js';
import type { ChartAxis, ChartMarker, ChartSeries, ChartSpec, TickFormat } from '../contract/charts.js';
import { formatSize } from '../contract/units.js';
import { formatCompact } from '../report/format.js';
import { h } from './dom.js';

declare const Chart: typeof ChartJs;

// The marker lines are also kept in the chart's options, where a page or a test reads what a chart marks.
declare module 'chart.js' {
  // eslint-disable-next-line @typescript-eslint/no-unused-vars -- an augmentation repeats Chart.js's type parameter
  interface PluginOptionsByType<TType extends ChartType> {
    fsbenchMarkers?: { readonly lines: readonly ChartMarker[] };
  }
}

/** Draws vertical marker lines (the machine's L3 size) across the chart area. */
function markerPlugin(lines: readonly ChartMarker[]): Plugin {
  return {
    id: 'fsbenchMarkers',
    afterDatasetsDraw(chart) {
      const xScale = chart.scales['x'];
      if (!xScale) return;
      const { top, bottom, left, right } = chart.chartArea;
      const ctx = chart.ctx;
      for (const m of lines) {
        const x = xScale.getPixelForValue(m.x);
        if (!Number.isFinite(x) || x < left || x > right) continue;
        ctx.save();
        ctx.strokeStyle = '#6b7280';
        ctx.setLineDash([6, 4]);
        ctx.beginPath();
        ctx.moveTo(x, top);
        ctx.lineTo(x, bottom);
        ctx.stroke();
        ctx.setLineDash([]);
        ctx.fillStyle = '#6b7280';
        ctx.font = '12px sans-serif';
        ctx.fillText(m.label, x + 4, top + 12);
        ctx.restore();
      }
    },
  };
}

function tick(format: TickFormat): (value: string | number) => string {
  if (format === 'compact') return (v) => formatCompact(Number(v));
  if (format === 'log2-size') return (v) => (Number.isInteger(Number(v)) ? formatSize(2 ** Number(v)) : '');
  return (v) => String(v);
}

function scale(axis: ChartAxis) {
  return {
    ...(axis.linear ? { type: 'linear' as const } : { beginAtZero: true }),
    ...(axis.position ? { position: axis.position } : {}),
    ...(axis.grid === false ? { grid: { drawOnChartArea: false } } : {}),
    title: { display: true, text: axis.title },
    ticks: { ...(axis.ticks === 'log2-size' ? { stepSize: 1 } : {}), callback: tick(axis.ticks) },
  };
}

function dataset(s: ChartSeries): ChartDataset<'line' | 'bar' | 'scatter'> {
  return {
    label: s.label,
    // Chart.js takes numbers, nulls (gaps) and {x, y} points alike.
    data: [...s.data],
    borderColor: s.color,
    backgroundColor: s.hollow ? '#fff' : s.color,
    ...(s.axis ? { yAxisID: s.axis } : {}),
    ...(s.scatter ? { type: 'scatter' as const } : {}),
    ...(s.dashed ? { borderDash: [5, 4] } : {}),
    ...(s.marker ? { pointStyle: s.marker, pointRadius: s.markerSize ?? 3 } : s.axis ? { pointRadius: 3 } : {}),
    ...(s.hollow ? { borderWidth: 2 } : {}),
  };
}

function config(spec: ChartSpec): ChartConfiguration {
  const markers = spec.markers ?? [];
  return {
    type: spec.type,
    data: { ...(spec.labels ? { labels: [...spec.labels] } : {}), datasets: spec.series.map(dataset) },
    options: {
      responsive: true,
      maintainAspectRatio: false,
      animation: false,
      interaction: { mode: 'nearest', intersect: false },
      plugins: { legend: spec.legend === false ? { display: false } : { position: 'bottom', labels: { boxWidth: 12 } }, fsbenchMarkers: { lines: markers } },
      scales: { ...(spec.x ? { x: scale(spec.x) } : {}), y: scale(spec.y), ...(spec.y1 ? { y1: scale(spec.y1) } : {}) },
    },
    plugins: markers.length > 0 ? [markerPlugin(markers)] : [],
  };
}

/** One figure per chart, each with its Chart.js instance (kept in `drawn`, to be destroyed when the view goes). */
export function drawCharts(specs: readonly ChartSpec[], drawn: ChartJs[]): HTMLElement[] {
  return specs.map((spec) => {
    const canvas = h('canvas', { role: 'img', 'aria-label': spec.title });
    const caption = h('figcaption', {}, spec.title, spec.subtitle ? h('small', {}, ` ${spec.subtitle}`) : null, spec.capped ? h('small', { class: 'capped' }, ` (${spec.capped})`) : null);
    const figure = h('figure', { class: 'panel' }, caption, h('div', { class: 'canvas-box' }, canvas));
    Object.assign(figure.dataset, spec.data ?? {});
    if (spec.capped) figure.dataset['capped'] = spec.capped;
    drawn.push(new Chart(canvas, config(spec)));
    return figure;
  });
}
