/**
 * Outlier flags from the modified z-score, which uses the median and the median absolute
 * deviation instead of the mean and standard deviation: one wild run cannot hide itself by
 * inflating the spread it is measured against, as it does with a plain z-score at n = 5.
 */
import { median } from './summary.js';


/** Iglewicz & Hoaglin's cut-off: |M| above 3.5 is a potential outlier. */
export const MODIFIED_Z_THRESHOLD = 3.5;

/** Median absolute deviation, median(|x_i - median(x)|), unscaled (scipy.stats.median_abs_deviation(x)). */
export function medianAbsoluteDeviation(values: readonly number[], knownMedian?: number): number {
  const m = knownMedian ?? median(values);
  return median(values.map((v) => Math.abs(v - m)));
}

/**
 * The same MAD from values already sorted, without allocating: the deviations |x - m| grow
 * outwards from the median on both sides, so merging the two runs finds the middle one in
 * O(n) steps.
 */
export function madOfSorted(s: ArrayLike<number>, m: number): number {
  const n = s.length;
  if (n === 0) return Number.NaN;
  let j = 0;
  while (j < n && (s[j] ?? 0) < m) j++;
  let i = j - 1;
  const upper = n >> 1;
  let prev = Number.NaN;
  let cur = Number.NaN;
  for (let k = 0; k <= upper; k++) {
    const left = i >= 0 ? m - (s[i] ?? 0) : Number.POSITIVE_INFINITY;
    const right = j < n ? (s[j] ?? 0) - m : Number.POSITIVE_INFINITY;
    prev = cur;
    if (left <= right) {
      cur = left;
      i--;
    } else {
      cur = right;
      j++;
    }
  }
  return n % 2 === 1 ? cur : (prev + cur) / 2;
}

/**
 * Whether any value is an outlier, from the sorted values alone: only the two extremes can be.
 * Used to skip `outlierIndexes` (which allocates) for the many cells without one.
 */
export function hasOutlierSorted(s: ArrayLike<number>, m: number, threshold = MODIFIED_Z_THRESHOLD): boolean {
  const n = s.length;
  const lo = s[0];
  const hi = s[n - 1];
  if (lo === undefined || hi === undefined || lo === hi) return false;
  const mad = madOfSorted(s, m);
  if (!(mad > 0)) return true; // the mean-absolute-deviation fallback decides; let outlierIndexes look
  return Math.max(m - lo, hi - m) > (threshold * mad) / 0.6745;
}

/**
 * Modified z-scores M_i = 0.6745 (x_i - median) / MAD, where 0.6745 (the 0.75 quantile of the
 * standard normal) makes MAD estimate one standard deviation for normal data.
 * Reference: B. Iglewicz & D. C. Hoaglin, How to Detect and Handle Outliers, ASQC Basic
 * References in Quality Control vol. 16 (1993), section 3.
 * When MAD is 0 (at least half the values are equal) the score is (x_i - median) /
 * (1.253314 * meanAD), with meanAD the mean absolute deviation from the median and 1.253314 =
 * sqrt(pi/2) its normal-consistency factor, as IBM SPSS does; all values equal gives all zeros.
 */
export function modifiedZScores(values: readonly number[], knownMedian?: number): number[] {
  if (values.length === 0) return [];
  const m = knownMedian ?? median(values);
  const mad = medianAbsoluteDeviation(values, m);
  if (mad > 0) return values.map((v) => (0.6745 * (v - m)) / mad);
  let meanAd = 0;
  for (const v of values) meanAd += Math.abs(v - m);
  meanAd /= values.length;
  if (meanAd === 0) return values.map(() => 0);
  return values.map((v) => (v - m) / (1.253314 * meanAd));
}

const NONE: readonly number[] = Object.freeze([]);

/**
 * Indexes (into `values`) of the values whose modified z-score exceeds the threshold in
 * magnitude. Aggregation calls this for every cell and metric, so the common case (MAD > 0) is
 * decided without building the scores: |0.6745 (x - median) / MAD| > t  <=>  |x - median| >
 * t MAD / 0.6745. The result is a shared empty array when there is no outlier.
 */
export function outlierIndexes(values: readonly number[], threshold = MODIFIED_Z_THRESHOLD, knownMedian?: number): readonly number[] {
  if (values.length === 0) return NONE;
  const m = knownMedian ?? median(values);
  const mad = medianAbsoluteDeviation(values, m);
  let out: number[] | null = null;
  if (mad > 0) {
    const limit = (threshold * mad) / 0.6745;
    for (let i = 0; i < values.length; i++) {
      if (Math.abs((values[i] ?? m) - m) > limit) (out ??= []).push(i);
    }
    return out ?? NONE;
  }
  const scores = modifiedZScores(values, m);
  for (let i = 0; i < scores.length; i++) {
    if (Math.abs(scores[i] ?? 0) > threshold) (out ??= []).push(i);
  }
  return out ?? NONE;
}
