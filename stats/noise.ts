/**
 * Whether a cell's repetitions can support a conclusion, said in words next to the numbers
 * instead of being left to the reader of a CV column.
 */
import { smallestPossiblePValue } from './mann-whitney.js';
import { hasOutlierSorted, outlierIndexes } from './outliers.js';
import { mean, stddev } from './summary.js';

export interface NoiseOptions {
  /** Coefficient of variation above which a cell is too noisy (default 0.10). */
  readonly maxCv?: number;
  /** Fewest repetitions to conclude anything (default 5). */
  readonly minRuns?: number;
}

export interface NoiseCheck {
  /** True when the cell is too noisy to conclude: too few runs or a CV above `maxCv`. */
  readonly noisy: boolean;
  /** Why, in words; outliers are mentioned without making the cell noisy by themselves. */
  readonly reasons: readonly string[];
  readonly outliers: readonly number[];
}

/**
 * 5 is the fewest runs per side with which the two-sided Mann-Whitney test can reach p < 0.05
 * with room to spare (smallest p: 0.1 at 3 vs 3, 0.029 at 4 vs 4, 0.0079 at 5 vs 5); a CV above
 * 10% makes differences of that order unresolvable with so few runs. CV = s / |mean| with the
 * sample standard deviation s (summary.ts); outliers are modified z-scores above 3.5
 * (outliers.ts, Iglewicz & Hoaglin 1993).
 */
export const NOISE_DEFAULTS = { maxCv: 0.1, minRuns: 5 } as const;

/**
 * The verdicts most cells get (quiet, or only "too few runs") are shared frozen objects: a
 * coordinator aggregating 10,000 cells x 28 metrics would otherwise keep 280,000 copies.
 */
const shared = new Map<string, NoiseCheck>();

function fewRunsReason(n: number, minRuns: number): string {
  const p = smallestPossiblePValue(n, n);
  return `only ${n} run${n === 1 ? '' : 's'} (at least ${minRuns} needed; ${n} vs ${n} runs cannot reach p below ${p.toPrecision(2)})`;
}

/**
 * `known` passes the CV (s / |mean|) and median already computed, e.g. by `summarize`, and
 * optionally the sorted values, so none of them is computed twice.
 */
export function checkNoise(
  values: readonly number[],
  options: NoiseOptions = {},
  known?: { readonly cv: number | null; readonly median: number; readonly sorted?: ArrayLike<number> },
): NoiseCheck {
  const maxCv = options.maxCv ?? NOISE_DEFAULTS.maxCv;
  const minRuns = options.minRuns ?? NOISE_DEFAULTS.minRuns;
  const n = values.length;
  let cv: number;
  if (known) cv = known.cv ?? 0;
  else {
    const m = mean(values);
    cv = n > 1 && m !== 0 ? stddev(values, m) / Math.abs(m) : 0;
  }
  const few = n < minRuns;
  const highCv = cv > maxCv;
  const maybeOutliers = n >= 3 && (known?.sorted === undefined || hasOutlierSorted(known.sorted, known.median));
  const outliers = maybeOutliers ? outlierIndexes(values, undefined, known?.median) : [];
  if (!highCv && outliers.length === 0) {
    const key = few ? `${n}:${minRuns}` : 'quiet';
    let check = shared.get(key);
    if (!check) {
      check = Object.freeze({ noisy: few, reasons: Object.freeze(few ? [fewRunsReason(n, minRuns)] : []), outliers: Object.freeze([]) });
      if (shared.size > 1000) shared.clear();
      shared.set(key, check);
    }
    return check;
  }
  const reasons: string[] = [];
  if (few) reasons.push(fewRunsReason(n, minRuns));
  if (highCv) reasons.push(`CV ${(cv * 100).toFixed(1)}% above ${(maxCv * 100).toFixed(0)}%`);
  if (outliers.length > 0) {
    reasons.push(`${outliers.length} outlier${outliers.length === 1 ? '' : 's'} (modified z-score above 3.5)`);
  }
  return { noisy: few || highCv, reasons, outliers };
}
