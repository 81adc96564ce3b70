/**
 * The minimum detectable effect (stats/power.ts): its quantiles against scipy's, its formula
 * against Lehr's rule, and its promise checked the way a user would: a change of exactly that
 * size, injected into seeded normal noise, is found by the Mann-Whitney test about 80% of the
 * time, and no change about 5% of the time.
 */
import { describe, expect, it } from 'vitest';
import { mannWhitneyU } from '../stats/mann-whitney.js';
import { adaptiveRepetitions, parseMatrix } from '../contract/matrix.js';
import { detectableShift, minimumDetectableEffect, studentQuantile } from '../stats/power.js';
import { precisionVerdict } from '../stats/precision.js';

/** Seeded standard normal draws (a 32-bit LCG through Box-Muller). */
function normals(seed: number): () => number {
  let s = seed >>> 0;
  const u = () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return (s + 0.5) / 2 ** 32;
  };
  return () => Math.sqrt(-2 * Math.log(u())) * Math.cos(2 * Math.PI * u());
}

function detectionRate(shift: number, n: number, trials: number, seed: number): number {
  const z = normals(seed);
  let hits = 0;
  for (let t = 0; t < trials; t++) {
    const a = Array.from({ length: n }, () => 100 + z());
    const b = Array.from({ length: n }, () => 100 + shift + z());
    if (mannWhitneyU(a, b).pValue < 0.05) hits++;
  }
  return hits / trials;
}

describe('minimum detectable effect', () => {
  it('uses the t quantiles scipy gives', () => {
    expect(studentQuantile(0.975, 10)).toBeCloseTo(2.228138851986274, 8);
    expect(studentQuantile(0.8, 18)).toBeCloseTo(0.8620486679895989, 8);
    expect(studentQuantile(0.025, 5)).toBeCloseTo(-2.5705818356363155, 8);
  });

  it('is Lehr\'s rule for many runs, widened by sqrt(pi/3) for the Mann-Whitney test', () => {
    // 16 runs a side detect one standard deviation at 5% and 80% with the t-test (n = 16/d²).
    const t = detectableShift(1, 16, 16) / Math.sqrt(Math.PI / 3);
    expect(t).toBeGreaterThan(0.98);
    expect(t).toBeLessThan(1.05);
    expect(detectableShift(1, 400, 400) / Math.sqrt(Math.PI / 3)).toBeCloseTo(2.8016 * Math.sqrt(2 / 400), 2);
  });

  it('is found about 80% of the time when injected, and no change about 5% of the time', () => {
    const shift = detectableShift(1, 10, 10);
    expect(shift).toBeCloseTo(1.356, 2);
    const found = detectionRate(shift, 10, 2000, 1);
    expect(found).toBeGreaterThan(0.74);
    expect(found).toBeLessThan(0.86);
    expect(detectionRate(0, 10, 2000, 2)).toBeLessThan(0.065);
  });

  it('says no change is detectable when the run counts cannot reach the level, and relates the shift to the baseline', () => {
    expect(detectableShift(1, 3, 3)).toBe(Number.POSITIVE_INFINITY);
    expect(minimumDetectableEffect([1, 2], [1], {})).toBe(Number.POSITIVE_INFINITY);
    expect(minimumDetectableEffect([0, 0, 0, 0, 1], [0, 0, 0, 1, 0])).toBeNull();
    const base = [98, 102, 100, 99, 101, 100, 97, 103, 100, 100];
    const mde = minimumDetectableEffect(base, base);
    expect(mde).not.toBeNull();
    // sd 1.63 over a median of 100: about 2.2% with 10 runs a side.
    expect(mde ?? 0).toBeGreaterThan(0.019);
    expect(mde ?? 0).toBeLessThan(0.025);
  });
});

describe('repetitions: auto with targetDetectable', () => {
  it('keeps a cell running until a gate could see the target change, not only until its median is precise', () => {
    const z = normals(5);
    // 3% noise: the median is known to ±2% within 10 runs, but a 2% change needs far more.
    const noisy = Array.from({ length: 10 }, () => 100 * (1 + 0.03 * z()));
    const spec = parseMatrix({ name: 'd', workload: 'noop', repetitions: 'auto', targetPrecision: '5%', targetDetectable: '2%', maxRepetitions: 200 });
    const a = adaptiveRepetitions(spec);
    expect(a?.detectable).toBe(0.02);
    if (!a) return;
    expect(precisionVerdict(noisy, { ...a, detectable: undefined })).toBe('reached');
    expect(precisionVerdict(noisy, a)).toBe('more');
    // Enough runs: MDE = 1.36 * 0.03 * sqrt(10 / n) falls below 2% near n = 40.
    const many = Array.from({ length: 60 }, () => 100 * (1 + 0.03 * z()));
    expect(precisionVerdict(many, a)).toBe('reached');
    expect(() => parseMatrix({ name: 'd', workload: 'noop', repetitions: 5, targetDetectable: '2%' })).toThrow(/targetDetectable: applies only with repetitions: auto/);
  });
});
