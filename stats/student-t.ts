/**
 * Student's t distribution's tail and the two-sample t-test, which the change-point detection
 * (change-point.ts) judges each split with. Written out for the same reason as normal.ts: one
 * function does not warrant a dependency, and each formula here names its reference.
 */
import { mean, stddev } from './summary.js';

/** ln Γ(x) for x > 0: Lanczos' approximation, g = 7, n = 9 (Numerical Recipes 3rd ed., §6.1); ~1e-15 relative. */
function logGamma(x: number): number {
  const c = [
    0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059, 12.507343278686905,
    -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
  ];
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - logGamma(1 - x);
  const z = x - 1;
  let a = c[0] ?? 0;
  const t = z + 7.5;
  for (let i = 1; i < 9; i++) a += (c[i] ?? 0) / (z + i);
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(a);
}

/** The continued fraction of the incomplete beta function, by the modified Lentz method (Numerical Recipes §6.4, betacf). */
function betaContinuedFraction(a: number, b: number, x: number): number {
  const tiny = 1e-300;
  const qab = a + b;
  const qap = a + 1;
  const qam = a - 1;
  let c = 1;
  let d = 1 - (qab * x) / qap;
  if (Math.abs(d) < tiny) d = tiny;
  d = 1 / d;
  let h = d;
  for (let m = 1; m <= 300; m++) {
    const m2 = 2 * m;
    let aa = (m * (b - m) * x) / ((qam + m2) * (a + m2));
    d = 1 + aa * d;
    if (Math.abs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    h *= d * c;
    aa = (-(a + m) * (qab + m) * x) / ((a + m2) * (qap + m2));
    d = 1 + aa * d;
    if (Math.abs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    const del = d * c;
    h *= del;
    if (Math.abs(del - 1) < 1e-15) break;
  }
  return h;
}

/** The regularized incomplete beta function I_x(a, b) (Numerical Recipes §6.4, betai). */
export function incompleteBeta(x: number, a: number, b: number): number {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const front = Math.exp(logGamma(a + b) - logGamma(a) - logGamma(b) + a * Math.log(x) + b * Math.log(1 - x));
  // The continued fraction converges fast only on this side of the mean; the other by symmetry.
  return x < (a + 1) / (a + b + 2) ? (front * betaContinuedFraction(a, b, x)) / a : 1 - (front * betaContinuedFraction(b, a, 1 - x)) / b;
}

/** P(|T| >= |t|) for T ~ Student's t with `df` degrees of freedom: I_{df/(df+t²)}(df/2, 1/2). */
export function studentTwoSidedP(t: number, df: number): number {
  if (Number.isNaN(t) || df <= 0) return Number.NaN;
  if (!Number.isFinite(t)) return 0;
  return incompleteBeta(df / (df + t * t), df / 2, 0.5);
}

export interface TTest {
  readonly meanA: number;
  readonly meanB: number;
  /** Population standard deviations (divided by n), as Otava's tester computes them. */
  readonly sdA: number;
  readonly sdB: number;
  /** Two-sided p; 1 when the two samples hold two values in all, NaN when both are constant and equal. */
  readonly p: number;
}

/** numpy's std: divided by n, not n - 1 (Otava's tester feeds these to the pooled variance). */
function populationSd(xs: readonly number[], m: number): number {
  return xs.length < 2 ? 0 : stddev(xs, m) * Math.sqrt((xs.length - 1) / xs.length);
}

/**
 * Student's two-sample t-test with pooled variance, from the samples' means and population
 * standard deviations: what Otava's TTestSignificanceTester computes (numpy's std, then scipy's
 * ttest_ind_from_stats), reproduced so its published change points are this module's too.
 */
export function studentTTest(a: readonly number[], b: readonly number[]): TTest {
  const meanA = mean(a);
  const meanB = mean(b);
  const sdA = populationSd(a, meanA);
  const sdB = populationSd(b, meanB);
  const n1 = a.length;
  const n2 = b.length;
  if (n1 + n2 <= 2) return { meanA, meanB, sdA, sdB, p: 1 };
  const df = n1 + n2 - 2;
  const pooled = ((n1 - 1) * sdA * sdA + (n2 - 1) * sdB * sdB) / df;
  const t = (meanA - meanB) / Math.sqrt(pooled * (1 / n1 + 1 / n2));
  return { meanA, meanB, sdA, sdB, p: studentTwoSidedP(t, df) };
}
