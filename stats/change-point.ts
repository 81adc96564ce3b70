/**
 * Change points in a series: E-divisive means (Matteson and James, "A Nonparametric Approach for
 * Multiple Change Point Analysis of Multivariate Data", 2014, doi:10.1080/01621459.2013.849605)
 * with a Student's t-test as the significance check instead of permutations, windowed, split
 * then merged, as in Hunter (Fleming et al., "Hunter: Using Change Point Detection to Hunt for
 * Performance Regressions", ICPE 2023, doi:10.1145/3578244.3583719) and its successor Apache
 * Otava. Deterministic: the same series gives the same change points, with no permutations to
 * seed. No maintained npm package implements it; tests/change-point.test.ts holds it to Otava's
 * published examples (its TigerBeetle series at ten thresholds among them).
 *
 * Otava's behaviour is followed step for step, ties included (the first maximum wins), with one
 * correction in the merge step (see `otava` below); what fsbench adds on top (a CI for each
 * step, whether the runs around it were disturbed) is the history's, not this module's.
 */
import { studentTTest, type TTest } from './student-t.js';

export interface ChangePoint {
  /** Index of the first value after the change. */
  readonly index: number;
  /** E-divisive's divergence of the split that found it (Q̂). */
  readonly qhat: number;
  /** The t-test between the segments on either side, up to the neighbouring change points. */
  readonly test: TTest;
}

export interface ChangePointOptions {
  /** Length of the sliding windows of the split step (Otava's `window_len`); at least 2. */
  readonly windowLength?: number;
  /** The p-value a change point must reach (Otava's `max_pvalue`). */
  readonly maxP?: number;
  /**
   * The relative change a significant point must also reach to be kept (Otava's
   * `min_magnitude`, 0.05 = 5%); by default significance alone decides.
   */
  readonly minMagnitude?: number;
  /**
   * Re-judge after a removal exactly as Otava (1ceb153) does, which reproduces its published
   * change points; default false: every point kept is judged against its final neighbours.
   */
  readonly otava?: boolean;
}

/** Window 30 and p 0.001 as Otava's defaults for a series of benchmark results; no magnitude floor. */
export const CHANGE_POINT_DEFAULTS = { windowLength: 30, maxP: 0.001, minMagnitude: 0 } as const;

/** A half-open range [start, end) of the series. */
interface Interval {
  readonly start: number;
  readonly end: number;
}

/** The relative change either way, the larger of |after/before - 1| and |before/after - 1|; 0 against a zero mean. */
export function changeMagnitude(test: TTest): number {
  const forward = test.meanA === 0 ? 0 : test.meanB / test.meanA - 1;
  const backward = test.meanB === 0 ? 0 : test.meanA / test.meanB - 1;
  return Math.max(Math.abs(forward), Math.abs(backward));
}

/** A p-value the decisions can order: NaN (two constant, equal segments) means no evidence at all. */
function pOf(cp: ChangePoint): number {
  return Number.isNaN(cp.test.p) ? 1 : cp.test.p;
}

/** The segments between sorted change points over [0, length), empty ones left out. */
function intervalsOf(points: readonly { readonly index: number }[], length: number): Interval[] {
  const out: Interval[] = [];
  for (let i = 0; i <= points.length; i++) {
    const start = i === 0 ? 0 : (points[i - 1]?.index ?? 0);
    const end = i === points.length ? length : (points[i]?.index ?? length);
    if (start !== end) out.push({ start, end });
  }
  return out;
}

/**
 * E-divisive's best split of series[start, end): the τ maximising
 * Q̂(X, Y) = 2/(m+n) ΣΣ|Xi - Yj| - 2m/((m+n)(n-1)) Σi<k |Xi - Xk| - 2n/((m+n)(m-1)) Σj<k |Yj - Yk|
 * over X = series[start, τ), Y = series[τ, κ), start < τ < κ <= end. Sums are kept incrementally:
 * O(w²) per τ, O(w³) per interval, trivial for windows of tens of points.
 */
function bestSplit(series: readonly number[], start: number, end: number): { index: number; qhat: number } {
  const at = (i: number): number => series[i] ?? 0;
  let best = { index: start + 1, qhat: Number.NEGATIVE_INFINITY };
  let withinX = 0; // Σ over pairs inside X = series[start, τ)
  for (let tau = start + 1; tau < end; tau++) {
    // X grows by series[tau - 1].
    for (let i = start; i < tau - 1; i++) withinX += Math.abs(at(i) - at(tau - 1));
    const n = tau - start;
    let between = 0; // Σ |Xi - Yj| for Y = series[tau, kappa)
    let withinY = 0;
    for (let kappa = tau + 1; kappa <= end; kappa++) {
      const y = at(kappa - 1);
      for (let i = start; i < tau; i++) between += Math.abs(at(i) - y);
      for (let j = tau; j < kappa - 1; j++) withinY += Math.abs(at(j) - y);
      const m = kappa - tau;
      const q =
        (2 / (m + n)) * between - (n > 1 ? ((2 * m) / (m + n) / (n - 1)) * withinX : 0) - (m > 1 ? ((2 * n) / (m + n) / (m - 1)) * withinY : 0);
      if (q > best.qhat) best = { index: tau, qhat: q };
    }
  }
  return best;
}

