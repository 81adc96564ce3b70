/**
 * The Mann-Whitney U test (Wilcoxon rank-sum test) for two independent samples, two-sided,
 * computed exactly as scipy.stats.mannwhitneyu(x, y, alternative='two-sided', method='auto')
 * does (scipy 1.10 to 1.17), so p-values can be checked against it digit for digit.
 *
 * Benchmark repetitions are few and rarely normal (a bimodal reader that is sometimes starved,
 * a long right tail), which is why a rank test and not Welch's t-test decides `~`.
 */
import { normalSf } from './normal.js';

export interface MannWhitneyResult {
  /** U1 = R1 - n1(n1+1)/2, with R1 the sum of the first sample's mid-ranks (scipy's `statistic`). */
  readonly u: number;
  readonly pValue: number;
  readonly method: 'exact' | 'asymptotic';
}

/**
 * Mid-ranks (1-based; tied values share the mean of their ranks) of the values of `x` followed
 * by `y`, and the sizes t of every tie group.
 */
export function midRanks(x: readonly number[], y: readonly number[]): { ranks: Float64Array; ties: number[] } {
  const n = x.length + y.length;
  const values = new Float64Array(n);
  values.set(x, 0);
  values.set(y, x.length);
  const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => (values[a] ?? 0) - (values[b] ?? 0));
  const ranks = new Float64Array(n);
  const ties: number[] = [];
  let i = 0;
  while (i < n) {
    let j = i;
    const v = values[order[i] ?? 0];
    while (j + 1 < n && values[order[j + 1] ?? 0] === v) j++;
    const rank = (i + j + 2) / 2;
    for (let k = i; k <= j; k++) ranks[order[k] ?? 0] = rank;
    if (j > i) ties.push(j - i + 1);
    i = j + 1;
  }
  return { ranks, ties };
}

/**
 * R1, the sum of x's mid-ranks over the pooled sample, and the tie groups' sizes, as midRanks
 * gives them. Two ascending samples (a report's are) are merged in one walk, without sorting or
 * the three arrays midRanks makes: compare tests 70,000 pairs of them for two matrices of 10,000
 * cells. Mid-ranks are halves of integers, so R1 is exact whatever order it is summed in.
 */
function rankSum(x: readonly number[], y: readonly number[]): { r1: number; ties: number[] } {
  if (!ascending(x) || !ascending(y)) {
    const { ranks, ties } = midRanks(x, y);
    let r1 = 0;
    for (let i = 0; i < x.length; i++) r1 += ranks[i] ?? 0;
    return { r1, ties };
  }
  const ties: number[] = [];
  let r1 = 0;
  let i = 0;
  let j = 0;
  let below = 0; // values ranked before the current group
  while (i < x.length || j < y.length) {
    const xi = x[i] ?? Number.POSITIVE_INFINITY;
    const yj = y[j] ?? Number.POSITIVE_INFINITY;
    const v = i < x.length && (j >= y.length || xi <= yj) ? xi : yj;
    let fromX = 0;
    while (i < x.length && x[i] === v) {
      i++;
      fromX++;
    }
    let fromY = 0;
    while (j < y.length && y[j] === v) {
      j++;
      fromY++;
    }
    const t = fromX + fromY;
    r1 += fromX * (below + (t + 1) / 2);
    if (t > 1) ties.push(t);
    below += t;
  }
  return { r1, ties };
}

/** Whether the values are in ascending order, none of them NaN. */
function ascending(v: readonly number[]): boolean {
  for (let i = 1; i < v.length; i++) if (!((v[i - 1] ?? Number.NaN) <= (v[i] ?? Number.NaN))) return false;
  return v.length === 0 || !Number.isNaN(v[0]);
}

/** Cumulative null distributions of U, cached by (smaller, larger) sample size. */
const cdfCache = new Map<string, Float64Array>();

/**
 * P(U <= u) for u = 0 .. m*n under the null hypothesis without ties, for samples of sizes m and
 * n. The number of arrangements with U = u is the coefficient of q^u in the Gaussian binomial
 * coefficient [m+n choose m]_q = prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i) (Andrews, The Theory
 * of Partitions, 1976, th. 3.1; Mann & Whitney, Ann. Math. Statist. 18 (1947) 50-60). Each
 * factor is applied as a division (running sums with stride i) then a multiplication, in exact
 * BigInt arithmetic because the counts outgrow 2^53 from about m = 8, n = 370. Cost
 * O(min(m,n) * m * n), once per pair of sizes.
 */
