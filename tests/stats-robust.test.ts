/**
 * Outliers, noise, histograms, geometric means, knees and streaming aggregation. Reference
 * values from scipy 1.17.1 / numpy 2.4.6 where a library computes the same thing; hand-worked
 * arithmetic (shown) where none does.
 */
import { describe, expect, it } from 'vitest';
import type { Histogram } from '../contract/result.js';
import { syntheticRuns } from './fixtures/synthetic.js';
import { aggregateRuns, CellAggregator, type AggregatableRun } from '../stats/aggregate.js';
import { metricDoc } from '../contract/workloads/index.js';
import { buildReport } from '../report/build.js';
import { histogramQuantile, mergeHistograms, summarizeHistogram } from '../stats/histogram.js';
import { findKnee } from '../stats/knee.js';
import { checkNoise } from '../stats/noise.js';
import { hasOutlierSorted, madOfSorted, medianAbsoluteDeviation, modifiedZScores, outlierIndexes } from '../stats/outliers.js';
import { median } from '../stats/summary.js';
import { deltaPercent, geometricMean } from '../stats/ratios.js';

describe('MAD outliers (Iglewicz & Hoaglin)', () => {
  const x = [2.1, 2.3, 2.2, 2.25, 9.7, 2.15, 2.4];

  it('matches scipy for MAD and the modified z-scores', () => {
    // scipy.stats.median_abs_deviation(x) = 0.10000000000000009
    expect(medianAbsoluteDeviation(x)).toBeCloseTo(0.10000000000000009, 14);
    // 0.6745 * (x - np.median(x)) / scipy.stats.median_abs_deviation(x)
    const want = [-1.0117499999999984, 0.3372499999999985, -0.3372499999999985, 0.0, 50.25024999999995, -0.6745000000000001, 1.0117499999999984];
    modifiedZScores(x).forEach((z, i) => {
      expect(z).toBeCloseTo(want[i] ?? Number.NaN, 10);
    });
    expect(outlierIndexes(x)).toEqual([4]);
  });

  it('finds the same MAD and outliers from sorted values without allocating', () => {
    let seed = 3;
    const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (let trial = 0; trial < 500; trial++) {
      const n = 1 + Math.floor(rand() * 12);
      const values = Array.from({ length: n }, () => Math.round(rand() * 20) + (rand() < 0.1 ? 100 : 0));
      const sorted = [...values].sort((a, b) => a - b);
      const m = median(values);
      expect(madOfSorted(sorted, m)).toBeCloseTo(medianAbsoluteDeviation(values), 12);
      if (n >= 3) expect(hasOutlierSorted(sorted, m) || outlierIndexes(values).length === 0).toBe(true);
    }
  });

  it('falls back to the mean absolute deviation when MAD is 0', () => {
    // y = [5, 5, 5, 5, 6, 100]: MAD 0, meanAD 16;
    // (y - np.median(y)) / (1.253314 * np.mean(np.abs(y - np.median(y)))) -> [0, 0, 0, 0, 0.0498678, 4.7374401]
    const z = modifiedZScores([5, 5, 5, 5, 6, 100]);
    expect(z[4]).toBeCloseTo(0.04986779051378984, 12);
    expect(z[5]).toBeCloseTo(4.737440098810034, 12);
    expect(outlierIndexes([5, 5, 5, 5, 6, 100])).toEqual([5]);
    expect(outlierIndexes([3, 3, 3])).toEqual([]);
  });
});

describe('noise warning', () => {
  it('calls a cell with too few runs or a high CV too noisy to conclude', () => {
    const few = checkNoise([385229, 367806, 478954]);
    expect(few.noisy).toBe(true);
    expect(few.reasons[0]).toMatch(/only 3 runs .*cannot reach p below 0\.1/);

    // np.std(v, ddof=1) / np.mean(v) = 0.1069064335180173 for v below
    const v = [385229, 367806, 478954, 390000, 401000];
    const high = checkNoise(v);
    expect(high.noisy).toBe(true);
    expect(high.reasons.join(' ')).toContain('CV 10.7% above 10%');
    expect(checkNoise(v, { maxCv: 0.11 }).noisy).toBe(false);

    const quiet = checkNoise([100, 101, 99, 100.5, 99.5]);
    expect(quiet).toEqual({ noisy: false, reasons: [], outliers: [] });
  });

  it('mentions outliers without calling the cell noisy for them alone', () => {
    const r = checkNoise([100, 100.2, 99.9, 100.1, 99.8, 100.3, 100, 130], { maxCv: 0.2 });
    expect(r.noisy).toBe(false);
    expect(r.outliers).toEqual([7]);
    expect(r.reasons).toEqual(['1 outlier (modified z-score above 3.5)']);
  });
});