/**
 * The t-test of a candidate against the segments `intervals` cut the series into: a point that
 * is already a boundary compares its two neighbouring segments (merge step); a new one splits
 * the segment it falls in (split step).
 */
function judge(series: readonly number[], candidate: { index: number; qhat: number }, intervals: readonly Interval[]): ChangePoint {
  for (let i = 0; i < intervals.length; i++) {
    const iv = intervals[i];
    if (iv === undefined) continue;
    const next = intervals[i + 1];
    if (iv.end === candidate.index && next !== undefined) {
      return { ...candidate, test: studentTTest(series.slice(iv.start, iv.end), series.slice(next.start, next.end)) };
    }
    if (iv.start < candidate.index && candidate.index < iv.end) {
      return { ...candidate, test: studentTTest(series.slice(iv.start, candidate.index), series.slice(candidate.index, iv.end)) };
    }
  }
  throw new RangeError(`change point ${candidate.index} lies in no interval`);
}

/** E-divisive over `series` (one window): split the best segment while the split is significant. */
function divisive(series: readonly number[], maxP: number): ChangePoint[] {
  const points: ChangePoint[] = [];
  for (;;) {
    const intervals = intervalsOf(points, series.length);
    let candidate: { index: number; qhat: number } | undefined;
    for (const iv of intervals) {
      if (iv.end - iv.start < 2) continue;
      const split = bestSplit(series, iv.start, iv.end);
      if (candidate === undefined || split.qhat > candidate.qhat) candidate = split;
    }
    if (candidate === undefined) return points;
    const point = judge(series, candidate, intervals);
    if (!(point.test.p <= maxP)) return points;
    points.push(point);
    points.sort((a, b) => a.index - b.index);
  }
}

/** Split step: E-divisive in sliding windows at a relaxed p; the union of what they find ("weak" change points). */
function split(series: readonly number[], windowLength: number, maxP: number): ChangePoint[] {
  const found = new Map<number, ChangePoint>();
  const step = Math.floor(windowLength / 2);
  let start = 0;
  while (start < series.length) {
    const end = Math.min(start + windowLength, series.length);
    const inWindow = divisive(series.slice(start, end), maxP).map((cp) => ({ ...cp, index: cp.index + start }));
    const last = inWindow.at(-1)?.index ?? 0;
    start = Math.max(last, start + step);
    for (const cp of inWindow) if (!found.has(cp.index)) found.set(cp.index, cp);
  }
  const sorted = [...found.values()].sort((a, b) => a.index - b.index);
  const intervals = intervalsOf(sorted, series.length);
  return sorted.map((cp) => judge(series, cp, intervals));
}

/** Merge step: drop the weakest point (highest p, or else the smallest change) until all pass, re-judging its neighbours. */
function merge(points: ChangePoint[], series: readonly number[], maxP: number, minMagnitude: number, otava: boolean): ChangePoint[] {
  while (points.length > 0) {
    let weakest = 0;
    for (let i = 1; i < points.length; i++) {
      const p = points[i];
      const w = points[weakest];
      if (p !== undefined && w !== undefined && pOf(p) > pOf(w)) weakest = i;
    }
    const w = points[weakest];
    if (w !== undefined && pOf(w) < maxP) {
      weakest = 0;
      for (let i = 1; i < points.length; i++) {
        const p = points[i];
        const s = points[weakest];
        if (p !== undefined && s !== undefined && changeMagnitude(p.test) < changeMagnitude(s.test)) weakest = i;
      }
      const smallest = points[weakest];
      if (smallest !== undefined && changeMagnitude(smallest.test) > minMagnitude) return points;
    }
    points.splice(weakest, 1);
    const intervals = intervalsOf(points, series.length);
    // The removal widens the segments of both neighbours: the one before (its right segment)
    // and the one after (its left). Otava re-judges the one after and the one after that, so a
    // point before a removal can survive on a p it no longer has; `otava: true` does the same.
    for (const i of otava ? [weakest, weakest + 1] : [weakest - 1, weakest]) {
      const cp = points[i];
      if (cp !== undefined) points[i] = judge(series, cp, intervals);
    }
  }
  return points;
}

/**
 * The change points of `series`, in index order. The split step runs at a relaxed p (10x below
 * 0.05, 2x below 0.5), the merge step then keeps only points significant at `maxP` whose change
 * exceeds `minMagnitude` (Hunter's reasoning: a window sees too few points to be strict).
 */
export function changePoints(series: readonly number[], options: ChangePointOptions = {}): ChangePoint[] {
  const windowLength = options.windowLength ?? CHANGE_POINT_DEFAULTS.windowLength;
  const maxP = options.maxP ?? CHANGE_POINT_DEFAULTS.maxP;
  if (!Number.isInteger(windowLength) || windowLength < 2) throw new RangeError('windowLength must be an integer of at least 2');
  if (series.some((x) => !Number.isFinite(x))) throw new RangeError('a change-point series holds finite numbers only');
  const firstPass = maxP < 0.05 ? maxP * 10 : maxP < 0.5 ? maxP * 2 : maxP;
  return merge(split(series, windowLength, firstPass), series, maxP, options.minMagnitude ?? CHANGE_POINT_DEFAULTS.minMagnitude, options.otava === true);
}
