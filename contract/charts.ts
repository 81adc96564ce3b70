/**
 * What a chart of a report is, as data: the HTML report and the dashboard draw these specs with
 * Chart.js, and each workload's slice says which charts its cells get
 * (contract/workloads/<name>/charts.ts). Pure data and pure functions: no DOM, no Chart.js, so
 * the choice of charts is linted and tested like any other code, and runs in Node and in the
 * browser alike (report/charts.ts).
 *
 * The input is the slice of a report the charts read, as a zod schema: the dashboard parses
 * the report it fetches with it. Every point is a median from the report, never a single run.
 */
import { z } from 'zod';

const ParamValue = z.union([z.number(), z.string(), z.boolean()]);

export const ChartCell = z.object({
  matrix: z.string(),
  cellId: z.string(),
  machine: z.string(),
  workload: z.string(),
  params: z.record(z.string(), ParamValue),
  label: z.string(),
  ok: z.number(),
  metrics: z.record(z.string(), z.object({ median: z.number() })),
});
export type ChartCell = z.infer<typeof ChartCell>;

export const ChartKnee = z.object({
  matrix: z.string(),
  machine: z.string(),
  workload: z.string(),
  param: z.string(),
  metric: z.string(),
  label: z.string(),
  fixed: z.record(z.string(), ParamValue),
  points: z.array(z.object({ x: z.number(), median: z.number() })),
  knee: z.object({ x: z.number(), median: z.number() }).nullable(),
  l3Bytes: z.number().nullable(),
});
export type ChartKnee = z.infer<typeof ChartKnee>;

/** The part of a report charts read: its cells with their medians, its knees and how many machines ran it. */
export const ChartInput = z.object({
  cells: z.array(ChartCell),
  knees: z.array(ChartKnee),
  machines: z.array(z.object({ machine: z.string() })),
  /** Per workload, the headline metrics in order. */
  metrics: z.array(z.object({ workload: z.string(), metrics: z.array(z.object({ name: z.string(), headline: z.boolean() })) })),
});
export type ChartInput = z.infer<typeof ChartInput>;

/** How an axis's tick values read: compact numbers (1.2M), sizes from a log2 scale (2^20 -> 1MiB), or as they are. */
export type TickFormat = 'compact' | 'log2-size' | 'plain';

export interface ChartAxis {
  readonly title: string;
  readonly ticks: TickFormat;
  readonly position?: 'left' | 'right';
  /** A linear x axis (points with x and y) instead of categories. */
  readonly linear?: boolean;
  /** Gridlines of a second y axis would cross the first's. */
  readonly grid?: boolean;
}

type ChartPoint = { readonly x: number; readonly y: number };

export interface ChartSeries {
  readonly label: string;
  /** Values per category, or points on a linear x axis. */
  readonly data: readonly (number | null)[] | readonly ChartPoint[];
  readonly color: string;
  readonly axis?: 'y' | 'y1';
  /** A series drawn as scattered markers over a line chart (a knee). */
  readonly scatter?: boolean;
  readonly dashed?: boolean;
  readonly marker?: 'circle' | 'rect' | 'triangle';
  readonly markerSize?: number;
  /** A hollow marker (white fill) stands out on its line. */
  readonly hollow?: boolean;
}

/** A vertical line across the chart at x (the machine's L3 size), with its label. */
export interface ChartMarker {
  readonly x: number;
  readonly label: string;
}

export interface ChartSpec {
  readonly type: 'line' | 'bar';
  readonly title: string;
  readonly subtitle?: string;
  /** Data attributes of the chart's figure, so a page or test finds a chart by what it shows. */
  readonly data?: Readonly<Record<string, string>>;
  /** Category labels of a bar chart. */
  readonly labels?: readonly string[];
  readonly series: readonly ChartSeries[];
  readonly x?: ChartAxis;
  readonly y: ChartAxis;
  readonly y1?: ChartAxis;
  readonly markers?: readonly ChartMarker[];
  readonly legend?: boolean;
  /** What was cut to keep the chart readable (set by report/charts.ts). */
  readonly capped?: string;
}

const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#4d7c0f', '#be185d', '#854d0e', '#475569'];
export const seriesColor = (i: number): string => COLORS[i % COLORS.length] ?? '#2563eb';

export function groupBy<T>(items: readonly T[], keyOf: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const key = keyOf(item);
    const list = groups.get(key);
    if (list) list.push(item);
    else groups.set(key, [item]);
  }
  return groups;
}

/** A cell label (`files=128 bufferBytes=8MiB`) without the named parameters: what is left tells series apart. */
export function labelWithout(label: string, names: readonly string[]): string {
  return label
    .split(' ')
    .filter((t) => !names.some((n) => t.startsWith(`${n}=`)))
    .join(' ')
    .replace(/^\(all\)$|^\(defaults\)$/, '');
}

/** A cell's median of a metric, as the report states it; null when the metric was not observed. */
export function medianOf(cell: ChartCell, metric: string): number | null {
  const s = cell.metrics[metric];
  return s && Number.isFinite(s.median) ? s.median : null;
}

/** A workload's charts of its ok cells (and the knees of its sweeps); none leaves the generic chart. */
export type WorkloadCharts = (input: ChartInput) => ChartSpec[];