describe('histograms', () => {
  const a: Histogram = { unit: 'ns', buckets: [[1000, 1100, 10], [1100, 1200, 5]] };
  const b: Histogram = { unit: 'ns', buckets: [[1100, 1200, 5], [5000, 5500, 2]] };

  it('merges by adding counts per bucket', () => {
    expect(mergeHistograms([a, b])).toEqual({ unit: 'ns', buckets: [[1000, 1100, 10], [1100, 1200, 10], [5000, 5500, 2]] });
  });

  it('reads percentiles from the merge, not from averaged percentiles', () => {
    const merged = mergeHistograms([a, b]);
    // N = 22. p50: rank 11 falls in [1100, 1200) with 10 below: 1100 + 100 * 1/10 = 1110.
    expect(histogramQuantile(merged, 0.5)).toBeCloseTo(1110, 9);
    // p99: rank 21.78 falls in [5000, 5500) with 20 below: 5000 + 500 * 1.78/2 = 5445.
    expect(histogramQuantile(merged, 0.99)).toBeCloseTo(5445, 9);
    // The average of the runs' own p99s: a: 1100 + 100 * (14.85 - 10)/5 = 1197; b: 5000 + 500 * (6.93 - 5)/2 = 5482.5
    const averaged = ((histogramQuantile(a, 0.99) ?? 0) + (histogramQuantile(b, 0.99) ?? 0)) / 2;
    expect(averaged).toBeCloseTo(3339.75, 9);
    expect(summarizeHistogram(merged)).toMatchObject({ count: 22, max: 5500 });
    expect(histogramQuantile(merged, 0)).toBe(1000);
    expect(histogramQuantile(merged, 1)).toBe(5500);
    expect(histogramQuantile({ unit: 'ns', buckets: [] }, 0.5)).toBeNull();
  });

  it('stays within one bucket of the exact percentile of the raw samples', () => {
    // Log-linear buckets with 32 sub-buckets per power of two, as the probe exports them.
    const bucketOf = (v: number): [number, number] => {
      const octave = 2 ** Math.floor(Math.log2(v));
      const width = octave / 32;
      const low = octave + Math.floor((v - octave) / width) * width;
      return [low, low + width];
    };
    const runs: number[][] = [];
    let seed = 7;
    const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (let r = 0; r < 5; r++) runs.push(Array.from({ length: 2000 }, () => 20_000 * Math.exp(1.2 * rand() + (r === 3 ? 1 : 0))));
    const toHistogram = (xs: number[]): Histogram => {
      const m = new Map<string, [number, number, number]>();
      for (const v of xs) {
        const [lo, hi] = bucketOf(v);
        const e = m.get(`${lo}`);
        if (e) e[2]++;
        else m.set(`${lo}`, [lo, hi, 1]);
      }
      return { unit: 'ns', buckets: [...m.values()] };
    };
    const merged = mergeHistograms(runs.map(toHistogram));
    const all = runs.flat().sort((x, y) => x - y);
    for (const q of [0.5, 0.9, 0.99]) {
      // numpy.percentile(all, 100 * q, method='inverted_cdf'): the ceil(q N)-th smallest sample.
      const exact = all[Math.ceil(q * all.length) - 1] ?? Number.NaN;
      const got = histogramQuantile(merged, q) ?? Number.NaN;
      expect(Math.abs(got - exact) / exact).toBeLessThan(1 / 32);
    }
  });
});

describe('geometric mean and deltas', () => {
  it('matches scipy.stats.gmean', () => {
    // scipy.stats.gmean([1.05, 0.97, 1.20, 0.88, 1.01]) = 1.0166916694641754
    expect(geometricMean([1.05, 0.97, 1.2, 0.88, 1.01])).toBeCloseTo(1.0166916694641754, 14);
    // scipy.stats.gmean([2.0, 0.5]) = 1.0: twice as fast and half as fast cancel out
    expect(geometricMean([2, 0.5])).toBeCloseTo(1, 15);
    expect(geometricMean([0, -1])).toBeNull();
    expect(deltaPercent(200, 250)).toBe(25);
    expect(deltaPercent(0, 1)).toBeNull();
  });
});

