/**
 * The regression gate: a comparison (compare/compare.ts) turned into pass or fail for a CI job.
 * A cell-metric fails only when all of these hold, so that a noisy machine does not cry wolf:
 * - it moved in its bad direction (the metric's metadata says which way is better; a metric
 *   with no better direction never fails);
 * - by more than the threshold (`maxRegression`, per metric where given), as a point estimate;
 * - significantly: the Mann-Whitney p is below alpha and the ratio's confidence interval lies
 *   wholly on the bad side of 1 (the interval inverts the same test, so the two agree but for
 *   ties).
 * A cell-metric passes only when the ratio's confidence interval rules out a move beyond the
 * threshold in the bad direction (a non-inferiority test: "no regression beyond the limit" is
 * then what the runs show, not what they failed to show). A gate never passes what it could not
 * judge: a cell-metric whose runs cannot reach alpha, whose interval still allows a regression
 * beyond its limit, or that the candidate lacks is inconclusive, and so is the verdict unless
 * the caller accepts that. Every row also states its minimum detectable effect (stats/power.ts).
 * Metrics with no better direction are shown but never gate.
 */
import { FsbenchError } from '../contract/errors.js';
import type { Direction } from '../contract/metrics.js';
import type { CompareReport, CompareRow, SideStats } from '../compare/compare.js';
import { smallestPossiblePValue } from '../stats/mann-whitney.js';
import { detectableShift } from '../stats/power.js';

export interface GateOptions {
  /** Largest move in a metric's bad direction that passes, as a fraction: 0.05 = 5% (the default). */
  readonly maxRegression?: number;
  /** Thresholds of single metrics, overriding `maxRegression`. */
  readonly perMetric?: Readonly<Record<string, number>>;
  /** Power the minimum detectable effect is stated at; default 0.8. */
  readonly power?: number;
  /** Runs flagged for interference that were left out of each side (--exclude-flagged), to be said. */
  readonly excluded?: { readonly baseline: number; readonly candidate: number };
  /** Let a gate with inconclusive cell-metrics (and no regression) pass: --allow-inconclusive. */
  readonly allowInconclusive?: boolean;
}

export const GATE_DEFAULTS = { maxRegression: 0.05, power: 0.8 } as const;

/** `5%`, `0.05` or `5 %` as a share (0.05); null for anything else, or a share not above 0 and below 10. */
export function parseShare(text: string): number | null {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(%?)\s*$/.exec(text);
  const value = m ? Number(m[1]) / (m[2] === '%' ? 100 : 1) : Number.NaN;
  return value > 0 && value < 10 ? value : null;
}

/** `eventsPerSec=10%,latencyP99Us=20%` as per-metric limits; the first bad pair's text when one is wrong. */
export function parseLimits(pairs: readonly string[]): { ok: true; limits: Record<string, number> } | { ok: false; bad: string } {
  const limits: Record<string, number> = {};
  for (const pair of pairs.flatMap((x) => x.split(','))) {
    const [metric, value] = pair.split('=', 2);
    const share = value === undefined ? null : parseShare(value);
    if (metric === undefined || metric.trim() === '' || share === null) return { ok: false, bad: pair };
    limits[metric.trim()] = share;
  }
  return { ok: true, limits };
}

/**
 * regression: fails the gate; improvement: significant, beyond the threshold, the good way;
 * pass: anything else that could be judged; inconclusive: no result on a side, too few runs for
 * the test to reach alpha, or no significant change from runs that could not have seen one as
 * large as the threshold.
 */
export type GateStatus = 'regression' | 'improvement' | 'pass' | 'inconclusive';

/**
 * fail: a regression (exit 6); inconclusive: none, but a gated cell-metric could not be judged
 * (exit 7); pass: every gated cell-metric judged, none regressed, or the inconclusive ones
 * accepted (`allowInconclusive`).
 */
export type GateVerdict = 'pass' | 'fail' | 'inconclusive';

