// Charts like seed 000's figures, drawn with Chart.js (the UMD build, loaded as the global
// `Chart` by index.html). Every chart is built from the coordinator's per-cell aggregates
// (`cells` of GET /v1/matrices/:id/results): medians, never single runs.
import { describeParams, findKnee, formatNumber, formatSize, groupBy, h, varyingParams } from './util.js';

const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#4d7c0f', '#be185d'];
const color = (i) => COLORS[i % COLORS.length];

const medianOf = (cell, metric) => {
  const s = cell.metrics?.[metric];
  return s && Number.isFinite(s.median) ? s.median : null;
};

/** Draws vertical marker lines (the machine's L3 size) across the chart area. */
const markerPlugin = {
  id: 'fsbenchMarkers',
  afterDatasetsDraw(chart, _args, options) {
    const xScale = chart.scales.x;
    const { top, bottom } = chart.chartArea;
    const ctx = chart.ctx;
    for (const m of options.lines ?? []) {
      const x = xScale.getPixelForValue(m.x);
      if (!Number.isFinite(x) || x < chart.chartArea.left || x > chart.chartArea.right) continue;
      ctx.save();
      ctx.strokeStyle = m.color ?? '#6b7280';
      ctx.setLineDash([6, 4]);
      ctx.beginPath();
      ctx.moveTo(x, top);
      ctx.lineTo(x, bottom);
      ctx.stroke();
      ctx.setLineDash([]);
      ctx.fillStyle = m.color ?? '#6b7280';
      ctx.font = '12px sans-serif';
      ctx.fillText(m.label, x + 4, top + 12);
      ctx.restore();
    }
  },
};

function panel(title, subtitle) {
  const canvas = h('canvas', { role: 'img', 'aria-label': title });
  const el = h('figure', { class: 'panel' }, h('figcaption', {}, title, subtitle ? h('small', {}, ` ${subtitle}`) : null), h('div', { class: 'canvas-box' }, canvas));
  return { el, canvas };
}

function baseOptions() {
  return {
    responsive: true,
    maintainAspectRatio: false,
    animation: false,
    interaction: { mode: 'nearest', intersect: false },
    plugins: { legend: { position: 'bottom', labels: { boxWidth: 12 } } },
  };
}

/**
 * Seed 000, benchmark 1: per file count (and machine), x = read buffer on a log2 scale, left
 * axis throughput (events/s, median), right axis total events per run (median); the machine's
 * L3 size as a vertical line and the knee (smallest buffer within 5% of the best) marked.
 * Other varying parameters (maxQueuedEvents, readerNice...) become separate lines.
 */
export function inotifySweepCharts(cells, machines, charts) {
  const varying = varyingParams(cells).filter((p) => p !== 'bufferBytes' && p !== 'files');
  const l3Of = new Map(machines.map((m) => [m.machine, m.fingerprint?.cpu?.l3Bytes ?? null]));
  const multiMachine = new Set(cells.map((c) => c.machine)).size > 1;
  const out = [];
  const knees = [];
  const panels = groupBy(cells, (c) => `${c.machine}\u0000${c.params.files}`);
  for (const group of panels.values()) {
    const first = group[0];
    const l3 = l3Of.get(first.machine) ?? null;
    const title = `${first.params.files} files`;
    const { el, canvas } = panel(title, `${multiMachine ? `on ${first.machine}` : ''}${l3 ? ` (L3 ${formatSize(l3)})` : ''}`);
    el.dataset.files = String(first.params.files);
    el.dataset.machine = first.machine;
    const datasets = [];
    let i = 0;
    for (const series of groupBy(group, (c) => describeParams(c.params, varying)).entries()) {
      const [label, members] = series;
      const pts = members
        .map((c) => ({ x: Math.log2(c.params.bufferBytes), bytes: c.params.bufferBytes, eps: medianOf(c, 'eventsPerSec'), events: medianOf(c, 'events') }))
        .filter((p) => p.eps !== null)
        .sort((a, b) => a.x - b.x);
      const named = (what) => (label ? `${label}: ${what}` : what);
      datasets.push({
        label: named('events/s'),
        yAxisID: 'y',
        data: pts.map((p) => ({ x: p.x, y: p.eps })),
        borderColor: color(i),
        backgroundColor: color(i),
        pointRadius: 3,
      });
      datasets.push({
        label: named('total events'),
        yAxisID: 'y1',
        data: pts.filter((p) => p.events !== null).map((p) => ({ x: p.x, y: p.events })),
        // The same hue, lighter: the pair reads as one series on two axes.
        borderColor: `${color(i)}99`,
        backgroundColor: `${color(i)}99`,
        borderDash: [5, 4],
        pointStyle: 'rect',
        pointRadius: 3,
      });
      const knee = findKnee(pts.map((p) => ({ x: p.bytes, y: p.eps })));
      if (knee) {
        datasets.push({
          label: named('knee'),
          yAxisID: 'y',
          type: 'scatter',
          data: [{ x: Math.log2(knee.x), y: knee.y }],
          borderColor: color(i),
          backgroundColor: '#fff',
          pointStyle: 'triangle',
          pointRadius: 8,
          borderWidth: 2,
        });
        knees.push({ machine: first.machine, files: first.params.files, series: label, knee, l3 });
      }
      i++;
    }
    const options = baseOptions();
    options.scales = {
      x: {
        type: 'linear',
        title: { display: true, text: 'read buffer (log2 scale)' },
        ticks: { stepSize: 1, callback: (v) => (Number.isInteger(v) ? formatSize(2 ** v) : '') },
      },
      y: { position: 'left', beginAtZero: true, title: { display: true, text: 'throughput (events/s, median)' }, ticks: { callback: (v) => formatNumber(v) } },
      y1: {
        position: 'right',
        beginAtZero: true,
        grid: { drawOnChartArea: false },
        title: { display: true, text: 'total events per run (median)' },
        ticks: { callback: (v) => formatNumber(v) },
      },
    };
    options.plugins.fsbenchMarkers = { lines: l3 ? [{ x: Math.log2(l3), label: `L3 ${formatSize(l3)}` }] : [] };
    charts.push(new Chart(canvas, { type: 'line', data: { datasets }, options, plugins: [markerPlugin] }));
    out.push(el);
  }
  return { panels: out, knees };
}

