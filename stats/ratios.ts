/** Summaries of many per-cell ratios into one number, benchstat's "geomean" line. */

/**
 * Geometric mean, exp((1/n) sum ln r_i) (scipy.stats.gmean). The right mean for ratios: a cell
 * twice as fast and one half as fast average to 1, not to 1.25. Values that are not positive
 * and finite have no logarithm and are left out; null when none remain.
 */
export function geometricMean(values: Iterable<number>): number | null {
  let sum = 0;
  let n = 0;
  for (const v of values) {
    if (v > 0 && Number.isFinite(v)) {
      sum += Math.log(v);
      n++;
    }
  }
  return n === 0 ? null : Math.exp(sum / n);
}

/** (candidate / baseline - 1) * 100, or null when the baseline is 0 or either is not finite. */
export function deltaPercent(baseline: number, candidate: number): number | null {
  if (baseline === 0 || !Number.isFinite(baseline) || !Number.isFinite(candidate)) return null;
  return (candidate / baseline - 1) * 100;
}
