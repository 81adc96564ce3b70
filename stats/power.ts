/**
 * How small a change a comparison could have seen: the minimum detectable effect at a given
 * power, so that "no regression" reads as "no regression larger than X%". Compare, gate and
 * history state it next to every verdict that found nothing.
 *
 * The shift a two-sided two-sample test detects with probability `power` at level `alpha` is
 * (t_{1-α/2,df} + t_{power,df}) · σ · sqrt(1/n1 + 1/n2) (the normal-theory power formula with t
 * quantiles for small samples: J. Cohen, Statistical Power Analysis for the Behavioral Sciences,
 * 2nd ed. (1988), ch. 2; Lehr's rule n = 16/d² per group at 5% and 80% is its large-sample form).
 * fsbench judges with the Mann-Whitney test, which under normal noise needs π/3 times the runs of
 * the t-test (its asymptotic relative efficiency, 3/π: E. L. Lehmann, Nonparametrics (1975),
 * §2.4), so the shift grows by sqrt(π/3). And the exact test cannot reach `alpha` at all with too
 * few runs (3 and 3: p >= 0.1): then no change is detectable and the answer says so.
 */
import { smallestPossiblePValue } from './mann-whitney.js';
import { studentTwoSidedP } from './student-t.js';
import { mean, median, stddev } from './summary.js';

export interface PowerOptions {
  /** Two-sided significance level; default 0.05. */
  readonly alpha?: number;
  /** Probability of detecting a change of the answer's size; default 0.8. */
  readonly power?: number;
  /** The test that judges: Mann-Whitney (compare, gate; the default) or Student's t (history's change points). */
  readonly test?: 'mann-whitney' | 't';
}

/**
 * Quantiles already found, by q and df: a comparison asks the same two (alpha's and power's, at
 * one df) for each of its rows, and each bisection costs about a hundred incomplete beta
 * functions (most of the time of a compare of 10,000 cells before this cache).
 */
const quantiles = new Map<string, number>();

/** The t quantile: the t with P(T <= t) = q for `df` degrees of freedom, by bisection on the tail. */
export function studentQuantile(q: number, df: number): number {
  const key = `${q}:${df}`;
  let t = quantiles.get(key);
  if (t === undefined) {
    t = bisectStudentQuantile(q, df);
    // Few pairs occur (one df per pair of run counts); never let odd callers grow it without end.
    if (quantiles.size >= 1024) quantiles.clear();
    quantiles.set(key, t);
  }
  return t;
}

function bisectStudentQuantile(q: number, df: number): number {
  if (!(q > 0 && q < 1) || !(df > 0)) return Number.NaN;
  if (q === 0.5) return 0;
  const upper = q > 0.5;
  const tail = upper ? 1 - q : q; // P(T > t) for the |t| sought
  let lo = 0;
  let hi = 1;
  while (studentTwoSidedP(hi, df) / 2 > tail) hi *= 2;
  for (let i = 0; i < 200 && hi - lo > 1e-12 * hi; i++) {
    const mid = (lo + hi) / 2;
    if (studentTwoSidedP(mid, df) / 2 > tail) lo = mid;
    else hi = mid;
  }
  const t = (lo + hi) / 2;
  return upper ? t : -t;
}

/**
 * The shift of the mean a Mann-Whitney test (or with `test: 't'`, a t-test) on n1 and n2 runs
 * detects with `power`, for noise of standard deviation `sd`: Infinity when those run counts
 * cannot reach `alpha` whatever the shift.
 */
export function detectableShift(sd: number, n1: number, n2: number, o: PowerOptions = {}): number {
  const alpha = o.alpha ?? 0.05;
  const power = o.power ?? 0.8;
  const ranks = (o.test ?? 'mann-whitney') === 'mann-whitney';
  if (n1 < 2 || n2 < 2 || (ranks && smallestPossiblePValue(n1, n2) > alpha)) return Number.POSITIVE_INFINITY;
  const df = n1 + n2 - 2;
  const t = studentQuantile(1 - alpha / 2, df) + studentQuantile(power, df);
  return t * sd * Math.sqrt(1 / n1 + 1 / n2) * (ranks ? Math.sqrt(Math.PI / 3) : 1);
}

/**
 * The smallest relative change (0.1 = 10% of the baseline's median) that comparing these two
 * samples would have detected with `power`, from their pooled standard deviation; Infinity when
 * the run counts cannot reach `alpha`, null when there is nothing to relate it to (a baseline
 * median of 0).
 */
export function minimumDetectableEffect(baseline: readonly number[], candidate: readonly number[], o: PowerOptions = {}): number | null {
  const n1 = baseline.length;
  const n2 = candidate.length;
  if (n1 < 2 || n2 < 2) return Number.POSITIVE_INFINITY;
  const centre = median(baseline);
  if (centre === 0 || !Number.isFinite(centre)) return null;
  const v1 = stddev(baseline, mean(baseline)) ** 2;
  const v2 = stddev(candidate, mean(candidate)) ** 2;
  const pooled = Math.sqrt(((n1 - 1) * v1 + (n2 - 1) * v2) / (n1 + n2 - 2));
  return detectableShift(pooled, n1, n2, o) / Math.abs(centre);
}
