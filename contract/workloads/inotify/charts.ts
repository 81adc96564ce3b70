/**
 * The inotify workload's charts, after seed 000's figures: a read-buffer sweep as lines (events/s
 * and total events against the buffer on a log2 scale, the knee marked, the L3 size as a line),
 * and a few buffers as bars when no sweep is long enough for a knee.
 */
import { groupBy, labelWithout, medianOf, seriesColor, type ChartCell, type ChartInput, type ChartKnee, type ChartSeries, type ChartSpec } from '../../charts.js';
import { formatSize } from '../../units.js';

/** The report's cell a knee point stands for: the same matrix, machine and fixed parameters, at x. */
function cellAt(input: ChartInput, k: ChartKnee, x: number): ChartCell | undefined {
  return input.cells.find((c) => c.matrix === k.matrix && c.machine === k.machine && c.params[k.param] === x && Object.entries(k.fixed).every(([p, v]) => c.params[p] === v));
}

/**
 * Seed 000, benchmark 1: per file count (and machine), x = read buffer on a log2 scale, left
 * axis throughput (events/s, median), right axis total events per run (median); the machine's
 * L3 size as a vertical line and the report's knee (smallest buffer within 5% of the best)
 * marked. Each of the report's sweeps is one series.
 */
function sweepCharts(input: ChartInput, sweeps: readonly ChartKnee[]): ChartSpec[] {
  const multiMachine = input.machines.length > 1;
  return [...groupBy(sweeps, (k) => `${k.machine}\u0000${String(k.fixed['files'])}`).values()].flatMap((group) => {
    const first = group[0];
    if (first === undefined) return [];
    const l3 = first.l3Bytes;
    const files = String(first.fixed['files']);
    const series = group.flatMap((k, i): ChartSeries[] => {
      const label = labelWithout(k.label, ['files']);
      const named = (what: string) => (label ? `${label}: ${what}` : what);
      const events = k.points.flatMap((p) => {
        const cell = cellAt(input, k, p.x);
        const y = cell ? medianOf(cell, 'events') : null;
        return y === null ? [] : [{ x: Math.log2(p.x), y }];
      });
      return [
        { label: named('events/s'), axis: 'y', data: k.points.map((p) => ({ x: Math.log2(p.x), y: p.median })), color: seriesColor(i) },
        // The same hue, lighter: the pair reads as one series on two axes.
        { label: named('total events'), axis: 'y1', data: events, color: `${seriesColor(i)}99`, dashed: true, marker: 'rect' },
        ...(k.knee ? [{ label: named('knee'), axis: 'y' as const, scatter: true, data: [{ x: Math.log2(k.knee.x), y: k.knee.median }], color: seriesColor(i), marker: 'triangle' as const, markerSize: 8, hollow: true }] : []),
      ];
    });
    return [
      {
        type: 'line',
        title: `${files} files`,
        subtitle: `${multiMachine ? `on ${first.machine}` : ''}${l3 ? ` (L3 ${formatSize(l3)})` : ''}`,
        data: { files, machine: first.machine },
        series,
        x: { title: 'read buffer (log2 scale)', ticks: 'log2-size', linear: true },
        y: { title: 'throughput (events/s, median)', ticks: 'compact', position: 'left' },
        y1: { title: 'total events per run (median)', ticks: 'compact', position: 'right', grid: false },
        markers: l3 ? [{ x: Math.log2(l3), label: `L3 ${formatSize(l3)}` }] : [],
      },
    ];
  });
}

/** Seed 000, benchmark 2: a few large buffers as bars, one bar group per buffer size. */
function barCharts(cells: readonly ChartCell[]): ChartSpec[] {
  return [...groupBy(cells, (c) => c.machine).values()].flatMap((group) => {
    const sizes = [...new Set(group.map((c) => Number(c.params['bufferBytes'])))].sort((a, b) => a - b);
    const series = [...groupBy(group, (c) => labelWithout(c.label, ['bufferBytes'])).entries()].map(([label, members], i) => ({
      label: label || 'events/s',
      data: sizes.map((s) => {
        const c = members.find((m) => m.params['bufferBytes'] === s);
        return c ? medianOf(c, 'eventsPerSec') : null;
      }),
      color: seriesColor(i),
    }));
    return [{ type: 'bar' as const, title: 'throughput by read buffer', subtitle: `on ${group[0]?.machine ?? ''}`, labels: sizes.map((s) => formatSize(s)), series, y: { title: 'throughput (events/s, median)', ticks: 'compact' as const } }];
  });
}

export function inotifyCharts(input: ChartInput): ChartSpec[] {
  const sweeps = input.knees.filter((k) => k.param === 'bufferBytes');
  return sweeps.length > 0 ? sweepCharts(input, sweeps) : barCharts(input.cells);
}
