/**
 * Which charts a report gets: the one choice the HTML report (in Node, when the page is made)
 * and the dashboard (in the browser, bundled) both make with this module. Each workload's slice
 * charts its own ok cells (WorkloadContract.charts); a workload without charts gets a bar of its
 * first headline metric per cell. A chart with more series or bars than a reader can tell apart
 * is cut here, and says so.
 */
import { ChartInput, medianOf, seriesColor, type ChartCell, type ChartSpec } from '../contract/charts.js';
import { WORKLOAD_NAMES, WORKLOADS, type WorkloadName } from '../contract/workloads/index.js';
import type { Report } from './model.js';

const MAX_CHART_SERIES = 24;
const MAX_CHART_BARS = 200;
const MAX_CHART_PANELS = 60;
/** Cells the charts get: enough for any chart one can read, and it keeps a page's data block a few MB at most. */
export const MAX_CHART_CELLS = 2_000;

/** What the charts read of a report, cut to the medians and to MAX_CHART_CELLS cells. */
export function chartInput(report: Report): ChartInput {
  return {
    cells: report.cells.slice(0, MAX_CHART_CELLS).map((c) => ({
      matrix: c.matrix,
      cellId: c.cellId,
      machine: c.machine,
      workload: c.workload,
      params: { ...c.params },
      label: c.label,
      ok: c.ok,
      metrics: Object.fromEntries(Object.entries(c.metrics).map(([name, s]) => [name, { median: s.median }])),
    })),
    knees: report.knees.map((k) => ({
      matrix: k.matrix,
      machine: k.machine,
      workload: k.workload,
      param: k.param,
      metric: k.metric,
      label: k.label,
      fixed: { ...k.fixed },
      points: k.points.map((p) => ({ x: p.x, median: p.median })),
      knee: k.knee ? { x: k.knee.x, median: k.knee.median } : null,
      l3Bytes: k.l3Bytes,
    })),
    machines: report.machines.map((m) => ({ machine: m.machine })),
    metrics: report.metrics.map((m) => ({ workload: m.workload, metrics: m.metrics.map((i) => ({ name: i.name, headline: i.headline })) })),
  };
}

/** Anything a workload does not chart itself: the first headline metric per cell as bars. */
function genericChart(cells: readonly ChartCell[], metric: string): ChartSpec {
  return {
    type: 'bar',
    title: `${metric} (median)`,
    labels: cells.map((c) => `${c.label} @${c.machine}`),
    series: [{ label: metric, data: cells.map((c) => medianOf(c, metric)), color: seriesColor(0) }],
    y: { title: metric, ticks: 'compact' },
    legend: false,
  };
}

/** A chart cut to what can be read, saying what was cut. */
function cap(chart: ChartSpec): ChartSpec {
  const said: string[] = [];
  let { series, labels } = chart;
  if (series.length > MAX_CHART_SERIES) {
    said.push(`shows only the first ${MAX_CHART_SERIES} of ${series.length} series`);
    series = series.slice(0, MAX_CHART_SERIES);
  }
  if (labels && labels.length > MAX_CHART_BARS) {
    said.push(`shows only the first ${MAX_CHART_BARS} of ${labels.length} bars`);
    labels = labels.slice(0, MAX_CHART_BARS);
    series = series.map((s) => ({ ...s, data: s.data.slice(0, MAX_CHART_BARS) }));
  }
  return said.length === 0 ? chart : { ...chart, series, ...(labels ? { labels } : {}), capped: said.join('; ') };
}

const isWorkload = (w: string): w is WorkloadName => (WORKLOAD_NAMES as readonly string[]).includes(w);

export interface Charts {
  readonly charts: readonly ChartSpec[];
  /** Said under the charts when there were more than MAX_CHART_PANELS, or none to draw. */
  readonly note: string | null;
}

/** The report's charts: per workload present, its own charts of its ok cells (and its knees). */
export function chartsOf(input: ChartInput): Charts {
  const all = [...new Set(input.cells.map((c) => c.workload))].flatMap((w) => {
    const cells = input.cells.filter((c) => c.ok > 0 && c.workload === w);
    if (cells.length === 0) return [];
    const part = { ...input, cells, knees: input.knees.filter((k) => k.workload === w) };
    const own = isWorkload(w) ? WORKLOADS[w].charts : undefined;
    if (own) return own(part);
    const headline = input.metrics.find((m) => m.workload === w)?.metrics.find((m) => m.headline)?.name ?? 'value';
    return [genericChart(cells, headline)];
  });
  const kept = all.slice(0, MAX_CHART_PANELS).map(cap);
  const note = all.length === 0 ? 'No successful run to draw.' : all.length > kept.length ? `Only the first ${MAX_CHART_PANELS} of ${all.length} charts are drawn.` : null;
  return { charts: kept, note };
}
