/**
 * Latency histograms across runs: merged by adding counts per bucket, and percentiles read from
 * the merged histogram. Averaging per-run percentiles is wrong (the mean of five p99s is not the
 * p99 of the five runs' samples), so the code offers no way to do it.
 */
import type { Histogram } from '../contract/result.js';

/**
 * Adds counts per bucket [lowNs, highNs]; buckets are self-describing, so histograms with
 * different non-empty buckets merge exactly. The result is sorted by lowNs. Buckets of
 * different resolution that overlap are kept apart (percentiles then read them in order of
 * their lower bounds), which only happens when histograms come from different probe versions.
 */
export function mergeHistograms(histograms: Iterable<Histogram>): Histogram {
  const merged = new HistogramAccumulator();
  for (const h of histograms) merged.add(h);
  return merged.toHistogram();
}

/** Incremental merge, for streams of runs. */
export class HistogramAccumulator {
  /**
   * Buckets by lower bound: one probe's buckets never share one, so a number key serves (no
   * string built per bucket and run). A bucket with a known lower bound and another upper bound
   * (another resolution) goes to `others`.
   */
  private readonly byLow = new Map<number, [number, number, number]>();
  private readonly others = new Map<string, [number, number, number]>();

  add(h: Histogram): void {
    for (const [low, high, count] of h.buckets) {
      const b = this.byLow.get(low);
      if (b === undefined) this.byLow.set(low, [low, high, count]);
      else if (b[1] === high) b[2] += count;
      else {
        const key = `${low}:${high}`;
        const o = this.others.get(key);
        if (o) o[2] += count;
        else this.others.set(key, [low, high, count]);
      }
    }
  }

  toHistogram(): Histogram {
    const buckets = [...this.byLow.values(), ...this.others.values()].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    return { unit: 'ns', buckets: buckets.map(([l, h, c]) => [l, h, c] as [number, number, number]) };
  }
}

export function histogramCount(h: Histogram): number {
  let n = 0;
  for (const b of h.buckets) n += b[2];
  return n;
}

/**
 * The q-quantile (0 <= q <= 1) of a histogram: with N samples, the rank r = q N falls in the
 * bucket [low, high) whose cumulative count first reaches r; the value is interpolated linearly
 * inside it, low + (high - low) (r - C) / c, with C the count below the bucket and c its count
 * (samples assumed uniform within a bucket, as in HdrHistogram's linear interpolation; the
 * error is at most one bucket width, about 3% for the probe's 32 sub-buckets per octave).
 * q = 0 gives the lowest bucket's lower bound and q = 1 the highest bucket's upper bound.
 * Returns null for an empty histogram.
 */
export function histogramQuantile(h: Histogram, q: number): number | null {
  if (!(q >= 0 && q <= 1)) throw new RangeError(`quantile ${q} is outside [0, 1]`);
  const total = histogramCount(h);
  if (total === 0) return null;
  const rank = q * total;
  let below = 0;
  for (const [low, high, count] of h.buckets) {
    if (below + count >= rank && count > 0) {
      return low + ((high - low) * Math.max(0, rank - below)) / count;
    }
    below += count;
  }
  const last = h.buckets[h.buckets.length - 1];
  return last ? last[1] : null;
}

export interface HistogramSummary {
  readonly count: number;
  readonly p50: number | null;
  readonly p90: number | null;
  readonly p99: number | null;
  /** Upper bound of the highest non-empty bucket. */
  readonly max: number | null;
}

export function summarizeHistogram(h: Histogram): HistogramSummary {
  return {
    count: histogramCount(h),
    p50: histogramQuantile(h, 0.5),
    p90: histogramQuantile(h, 0.9),
    p99: histogramQuantile(h, 0.99),
    max: h.buckets[h.buckets.length - 1]?.[1] ?? null,
  };
}