export interface GateRow {
  readonly row: CompareRow;
  readonly threshold: number;
  /**
   * The smallest relative change these runs would have detected with `power` (0.1 = 10%):
   * Infinity when the run counts cannot reach alpha, null when a side has no spread to judge by.
   */
  readonly detectable: number | null;
  readonly status: GateStatus;
  /** Why, in a sentence a CI log can show. */
  readonly reason: string;
}

export interface GateReport {
  readonly verdict: GateVerdict;
  readonly compare: CompareReport;
  readonly rows: readonly GateRow[];
  readonly counts: Readonly<Record<GateStatus, number>>;
  readonly maxRegression: number;
  readonly power: number;
  readonly excluded: { readonly baseline: number; readonly candidate: number } | null;
  /** Whether inconclusive cell-metrics were accepted (they are still counted and named). */
  readonly allowInconclusive: boolean;
}

/** Whether a row's metric can gate: one with no better direction can be neither worse nor better. */
export function gates(row: CompareRow): boolean {
  return row.direction !== 'neither';
}

/** Whether a ratio (candidate / baseline) is a move in the metric's bad direction. */
function isWorse(direction: Direction, ratio: number): boolean {
  return direction === 'higher' ? ratio < 1 : direction === 'lower' ? ratio > 1 : false;
}

function pooledCv(a: SideStats, b: SideStats): number | null {
  if (a.cv === null || b.cv === null || a.n < 2 || b.n < 2) return null;
  return Math.sqrt(((a.n - 1) * a.cv ** 2 + (b.n - 1) * b.cv ** 2) / (a.n + b.n - 2));
}

function pct(x: number): string {
  return `${(x * 100).toFixed(1)}%`;
}

/** Both sides the same value in every run (0 overflows, say): judged, though no ratio exists. */
function sameConstant(a: SideStats, b: SideStats): boolean {
  return a.min === a.max && b.min === b.max && a.min === b.min;
}

function judge(row: CompareRow, threshold: number, power: number, alpha: number): GateRow {
  const { baseline, candidate, ratio, ci, pValue } = row;
  if (baseline === null || candidate === null) {
    const why = row.warnings.find((w) => w.kind === 'no-result')?.text ?? 'a side has no result';
    return { row, threshold, detectable: null, status: 'inconclusive', reason: why };
  }
  // Before the spread is looked at: one run a side has none, and must not read as a pass.
  if (baseline.n < 2 || candidate.n < 2 || smallestPossiblePValue(baseline.n, candidate.n) > alpha) {
    return {
      row,
      threshold,
      detectable: Number.POSITIVE_INFINITY,
      status: 'inconclusive',
      reason: `${String(baseline.n)} vs ${String(candidate.n)} runs cannot reach p < ${String(alpha)}: run more repetitions`,
    };
  }
  const cv = pooledCv(baseline, candidate);
  const detectable = cv === null ? null : detectableShift(cv, baseline.n, candidate.n, { alpha, power });
  if (ratio === null) {
    if (sameConstant(baseline, candidate)) return { row, threshold, detectable, status: 'pass', reason: `${String(baseline.median)} in every run on both sides` };
    return { row, threshold, detectable, status: 'inconclusive', reason: "the baseline's median is 0: a change relative to it is not defined" };
  }
  const p = `p = ${pValue === null ? 'n/a' : pValue.toPrecision(2)}`;
  const smallest = detectable === null ? '' : `; no change larger than ${pct(detectable)} would have gone unseen (${String(Math.round(power * 100))}% power)`;
  // The change of the value itself, relative to the baseline, as people read "20% slower".
  const move = Math.abs(ratio - 1);
  const significant = pValue !== null && pValue < alpha && ci !== null && (ci.high < 1 || ci.low > 1);
  if (row.direction === 'neither') {
    return { row, threshold, detectable, status: 'pass', reason: `${significant ? 'changed, but the metric has no better direction' : `not significant (${p})`}${smallest}` };
  }
  const worse = isWorse(row.direction, ratio);
  if (significant && move > threshold) {
    const interval = `, ${String(Math.round(ci.level * 100))}% CI of the ratio ${ci.low.toFixed(3)}-${ci.high.toFixed(3)}`;
    return {
      row,
      threshold,
      detectable,
      status: worse ? 'regression' : 'improvement',
      reason: `${worse ? 'worse' : 'better'} by ${pct(move)} (limit ${pct(threshold)}), ${p}${interval}`,
    };
  }
  const seen = significant ? `${worse ? 'worse' : 'better'} by ${pct(move)} (${p}), within the limit of ${pct(threshold)}` : `not significant (${p})`;
  // A pass says "no regression beyond the limit", which only an interval that rules one out can
  // say: the ratio's interval (the rank test's own, Hodges-Lehmann) must stop short of the limit
  // on the bad side. Otherwise the runs allow either answer.
  const furthest = ci === null ? null : row.direction === 'higher' ? 1 - ci.low : ci.high - 1;
  if (ci === null || furthest === null || furthest > threshold) {
    const allowed = ci === null ? 'no interval of the ratio could be made' : `the ratio's ${String(Math.round(ci.level * 100))}% CI ${ci.low.toFixed(3)}-${ci.high.toFixed(3)} allows ${pct(furthest ?? 0)} worse`;
    return {
      row,
      threshold,
      detectable,
      status: 'inconclusive',
      reason: `${seen}, but ${allowed}, beyond the limit of ${pct(threshold)}: run more repetitions (repetitions: auto with targetDetectable) or on a quieter machine`,
    };
  }
  return { row, threshold, detectable, status: 'pass', reason: `${seen}${smallest}` };
}

