/**
 * Which way is better for a metric, read from its stable name: rates up, times, latencies and
 * losses down. Used to colour deltas and to pick the best point of a sweep; metrics that are
 * neither (counts of what happened, geometry) are 'neutral' and are never called better or worse.
 */
export type Direction = 'higher' | 'lower' | 'neutral';

const LOWER = new Set(['overflows', 'coalescedFraction', 'drainTimedOut', 'peakRssBytes', 'readerInvoluntaryCtxSwitches', 'dropCachesMs']);
const HIGHER = new Set(['events', 'writes']);

export function metricDirection(metric: string): Direction {
  if (LOWER.has(metric)) return 'lower';
  if (HIGHER.has(metric)) return 'higher';
  if (/PerSec$/.test(metric)) return 'higher';
  if (/(Ms|Us|Ns)$/.test(metric)) return 'lower';
  return 'neutral';
}