/** Seed 000, benchmark 2: a few large buffers as bars, one bar group per buffer size. */
export function inotifyBarCharts(cells, charts) {
  const varying = varyingParams(cells).filter((p) => p !== 'bufferBytes');
  const out = [];
  for (const group of groupBy(cells, (c) => c.machine).values()) {
    const sizes = [...new Set(group.map((c) => c.params.bufferBytes))].sort((a, b) => a - b);
    const { el, canvas } = panel('throughput by read buffer', `on ${group[0].machine}`);
    const datasets = [...groupBy(group, (c) => describeParams(c.params, varying)).entries()].map(([label, members], i) => ({
      label: label || 'events/s',
      data: sizes.map((s) => {
        const c = members.find((m) => m.params.bufferBytes === s);
        return c ? medianOf(c, 'eventsPerSec') : null;
      }),
      backgroundColor: color(i),
    }));
    const options = baseOptions();
    options.scales = { y: { beginAtZero: true, title: { display: true, text: 'throughput (events/s, median)' }, ticks: { callback: (v) => formatNumber(v) } } };
    charts.push(new Chart(canvas, { type: 'bar', data: { labels: sizes.map(formatSize), datasets }, options }));
    out.push(el);
  }
  return out;
}

const PHASES = ['create', 'readByDir', 'readInterleaved', 'stat', 'unlink'];

/** Seed 001: files per second of each phase, bars grouped by inode size and mount options, a panel per filesystem. */
export function metadataCharts(cells, charts) {
  const groupParams = ['inodeSize', 'mountOptions'];
  const varying = varyingParams(cells).filter((p) => !groupParams.includes(p) && p !== 'fs');
  const out = [];
  for (const group of groupBy(cells, (c) => `${c.machine}\u0000${c.params.fs}\u0000${describeParams(c.params, varying)}`).values()) {
    const first = group[0];
    const { el, canvas } = panel(`${first.params.fs}: files/s by phase`, `on ${first.machine} ${describeParams(first.params, varying)}`);
    const datasets = [...groupBy(group, (c) => describeParams(c.params, groupParams)).entries()].map(([label, members], i) => ({
      label,
      data: PHASES.map((p) => medianOf(members[0], `${p}FilesPerSec`)),
      backgroundColor: color(i),
    }));
    const options = baseOptions();
    options.scales = { y: { beginAtZero: true, title: { display: true, text: 'files/s (median)' }, ticks: { callback: (v) => formatNumber(v) } } };
    charts.push(new Chart(canvas, { type: 'bar', data: { labels: PHASES, datasets }, options }));
    out.push(el);
  }
  return out;
}

/** Anything else: the first headline metric per cell as bars. */
export function genericCharts(cells, metric, charts) {
  const varying = varyingParams(cells);
  const { el, canvas } = panel(`${metric} (median)`);
  const options = baseOptions();
  options.plugins.legend = { display: false };
  charts.push(
    new Chart(canvas, {
      type: 'bar',
      data: {
        labels: cells.map((c) => `${describeParams(c.params, varying) || '(defaults)'} @${c.machine}`),
        datasets: [{ label: metric, data: cells.map((c) => medianOf(c, metric)), backgroundColor: color(0) }],
      },
      options,
    }),
  );
  return [el];
}
