/**
 * When a cell has been measured enough: `repetitions: auto` keeps running a cell until the 95%
 * confidence interval of its median is within a target share of the median (and, if asked, until
 * a gate could see a target change), or a maximum of runs is reached. `fsbench run` and the coordinator decide with these same functions.
 */
import type { AdaptiveRepetitions } from '../contract/schedule.js';
import { minimumDetectableEffect } from './power.js';
import { medianConfidenceInterval, medianOfSorted, sortedCopy } from './summary.js';

/**
 * The relative half-width of the 95% CI of the median of `values`, (high - low) / 2 / |median|:
 * null with too few values for a 95% interval (fewer than 6) or a median of 0.
 */
export function relativeHalfWidth(values: readonly number[]): number | null {
  const s = sortedCopy(values);
  const ci = medianConfidenceInterval(s);
  const median = medianOfSorted(s);
  if (ci === null || median === 0 || !Number.isFinite(median)) return null;
  return (ci.high - ci.low) / 2 / Math.abs(median);
}

/** Where a cell under `repetitions: auto` stands after its latest run. */
export type PrecisionVerdict = 'more' | 'reached' | 'max';

/**
 * Whether a cell needs another run, from its measured values of `a.metric` so far (one per ok
 * run): `reached` once its median is known to within the target (after at least `min` runs)
 * and, with `a.detectable`, once comparing these runs with as many equally noisy ones would
 * detect that change with 80% power; `max` at `max` runs without that, else `more`.
 */
export function precisionVerdict(values: readonly number[], a: AdaptiveRepetitions): PrecisionVerdict {
  if (values.length >= a.min) {
    const hw = relativeHalfWidth(values);
    const detectable = a.detectable === undefined ? 0 : (minimumDetectableEffect(values, values) ?? Number.POSITIVE_INFINITY);
    if (hw !== null && hw <= a.target && detectable <= (a.detectable ?? 0)) return 'reached';
  }
  return values.length >= a.max ? 'max' : 'more';
}