export function exactUCdf(m: number, n: number): Float64Array {
  const a = Math.min(m, n);
  const b = Math.max(m, n);
  const key = `${a}:${b}`;
  const cached = cdfCache.get(key);
  if (cached) return cached;
  const degree = a * b;
  const coef: bigint[] = new Array<bigint>(degree + 1).fill(0n);
  coef[0] = 1n;
  for (let i = 1; i <= a; i++) {
    const top = i * b; // degree of [b+i choose i]_q
    for (let k = i; k <= top; k++) coef[k] = (coef[k] ?? 0n) + (coef[k - i] ?? 0n);
    for (let k = top; k >= b + i; k--) coef[k] = (coef[k] ?? 0n) - (coef[k - b - i] ?? 0n);
  }
  let total = 0n;
  for (const c of coef) total += c;
  const cdf = new Float64Array(degree + 1);
  let running = 0n;
  const totalNumber = Number(total);
  for (let u = 0; u <= degree; u++) {
    running += coef[u] ?? 0n;
    cdf[u] = Number(running) / totalNumber;
  }
  if (cdfCache.size > 256) cdfCache.clear();
  cdfCache.set(key, cdf);
  return cdf;
}

/**
 * scipy's `_mwu_choose_method`: exact when either sample has at most 8 values and there are no
 * ties, else the normal approximation.
 */
export function chooseMethod(n1: number, n2: number, hasTies: boolean): 'exact' | 'asymptotic' {
  if (n1 > 8 && n2 > 8) return 'asymptotic';
  return hasTies ? 'asymptotic' : 'exact';
}

/**
 * Two-sided Mann-Whitney U test of x against y.
 *
 * U1 = R1 - n1(n1+1)/2 and U2 = n1 n2 - U1, with R1 the rank sum of x over the pooled sample
 * (mid-ranks for ties); the test uses U = max(U1, U2).
 * - exact: p = 2 P(U' >= U) = 2 P(U' <= n1 n2 - U) from the null distribution (`exactUCdf`).
 * - asymptotic: z = (U - n1 n2 / 2 - 1/2) / s with the tie-corrected
 *   s = sqrt(n1 n2 / 12 * ((n + 1) - sum(t^3 - t) / (n (n - 1)))), n = n1 + n2, t the tie group
 *   sizes (the 1/2 is the continuity correction); p = 2 P(Z > z).
 * p is clipped to 1. `method: 'auto'` chooses as scipy does (`chooseMethod`).
 * References: H. B. Mann & D. R. Whitney, Ann. Math. Statist. 18 (1947) 50-60; W. J. Conover,
 * Practical Nonparametric Statistics, 3rd ed. (1999), section 5.1; scipy.stats.mannwhitneyu.
 */
export function mannWhitneyU(
  x: readonly number[],
  y: readonly number[],
  method: 'auto' | 'exact' | 'asymptotic' = 'auto',
): MannWhitneyResult {
  const n1 = x.length;
  const n2 = y.length;
  if (n1 === 0 || n2 === 0) throw new RangeError('the Mann-Whitney U test needs at least one value in each sample');
  const { r1, ties } = rankSum(x, y);
  const u1 = r1 - (n1 * (n1 + 1)) / 2;
  const u = Math.max(u1, n1 * n2 - u1);
  const chosen = method === 'auto' ? chooseMethod(n1, n2, ties.length > 0) : method;
  let p: number;
  if (chosen === 'exact') {
    const cdf = exactUCdf(n1, n2);
    // Without ties U is an integer; with ties (exact forced) rounding down keeps p conservative.
    p = 2 * (cdf[Math.max(0, Math.floor(n1 * n2 - u + 1e-9))] ?? 1);
  } else {
    const n = n1 + n2;
    let tieTerm = 0;
    for (const t of ties) tieTerm += t ** 3 - t;
    const s = Math.sqrt(((n1 * n2) / 12) * (n + 1 - tieTerm / (n * (n - 1))));
    const numerator = u - (n1 * n2) / 2 - 0.5;
    // Every value equal: no evidence at all of a difference.
    p = s === 0 ? 1 : 2 * normalSf(numerator / s);
  }
  return { u: u1, pValue: Math.min(1, Math.max(0, p)), method: chosen };
}

/**
 * The smallest two-sided p-value the exact test can reach with samples of sizes n1 and n2,
 * 2 / C(n1 + n2, n1): with 3 and 3 runs it is 0.1, so no difference can be significant at 0.05.
 */
export function smallestPossiblePValue(n1: number, n2: number): number {
  if (n1 === 0 || n2 === 0) return 1;
  const a = Math.min(n1, n2);
  const b = Math.max(n1, n2);
  let logC = 0; // log C(a + b, a) = sum_{i=1..a} log((b + i) / i)
  for (let i = 1; i <= a; i++) logC += Math.log((b + i) / i);
  return Math.min(1, 2 * Math.exp(-logC));
}
