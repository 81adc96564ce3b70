/**
 * How numbers read in every output: the terminal table, Markdown, the dashboard and the compare
 * views all format through these functions, so one statistic reads the same wherever it is
 * shown (CSV and JSON carry full precision instead).
 */
import { formatPercent, formatSize } from '../contract/units.js';

// In contract/units.ts because workloads' notes (contract/workloads/<name>/notes.ts) write shares too.
export { formatPercent, formatSize };

/**
 * Integers as they are; otherwise whole above 1000, two decimals above 1, three significant
 * digits below: enough to read a median, never more digits than the noise allows.
 */
export function formatNumber(x: number | null | undefined): string {
  if (x === null || x === undefined || !Number.isFinite(x)) return 'n/a';
  if (Number.isInteger(x)) return String(x);
  const abs = Math.abs(x);
  return abs >= 1000 ? x.toFixed(0) : abs >= 1 ? x.toFixed(2) : x.toPrecision(3);
}

/** Axis ticks and other tight places: 385229 -> 385k, 1234567 -> 1.23M. */
export function formatCompact(x: number | null | undefined): string {
  if (x === null || x === undefined || !Number.isFinite(x)) return 'n/a';
  const abs = Math.abs(x);
  if (abs >= 1e9) return `${(x / 1e9).toPrecision(3)}G`;
  if (abs >= 1e6) return `${(x / 1e6).toPrecision(3)}M`;
  if (abs >= 1e4) return `${(x / 1e3).toPrecision(3)}k`;
  return formatNumber(x);
}

/** A coefficient of variation always with one decimal: CVs are compared against 10%. */
export function formatCv(cv: number | null | undefined): string {
  if (cv === null || cv === undefined || !Number.isFinite(cv)) return '';
  return `${(cv * 100).toFixed(1)}%`;
}

/** A signed percentage change: +1.23%, -0.50%. */
export function formatDelta(pct: number | null | undefined): string {
  if (pct === null || pct === undefined || !Number.isFinite(pct)) return 'n/a';
  return `${pct >= 0 ? '+' : ''}${pct.toFixed(2)}%`;
}

/** A ratio such as a confidence bound: three decimals. */
export function formatRatio(r: number | null | undefined): string {
  if (r === null || r === undefined || !Number.isFinite(r)) return '';
  return r.toFixed(3);
}

/** p-values: three decimals, or scientific below 0.001 where three decimals would say 0. */
export function formatPValue(p: number | null | undefined): string {
  if (p === null || p === undefined || !Number.isFinite(p)) return '';
  return p < 0.001 ? p.toExponential(1) : p.toFixed(3);
}

/** An interval of two formatted bounds, or nothing when either is missing. */
export function formatInterval(low: number | null | undefined, high: number | null | undefined, format: (x: number) => string = formatNumber): string {
  if (low === null || low === undefined || high === null || high === undefined) return '';
  return `${format(low)}..${format(high)}`;
}

/**
 * A duration as a person reads an estimate: 850 ms, 42 s, 29 min, 2 h 05 min, 3 d 4 h. Rounded to
 * the unit shown: an estimate is never more exact than that. (contract/units.ts formatDuration
 * is the exact spelling a matrix file accepts back; this one is for reading.)
 */
export function formatReadableDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return 'n/a';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  const min = Math.round(ms / 60_000);
  if (min < 60) return `${min} min`;
  if (min < 24 * 60) return `${Math.floor(min / 60)} h ${String(min % 60).padStart(2, '0')} min`;
  const h = Math.round(ms / 3_600_000);
  return `${Math.floor(h / 24)} d${h % 24 === 0 ? '' : ` ${h % 24} h`}`;
}
