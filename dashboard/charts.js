// Charts like seed 000's figures, drawn with Chart.js (the UMD build, loaded as the global
// `Chart` by index.html). Every point is a median from the coordinator's report (cells and
// knees of GET /v1/matrices/:id/results), never a single run and never computed here.
import { formatCompact, formatSize, groupBy, h, medianOf } from './util.js';

const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#4d7c0f', '#be185d'];
const color = (i) => COLORS[i % COLORS.length];

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

/** A cell label (`files=128 bufferBytes=8MiB`) without the named parameters: what is left tells series apart. */
function labelWithout(label, names) {
  return label
    .split(' ')
    .filter((t) => !names.some((n) => t.startsWith(`${n}=`)))
    .join(' ')
    .replace(/^\(all\)$|^\(defaults\)$/, '');
}

/** The report's cell a knee point stands for: the same matrix, machine and fixed parameters, at x. */
function cellAt(report, k, x) {
  return report.cells.find(
    (c) => c.matrix === k.matrix && c.machine === k.machine && c.params[k.param] === x && Object.entries(k.fixed).every(([p, v]) => c.params[p] === v),
  );
}

/**
 * Seed 000, benchmark 1: per file count (and machine), x = read buffer on a log2 scale, left
 * axis throughput (events/s, median), right axis total events per run (median); the machine's
 * L3 size as a vertical line and the report's knee (smallest buffer within 5% of the best)
 * marked. Each of the report's sweeps is one series.
 */
export function inotifySweepCharts(report, charts) {
  const sweeps = report.knees.filter((k) => k.workload === 'inotify' && k.param === 'bufferBytes');
  const multiMachine = report.machines.length > 1;
  const out = [];
  for (const group of groupBy(sweeps, (k) => `${k.machine}\u0000${k.fixed.files}`).values()) {
    const first = group[0];
    const l3 = first.l3Bytes;
    const { el, canvas } = panel(`${first.fixed.files} files`, `${multiMachine ? `on ${first.machine}` : ''}${l3 ? ` (L3 ${formatSize(l3)})` : ''}`);
    el.dataset.files = String(first.fixed.files);
    el.dataset.machine = first.machine;
    const datasets = [];
    group.forEach((k, i) => {
      const label = labelWithout(k.label, ['files']);
      const named = (what) => (label ? `${label}: ${what}` : what);
      datasets.push({
        label: named('events/s'),
        yAxisID: 'y',
        data: k.points.map((p) => ({ x: Math.log2(p.x), y: p.median })),
        borderColor: color(i),
        backgroundColor: color(i),
        pointRadius: 3,
      });
      const events = k.points.flatMap((p) => {
        const cell = cellAt(report, k, p.x);
        const y = cell ? medianOf(cell, 'events') : null;
        return y === null ? [] : [{ x: Math.log2(p.x), y }];
      });
      datasets.push({
        label: named('total events'),
        yAxisID: 'y1',
        data: events,
        // The same hue, lighter: the pair reads as one series on two axes.
        borderColor: `${color(i)}99`,
        backgroundColor: `${color(i)}99`,
        borderDash: [5, 4],
        pointStyle: 'rect',
        pointRadius: 3,
      });
      if (k.knee) {
        datasets.push({
          label: named('knee'),
          yAxisID: 'y',
          type: 'scatter',
          data: [{ x: Math.log2(k.knee.x), y: k.knee.median }],
          borderColor: color(i),
          backgroundColor: '#fff',
          pointStyle: 'triangle',
          pointRadius: 8,
          borderWidth: 2,
        });
      }
    });
    const options = baseOptions();
    options.scales = {
      x: {
        type: 'linear',
        title: { display: true, text: 'read buffer (log2 scale)' },
        ticks: { stepSize: 1, callback: (v) => (Number.isInteger(v) ? formatSize(2 ** v) : '') },
      },
      y: { position: 'left', beginAtZero: true, title: { display: true, text: 'throughput (events/s, median)' }, ticks: { callback: (v) => formatCompact(v) } },
      y1: {
        position: 'right',
        beginAtZero: true,
        grid: { drawOnChartArea: false },
        title: { display: true, text: 'total events per run (median)' },
        ticks: { callback: (v) => formatCompact(v) },
      },
    };
    options.plugins.fsbenchMarkers = { lines: l3 ? [{ x: Math.log2(l3), label: `L3 ${formatSize(l3)}` }] : [] };
    charts.push(new Chart(canvas, { type: 'line', data: { datasets }, options, plugins: [markerPlugin] }));
    out.push(el);
  }
  return out;
}

