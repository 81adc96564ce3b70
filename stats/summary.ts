/**
 * Descriptive statistics of one cell's repetitions. Pure functions over plain arrays, so the
 * CLI, the coordinator and the benchmarks all summarise the same way.
 */

export interface Summary {
  readonly n: number;
  readonly median: number;
  readonly mean: number;
  /** Sample standard deviation (n - 1 in the denominator); 0 for a single value. */
  readonly stddev: number;
  /** Coefficient of variation, stddev / |mean|; null when the mean is 0. */
  readonly cv: number | null;
  readonly min: number;
  readonly max: number;
  /** Distribution-free confidence interval of the median; null when n is too small for 95%. */
  readonly ciLow: number | null;
  readonly ciHigh: number | null;
  /** The interval's actual coverage (order statistics give discrete levels at or above 95%). */
  readonly ciLevel: number | null;
}

export function sorted(values: readonly number[]): number[] {
  return [...values].sort((a, b) => a - b);
}

/**
 * A sorted copy, by insertion sort up to 64 values: aggregation sorts hundreds of thousands of
 * arrays of 3 to 100 repetitions, where a comparator call per comparison (Array#sort) or a
 * typed array's backing store costs more than the sort itself.
 */
export function sortedCopy(values: ArrayLike<number>): number[] {
  const n = values.length;
  if (n > 64) return Array.from(new Float64Array(values).sort());
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    const v = values[i] ?? Number.NaN;
    let j = i - 1;
    while (j >= 0 && (out[j] ?? 0) > v) {
      out[j + 1] = out[j] ?? 0;
      j--;
    }
    out[j + 1] = v;
  }
  return out;
}

/** Median of sorted values: the middle one, or the mean of the two middle ones. */
export function medianOfSorted(s: ArrayLike<number>): number {
  const n = s.length;
  if (n === 0) return Number.NaN;
  const mid = Math.floor(n / 2);
  const hi = s[mid] ?? Number.NaN;
  return n % 2 === 1 ? hi : ((s[mid - 1] ?? Number.NaN) + hi) / 2;
}

export function median(values: ArrayLike<number>): number {
  return medianOfSorted(sortedCopy(values));
}

export function mean(values: ArrayLike<number>): number {
  const n = values.length;
  if (n === 0) return Number.NaN;
  let sum = 0;
  for (let i = 0; i < n; i++) sum += values[i] ?? 0;
  return sum / n;
}

/** Sample standard deviation, sqrt(sum((x - mean)^2) / (n - 1)). */
export function stddev(values: ArrayLike<number>, knownMean?: number): number {
  const n = values.length;
  if (n < 2) return 0;
  const m = knownMean ?? mean(values);
  let ss = 0;
  for (let i = 0; i < n; i++) ss += ((values[i] ?? 0) - m) ** 2;
  return Math.sqrt(ss / (n - 1));
}

/** P(B <= k) for B ~ Binomial(n, 1/2), summed in log space so large n does not overflow. */
function binomialHalfCdf(n: number, k: number): number {
  let logC = 0; // log C(n, 0)
  let total = 0;
  for (let i = 0; i <= k; i++) {
    if (i > 0) logC += Math.log(n - i + 1) - Math.log(i);
    total += Math.exp(logC - n * Math.LN2);
  }
  return total;
}

/**
 * Distribution-free confidence interval for the median from order statistics:
 * [x(j), x(n-j+1)] with j the largest rank such that P(B <= j - 1) <= alpha / 2 for
 * B ~ Binomial(n, 1/2); coverage is 1 - 2 P(B <= j - 1). Needs n >= 6 for 95%.
 * Reference: W. J. Conover, Practical Nonparametric Statistics, 3rd ed. (1999), section 3.2.
 */
export function medianConfidenceInterval(
  s: ArrayLike<number>,
  level = 0.95,
): { low: number; high: number; level: number } | null {
  const n = s.length;
  const rank = medianCiRank(n, level);
  if (rank === null) return null;
  const low = s[rank.j - 1];
  const high = s[n - rank.j];
  if (low === undefined || high === undefined) return null;
  return { low, high, level: rank.level };
}

/** The rank j and coverage depend on n and the level only: aggregating 10,000 cells computes each once. */
const ciRanks = new Map<number, Map<number, { j: number; level: number } | null>>();

function medianCiRank(n: number, level: number): { j: number; level: number } | null {
  let byN = ciRanks.get(level);
  if (!byN) ciRanks.set(level, (byN = new Map<number, { j: number; level: number } | null>()));
  const cached = byN.get(n);
  if (cached !== undefined) return cached;
  const alphaHalf = (1 - level) / 2;
  let j = 0;
  while (j + 1 <= n / 2 && binomialHalfCdf(n, j) <= alphaHalf) j++;
  const rank = j === 0 ? null : { j, level: 1 - 2 * binomialHalfCdf(n, j - 1) };
  if (byN.size > 10_000) byN.clear();
  byN.set(n, rank);
  return rank;
}

export function summarize(values: ArrayLike<number>): Summary {
  return summarizeSorted(sortedCopy(values));
}

/** `summarize` of values already sorted ascending. */
export function summarizeSorted(s: readonly number[]): Summary {
  const m = mean(s);
  const sd = stddev(s, m);
  const rank = medianCiRank(s.length, 0.95);
  return {
    n: s.length,
    median: medianOfSorted(s),
    mean: m,
    stddev: sd,
    cv: m !== 0 && s.length > 0 ? sd / Math.abs(m) : null,
    min: s[0] ?? Number.NaN,
    max: s[s.length - 1] ?? Number.NaN,
    // Order statistics x(j) and x(n-j+1), as medianConfidenceInterval gives them.
    ciLow: rank ? (s[rank.j - 1] ?? null) : null,
    ciHigh: rank ? (s[s.length - rank.j] ?? null) : null,
    ciLevel: rank ? rank.level : null,
  };
}