/**
 * Judges every row of a comparison. The gate fails when any gated row is a regression, and is
 * inconclusive (unless accepted) when a gated row could not be judged or a baseline cell has no
 * counterpart in the candidate (its runs failed, or the matrix changed).
 */
export function gate(compare: CompareReport, options: GateOptions = {}): GateReport {
  // Nothing judged must never read as a pass.
  if (compare.rows.length === 0) {
    const left = options.excluded;
    if (left && left.baseline + left.candidate > 0) {
      throw new FsbenchError(
        'TOO_DISTURBED',
        `nothing to judge: runs flagged for interference were left out (${String(left.baseline)} of the baseline, ${String(left.candidate)} of the candidate) and no cell kept runs on both sides; run again when the machine is quieter, or gate without --exclude-flagged`,
      );
    }
    throw new FsbenchError('CONFIG_INVALID', 'nothing to judge: the two sides share no cell with a metric to compare (see fsbench compare for what each side holds)');
  }
  if (!compare.rows.some(gates)) {
    throw new FsbenchError(
      'CONFIG_INVALID',
      `nothing to gate on: ${compare.metrics.join(', ')} ${compare.metrics.length === 1 ? 'has' : 'have'} no better direction; name a metric that has one with --metric (fsbench params lists each metric's direction)`,
    );
  }
  const maxRegression = options.maxRegression ?? GATE_DEFAULTS.maxRegression;
  const power = options.power ?? GATE_DEFAULTS.power;
  const rows = compare.rows.map((r) => judge(r, options.perMetric?.[r.metric] ?? maxRegression, power, compare.alpha));
  const counts: Record<GateStatus, number> = { regression: 0, improvement: 0, pass: 0, inconclusive: 0 };
  for (const r of rows) if (gates(r.row)) counts[r.status]++;
  const allowInconclusive = options.allowInconclusive === true;
  const unjudged = counts.inconclusive + compare.unmatched.baseline.length;
  const verdict: GateVerdict = counts.regression > 0 ? 'fail' : unjudged > 0 && !allowInconclusive ? 'inconclusive' : 'pass';
  return { verdict, compare, rows, counts, maxRegression, power, excluded: options.excluded ?? null, allowInconclusive };
}