/** Seed 000, benchmark 2: a few large buffers as bars, one bar group per buffer size. */
export function inotifyBarCharts(cells, charts) {
  const out = [];
  for (const group of groupBy(cells, (c) => c.machine).values()) {
    const sizes = [...new Set(group.map((c) => c.params.bufferBytes))].sort((a, b) => a - b);
    const { el, canvas } = panel('throughput by read buffer', `on ${group[0].machine}`);
    const datasets = [...groupBy(group, (c) => labelWithout(c.label, ['bufferBytes'])).entries()].map(([label, members], i) => ({
      label: label || 'events/s',
      data: sizes.map((s) => {
        const c = members.find((m) => m.params.bufferBytes === s);
        return c ? medianOf(c, 'eventsPerSec') : null;
      }),
      backgroundColor: color(i),
    }));
    const options = baseOptions();
    options.scales = { y: { beginAtZero: true, title: { display: true, text: 'throughput (events/s, median)' }, ticks: { callback: (v) => formatCompact(v) } } };
    charts.push(new Chart(canvas, { type: 'bar', data: { labels: sizes.map(formatSize), datasets }, options }));
    out.push(el);
  }
  return out;
}

const PHASES = ['create', 'readByDir', 'readInterleaved', 'stat', 'unlink'];

/** Seed 001: files per second of each phase, bars grouped by inode size and mount options, a panel per filesystem. */
export function metadataCharts(cells, charts) {
  const seriesParams = ['inodeSize', 'mountOptions'];
  const out = [];
  for (const group of groupBy(cells, (c) => `${c.machine}\u0000${c.params.fs}\u0000${labelWithout(c.label, [...seriesParams, 'fs'])}`).values()) {
    const first = group[0];
    const { el, canvas } = panel(`${first.params.fs}: files/s by phase`, `on ${first.machine} ${labelWithout(first.label, [...seriesParams, 'fs'])}`);
    const seriesOf = (c) => c.label.split(' ').filter((t) => seriesParams.some((n) => t.startsWith(`${n}=`))).join(' ') || 'files/s';
    const datasets = [...groupBy(group, seriesOf).entries()].map(([label, members], i) => ({
      label,
      data: PHASES.map((p) => medianOf(members[0], `${p}FilesPerSec`)),
      backgroundColor: color(i),
    }));
    const options = baseOptions();
    options.scales = { y: { beginAtZero: true, title: { display: true, text: 'files/s (median)' }, ticks: { callback: (v) => formatCompact(v) } } };
    charts.push(new Chart(canvas, { type: 'bar', data: { labels: PHASES, datasets }, options }));
    out.push(el);
  }
  return out;
}

/** Anything else: the first headline metric per cell as bars. */
export function genericCharts(cells, metric, charts) {
  const { el, canvas } = panel(`${metric} (median)`);
  const options = baseOptions();
  options.plugins.legend = { display: false };
  charts.push(
    new Chart(canvas, {
      type: 'bar',
      data: {
        labels: cells.map((c) => `${c.label} @${c.machine}`),
        datasets: [{ label: metric, data: cells.map((c) => medianOf(c, metric)), backgroundColor: color(0) }],
      },
      options,
    }),
  );
  return [el];
}
