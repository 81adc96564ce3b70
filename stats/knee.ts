/**
 * Knee detection for a swept parameter: the smallest value that gets within a tolerance of the
 * best result, so a claim such as seed 000's "the optimal buffer is about the L3 size" can be
 * checked machine by machine.
 */

export interface SweepPoint {
  /** The swept parameter's value (bytes for bufferBytes). */
  readonly x: number;
  /** The cell's median of the metric. */
  readonly median: number;
}

export interface Knee {
  /** Smallest x whose median is within the tolerance of the best. */
  readonly x: number;
  readonly median: number;
  /** Where the best median is, and what it is. */
  readonly bestX: number;
  readonly best: number;
  readonly tolerance: number;
}

/**
 * With best = max(median) (or min when lower is better), the knee is the smallest x with
 * median >= (1 - tolerance) best (or median <= (1 + tolerance) best). Points whose median is not
 * finite are ignored; null when none remain. The tolerance defaults to 5%, about the run-to-run
 * noise of a quiet machine: asking for less would chase noise.
 */
export function findKnee(
  points: readonly SweepPoint[],
  options: { tolerance?: number; higherIsBetter?: boolean } = {},
): Knee | null {
  const tolerance = options.tolerance ?? 0.05;
  const higher = options.higherIsBetter ?? true;
  const usable = points.filter((p) => Number.isFinite(p.median) && Number.isFinite(p.x)).sort((a, b) => a.x - b.x);
  const first = usable[0];
  if (!first) return null;
  let best = first;
  for (const p of usable) if (higher ? p.median > best.median : p.median < best.median) best = p;
  const good = (p: SweepPoint) =>
    higher ? p.median >= (1 - tolerance) * best.median : p.median <= (1 + tolerance) * best.median;
  const knee = usable.find(good) ?? best;
  return { x: knee.x, median: knee.median, bestX: best.x, best: best.median, tolerance };
}
