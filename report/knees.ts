/**
 * Knees of the sweeps a workload declares (contract/workloads: `sweeps`): per machine and
 * combination of the other parameters, the smallest value of the swept parameter whose median
 * is within 5% of the best, next to that machine's cache sizes.
 */
import { describeCell } from '../contract/matrix.js';
import { metricDoc, WORKLOADS } from '../contract/workloads/index.js';
import { findKnee, type SweepPoint } from '../stats/knee.js';
import type { CellReport, KneeReport, MachineReport } from './model.js';

/**
 * Fewer points than this are a comparison of a few values (seed 000's second benchmark: three
 * large buffers as bars), not a sweep with a shape whose knee means anything.
 */
const MIN_POINTS = 4;

export function sweepKnees(
  cells: readonly Omit<CellReport, 'notes'>[],
  machines: readonly MachineReport[],
  varying: (workload: CellReport['workload']) => readonly string[],
): KneeReport[] {
  const out: KneeReport[] = [];
  const caches = new Map(machines.map((m) => [m.machine, m.caches]));
  for (const workload of new Set(cells.map((c) => c.workload))) {
    for (const { param, metric } of WORKLOADS[workload].sweeps) {
      const direction = metricDoc(workload, metric)?.direction;
      if (direction === undefined || direction === 'neither') continue;
      const others = varying(workload).filter((p) => p !== param);
      const groups = new Map<string, { first: Omit<CellReport, 'notes'>; points: SweepPoint[] }>();
      for (const c of cells) {
        const x = c.params[param];
        const median = c.metrics[metric]?.median;
        if (c.workload !== workload || typeof x !== 'number' || median === undefined) continue;
        const key = JSON.stringify([c.matrix, c.machine, others.map((p) => c.params[p])]);
        let g = groups.get(key);
        if (!g) groups.set(key, (g = { first: c, points: [] }));
        g.points.push({ x, median });
      }
      for (const { first, points } of groups.values()) {
        if (new Set(points.map((p) => p.x)).size < MIN_POINTS) continue;
        const sorted = [...points].sort((a, b) => a.x - b.x);
        const knee = findKnee(sorted, { higherIsBetter: direction === 'higher' });
        const machineCaches = caches.get(first.machine);
        const l3Bytes = machineCaches?.l3Bytes ?? null;
        out.push({
          matrix: first.matrix,
          machine: first.machine,
          workload,
          param,
          metric,
          label: others.length > 0 ? describeCell({ id: first.cellId, workload, params: { ...first.params } }, others) : '',
          fixed: Object.fromEntries(Object.entries(first.params).filter(([k]) => k !== param)),
          points: sorted,
          knee,
          l2Bytes: machineCaches?.l2Bytes ?? null,
          l3Bytes,
          kneeOverL3: knee && l3Bytes !== null && l3Bytes > 0 ? knee.x / l3Bytes : null,
        });
      }
    }
  }
  return out;
}
