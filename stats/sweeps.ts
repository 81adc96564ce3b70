/**
 * Knees of a swept parameter across aggregated cells: one per machine and combination of the
 * other parameters, each next to that machine's L3 size.
 */
import type { CellAggregate } from './aggregate.js';
import { metricDirection } from './direction.js';
import { findKnee, kneeBesideL3, type KneeBeside, type SweepPoint } from './knee.js';

export interface SweepKnee {
  readonly matrix: string;
  readonly machine: string;
  /** The parameters held fixed along this sweep. */
  readonly fixed: Readonly<Record<string, number | string | boolean>>;
  readonly points: readonly SweepPoint[];
  readonly knee: KneeBeside | null;
}

export function sweepKnees(
  cells: readonly CellAggregate[],
  sweep: string,
  metric: string,
  options: { tolerance?: number } = {},
): SweepKnee[] {
  const groups = new Map<string, { cell: CellAggregate; points: SweepPoint[] }>();
  for (const c of cells) {
    const x = c.params[sweep];
    const median = c.metrics[metric]?.summary.median;
    if (typeof x !== 'number' || median === undefined) continue;
    const rest = Object.keys(c.params).filter((k) => k !== sweep).sort().map((k) => [k, c.params[k]]);
    const key = JSON.stringify([c.matrix, c.machine, c.workload, rest]);
    let g = groups.get(key);
    if (!g) groups.set(key, (g = { cell: c, points: [] }));
    g.points.push({ x, median });
  }
  const higherIsBetter = metricDirection(metric) !== 'lower';
  return [...groups.values()].map(({ cell, points }) => {
    const fixed = Object.fromEntries(Object.entries(cell.params).filter(([k]) => k !== sweep));
    const sorted = [...points].sort((a, b) => a.x - b.x);
    const knee = findKnee(sorted, { higherIsBetter, ...(options.tolerance === undefined ? {} : { tolerance: options.tolerance }) });
    return { matrix: cell.matrix, machine: cell.machine, fixed, points: sorted, knee: knee ? kneeBesideL3(knee, cell.l3Bytes) : null };
  });
}
