/**
 * A confidence interval for the ratio candidate / baseline, from the Hodges-Lehmann shift
 * interval on log values.
 *
 * Why this and not a bootstrap: benchmark cells have 3 to 10 repetitions, where a bootstrap of
 * a median sees only a handful of distinct resamples and its percentile interval undercovers;
 * the rank interval is distribution-free with an exact, stated coverage at any n, needs no
 * random numbers (so the same files always give the same interval), and is the interval that
 * inverts the very Mann-Whitney test that decides `~`, so "the interval excludes 1" and "p <
 * 0.05" agree. Taking logs turns "the candidate is r times the baseline", the natural model for
 * throughput and durations, into a shift.
 */
import { exactUCdf } from './mann-whitney.js';
import { normalQuantile } from './normal.js';

export interface RatioInterval {
  /** exp(median of the pairwise log ratios): the Hodges-Lehmann estimate of the ratio. */
  readonly estimate: number;
  readonly low: number;
  readonly high: number;
  /** Coverage actually achieved (exact intervals come in discrete levels at or above the one asked). */
  readonly level: number;
  readonly method: 'exact' | 'asymptotic';
}

/** The values' natural logarithms; null when one is not positive and finite (it has no ratio). */
function logs(values: readonly number[]): Float64Array | null {
  const out = new Float64Array(values.length);
  for (let i = 0; i < values.length; i++) {
    const v = values[i] ?? Number.NaN;
    if (!(v > 0 && Number.isFinite(v))) return null;
    out[i] = Math.log(v);
  }
  return out;
}

/**
 * Where the pairwise differences of small samples are sorted, reused: compare asks for 70,000
 * intervals of 5 x 5 runs, and a buffer of its own for each was an allocation outside V8's heap
 * apiece. Larger samples get their own, so no call leaves megabytes held here.
 */
const scratch = new Float64Array(4096);

/** Largest m*n for which the interval's rank uses the exact null distribution of U. */
const EXACT_LIMIT = 2500;

/**
 * Hodges-Lehmann interval for the ratio y/x.
 *
 * With d_(1) <= ... <= d_(mn) the sorted pairwise differences log(y_j) - log(x_i), the interval
 * for the log shift is [d_(k), d_(mn+1-k)], where k is the largest integer with
 * P(U <= k - 1) <= alpha/2 under the null distribution of the Mann-Whitney U for sizes m, n; its
 * coverage is 1 - 2 P(U <= k - 1). For m*n above 2500, k = floor(mn/2 - z_(1-alpha/2)
 * sqrt(mn(m+n+1)/12)) from the normal approximation. The ratio interval is
 * [exp(d_(k)), exp(d_(mn+1-k))].
 * References: M. Hollander, D. A. Wolfe & E. Chicken, Nonparametric Statistical Methods, 3rd ed.
 * (2014), section 4.3; D. F. Bauer, J. Amer. Statist. Assoc. 67 (1972) 687-690.
 * Returns null when a value is not positive (no ratio) or the samples are too small for the
 * level (m = n = 3 cannot reach 95%: the smallest two-sided alpha is 0.1).
 */
export function ratioConfidenceInterval(
  baseline: readonly number[],
  candidate: readonly number[],
  level = 0.95,
): RatioInterval | null {
  const m = baseline.length;
  const n = candidate.length;
  if (m === 0 || n === 0) return null;
  // Typed arrays and plain loops: compare calls this once per cell and metric, 70,000 times for
  // two matrices of 10,000 cells, where copies and closures were most of its cost.
  const logX = logs(baseline);
  const logY = logs(candidate);
  if (logX === null || logY === null) return null;
  const diffs = m * n <= scratch.length ? scratch.subarray(0, m * n) : new Float64Array(m * n);
  let i = 0;
  if (m * n <= 64) {
    // Sorted as they are made, by insertion: for the 25 differences of 5 x 5 runs, a typed
    // array's sort cost more than the rest of the interval (stats/summary.ts sortedCopy likewise).
    // The order is the sort's: no difference is NaN or -0 (logs of positive finite values).
    for (const ly of logY) {
      for (const lx of logX) {
        const d = ly - lx;
        let j = i++;
        while (j > 0 && (diffs[j - 1] ?? 0) > d) {
          diffs[j] = diffs[j - 1] ?? 0;
          j--;
        }
        diffs[j] = d;
      }
    }
  } else {
    for (const ly of logY) for (const lx of logX) diffs[i++] = ly - lx;
    diffs.sort();
  }
  const mn = m * n;
  const half = (1 - level) / 2;
  let k: number;
  let achieved: number;
  let method: RatioInterval['method'];
  if (mn <= EXACT_LIMIT) {
    const cdf = exactUCdf(m, n);
    k = 0;
    while (k < mn / 2 && (cdf[k] ?? 1) <= half) k++;
    achieved = k === 0 ? 0 : 1 - 2 * (cdf[k - 1] ?? 1);
    method = 'exact';
  } else {
    const z = normalQuantile(1 - half);
    k = Math.floor(mn / 2 - z * Math.sqrt((mn * (m + n + 1)) / 12));
    achieved = level;
    method = 'asymptotic';
  }
  if (k < 1) return null;
  const lo = diffs[k - 1];
  const hi = diffs[mn - k];
  if (lo === undefined || hi === undefined) return null;
  const mid = Math.floor(mn / 2);
  const medianDiff = mn % 2 === 1 ? (diffs[mid] ?? 0) : ((diffs[mid - 1] ?? 0) + (diffs[mid] ?? 0)) / 2;
  return { estimate: Math.exp(medianDiff), low: Math.exp(lo), high: Math.exp(hi), level: achieved, method };
}