describe('knee of a sweep', () => {
  const KiB = 1024;
  const sweep = [100, 180, 300, 450, 600, 700, 760, 790, 800, 805, 810, 812, 808, 811, 809, 812].map((median, i) => ({ x: KiB * 2 ** i, median }));

  it('is the smallest value within 5% of the best', () => {
    // best 812; 0.95 * 812 = 771.4; the first median at or above it is 790 at 2^7 KiB = 128 KiB.
    const knee = findKnee(sweep);
    expect(knee).toEqual({ x: 128 * KiB, median: 790, bestX: 2048 * KiB, best: 812, tolerance: 0.05 });
    expect(findKnee(sweep, { tolerance: 0.01 })?.x).toBe(512 * KiB); // 0.99 * 812 = 803.88 -> 805
    expect(findKnee([])).toBeNull();
  });

  it('looks for the minimum when lower is better', () => {
    const latency = [{ x: 1, median: 50 }, { x: 2, median: 20 }, { x: 4, median: 10.4 }, { x: 8, median: 10 }];
    expect(findKnee(latency, { higherIsBetter: false })?.x).toBe(4);
    // Directions are declared with each metric in the contract, not guessed from names.
    expect(metricDoc('inotify', 'latencyP99Us')?.direction).toBe('lower');
    expect(metricDoc('inotify', 'eventsPerSec')?.direction).toBe('higher');
    expect(metricDoc('metadata', 'inodeSize')?.direction).toBe('neither');
    expect(metricDoc('inotify', 'constructor')).toBeUndefined();
  });

  it("finds one knee per machine and fixed parameters in a report, next to the machine's L3 size", () => {
    const matrix = {
      name: 'sweep',
      workload: 'inotify' as const,
      repetitions: 5,
      params: { files: [128, 1024], bufferBytes: Array.from({ length: 16 }, (_, i) => 1024 * 2 ** i) },
    };
    const runs = [
      ...syntheticRuns({ matrix, machine: { machine: 'laptop', l3Bytes: 8 * 1024 ** 2 }, seed: 3, noise: 0.005 }),
      ...syntheticRuns({ matrix, machine: { machine: 'server', l3Bytes: 32 * 1024 ** 2 }, seed: 4, noise: 0.005 }),
    ];
    const { knees } = buildReport(runs, { title: 'sweep' });
    expect(knees).toHaveLength(4);
    expect(new Set(knees.map((k) => `${k.machine} ${k.label}`))).toEqual(new Set(['laptop files=128', 'laptop files=1024', 'server files=128', 'server files=1024']));
    for (const k of knees) {
      // The model flattens at about l3/8 * ln(18) = 0.36 L3, so the knee is L3/4 or L3/2.
      expect(k).toMatchObject({ param: 'bufferBytes', metric: 'eventsPerSec' });
      expect(k.l3Bytes).toBe(k.machine === 'laptop' ? 8 * 1024 ** 2 : 32 * 1024 ** 2);
      expect([0.25, 0.5]).toContain(k.kneeOverL3);
      expect(k.points).toHaveLength(16);
    }
  });
});

describe('streaming aggregation', () => {
  const matrix = { name: 'agg', workload: 'inotify' as const, repetitions: 6, params: { files: [128, 256], bufferBytes: ['4KiB', '1MiB'] } };
  const runs = syntheticRuns({ matrix, machine: { machine: 'm1' }, seed: 9 });

  it('summarises each cell with its median CI, noise check and merged histograms', () => {
    const cells = aggregateRuns(runs);
    expect(cells).toHaveLength(4);
    const c = cells[0];
    if (!c) throw new Error('no cell');
    expect(c.ok).toBe(6);
    const eps = c.metrics['eventsPerSec'];
    expect(eps?.n).toBe(6);
    expect(eps?.ciLevel).toBeCloseTo(0.96875, 10); // 1 - 2 * pbinom(0, 6, 0.5)
    expect(eps?.noisy).toBe(false);
    // 6 runs with 50..55 + 40 + 10 samples: the buckets add up.
    expect(c.histograms['writeToEventLatency']?.summary.count).toBe(50 * 6 + 15 + 40 * 6 + 10 * 6);
  });

  it('releases each cell when grouped input moves on, and refuses input that is not grouped', () => {
    const seen: string[] = [];
    const agg = new CellAggregator({ grouped: true, onCell: (c) => seen.push(c.cellId) });
    for (const r of runs) agg.add(r);
    expect(seen).toHaveLength(3); // the last cell is still open
    expect(agg.finish()).toEqual([]);
    expect(seen).toHaveLength(4);

    const interleaved: AggregatableRun[] = [runs[0], runs[6], runs[1]].filter((r): r is NonNullable<typeof r> => r !== undefined);
    const bad = new CellAggregator({ grouped: true });
    expect(() => {
      for (const r of interleaved) bad.add(r);
    }).toThrow(/not grouped by cell/);
  });

  it('counts failed and skipped runs and keeps the first problem', () => {
    const first = runs[0];
    if (!first) throw new Error('no run');
    const failed: AggregatableRun = { ...first, state: 'failed', error: { code: 'PROBE_FAILED', message: 'boom' } };
    const [cell] = aggregateRuns([failed, first]);
    expect(cell).toMatchObject({ ok: 1, failed: 1, skipped: 0, problem: 'PROBE_FAILED: boom' });
  });
});
