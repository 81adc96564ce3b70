/**
 * Knees of the sweeps a workload declares (contract/workloads: `sweeps`): per machine and
 * combination of the other parameters, the smallest value of the swept parameter whose median
 * is within 5% of the best, next to that machine's cache sizes.
 */
import { describeCell } from '../contract/matrix.js';
import { metricDoc, WORKLOADS } from '../contract/workloads/index.js';
import { findKnee, type SweepPoint } from '../stats/knee.js';
import { formatSize } from './format.js';
import type { CellReport, KneeReport, MachineReport } from './model.js';

/**
 * Fewer points than this are a comparison of a few values (seed 000's second benchmark: three
 * large buffers as bars), not a sweep with a shape whose knee means anything.
 */
const MIN_POINTS = 4;

/**
 * What a knee's L3 cannot tell, said beside it. A size only glibc's sysconf gave (fingerprints
 * recorded before unknown sizes were left null) comes from CPUID leaves a hypervisor fills as it
 * likes: 508 MiB on a 2-vCPU VM whose twin's kernel says 32 MiB. `known`: a fingerprint says
 * where the sizes came from, so a missing L3 is the machine's silence, not a missing record.
 */
export function kneeNote(k: Pick<KneeReport, 'machine' | 'knee' | 'l3Bytes' | 'cacheSource'>, known: boolean): string | null {
  if (k.knee === null || !known) return null;
  if (k.l3Bytes !== null && k.cacheSource === 'sysconf') {
    return `knee/L3 is judged against an L3 of ${formatSize(k.l3Bytes)} that only glibc's sysconf reports: the kernel of ${k.machine} lists no cache topology, so that size is an unverified guess.`;
  }
  if (k.l3Bytes === null) return `${k.machine} reports no L3 size (its kernel lists no cache topology): the knee is not compared with a cache.`;
  return null;
}

export function sweepKnees(
  cells: readonly Omit<CellReport, 'notes'>[],
  machines: readonly MachineReport[],
  varying: (workload: CellReport['workload']) => readonly string[],
): KneeReport[] {
  const out: KneeReport[] = [];
  const caches = new Map(machines.map((m) => [m.machine, m.caches]));
  const sources = new Map(machines.flatMap((m) => (m.fingerprint ? [[m.machine, m.fingerprint.cpu.cacheSource] as const] : [])));
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
        const cacheSource = sources.get(first.machine) ?? null;
        const l3Bytes = machineCaches?.l3Bytes ?? null;
        const note = kneeNote({ machine: first.machine, knee, l3Bytes, cacheSource }, sources.has(first.machine));
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
          cacheSource,
          note,
          kneeOverL3: knee && l3Bytes !== null && l3Bytes > 0 ? knee.x / l3Bytes : null,
        });
      }
    }
  }
  return out;
}
