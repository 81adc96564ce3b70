/**
 * Inference statistics against reference values computed with scipy 1.17.1 / numpy 2.4.6
 * (Python 3.11). Each expectation names the exact call that produced it, so anyone can recompute.
 */
import { describe, expect, it } from 'vitest';
import { chooseMethod, exactUCdf, mannWhitneyU, smallestPossiblePValue } from '../stats/mann-whitney.js';
import { erfc, normalQuantile, normalSf } from '../stats/normal.js';
import { ratioConfidenceInterval } from '../stats/ratio-ci.js';

/** Relative closeness, for p-values spanning many orders of magnitude. */
function expectRel(actual: number, expected: number, rel = 1e-10): void {
  if (expected === 0) {
    expect(actual).toBe(0);
    return;
  }
  expect(Math.abs(actual - expected) / Math.abs(expected)).toBeLessThan(rel);
}

describe('normal tail', () => {
  it('matches scipy.special.erfc to near double precision', () => {
    // scipy.special.erfc(x)
    const ref: [number, number][] = [
      [0.1, 0.8875370839817152],
      [1, 0.15729920705028516],
      [1.99, 0.004888586800383002],
      [2.0, 0.004677734981047266],
      [3, 2.2090496998585445e-5],
      [5, 1.5374597944280347e-12],
      [10, 2.0884875837625446e-45],
    ];
    for (const [x, want] of ref) expectRel(erfc(x), want, 1e-13);
  });

  it('matches scipy.special.ndtr(-z) for the survival function', () => {
    // scipy.special.ndtr(-z)
    const ref: [number, number][] = [
      [-3, 0.9986501019683699],
      [-1, 0.8413447460685429],
      [0, 0.5],
      [0.5, 0.3085375387259869],
      [1.959963984540054, 0.025],
      [2.5, 0.006209665325776132],
      [4, 3.167124183311986e-5],
      [8, 6.22096057427174e-16],
      [12, 1.776482112077653e-33],
      [20, 2.7536241186061556e-89],
      [30, 4.906713927147908e-198],
    ];
    for (const [z, want] of ref) expectRel(normalSf(z), want, 1e-12);
  });

  it('inverts the cdf like scipy.special.ndtri', () => {
    // scipy.special.ndtri(0.975) = 1.959963984540054; scipy.special.ndtri(0.9) = 1.2815515655446004
    expectRel(normalQuantile(0.975), 1.959963984540054, 1e-12);
    expectRel(normalQuantile(0.9), 1.2815515655446004, 1e-12);
  });
});

describe('Mann-Whitney U', () => {
  // Every case: r = scipy.stats.mannwhitneyu(x, y, alternative='two-sided', method='auto');
  // the expected u and p are float(r.statistic) and float(r.pvalue).
  const cases: { name: string; x: number[]; y: number[]; u: number; p: number; method: 'exact' | 'asymptotic' }[] = [
    {
      name: '5 vs 5, fully separated (exact)',
      x: [10.2, 11.5, 9.8, 10.9, 10.4],
      y: [12.1, 11.9, 12.8, 11.7, 12.4],
      u: 0,
      p: 0.007936507936507936,
      method: 'exact',
    },
    { name: '3 vs 3 (exact)', x: [385229, 367806, 478954], y: [401000, 390500, 410200], u: 3, p: 0.7, method: 'exact' },
    { name: 'small with ties (asymptotic)', x: [1, 2, 2, 3, 4], y: [2, 3, 3, 5, 6], u: 6, p: 0.19882894401644247, method: 'asymptotic' },
    {
      name: '12 vs 15 without ties (asymptotic)',
      x: [106.4791, 104.6932, 93.5698, 88.2174, 98.5531, 112.0346, 113.3358, 109.083, 103.4656, 116.0003, 112.3284, 97.7968],
      y: [97.3804, 104.3543, 103.7998, 114.8751, 89.0088, 106.0863, 124.7122, 98.7972, 100.4154, 107.1574, 93.8218, 106.7039, 107.8435, 107.9534, 98.1149],
      u: 97,
      p: 0.7511164910310382,
      method: 'asymptotic',
    },
    {
      name: '4 vs 20 (exact: one side has at most 8)',
      x: [48.1708, 53.2691, 46.4272, 52.736],
      y: [56.2776, 45.865, 49.7735, 56.2766, 55.4675, 53.8969, 51.2569, 53.5428, 62.3739, 51.8927, 55.8982, 50.9163, 52.0084, 56.2401, 48.355, 51.7879, 49.9485, 48.7065, 53.8788, 59.1991],
      u: 22,
      p: 0.1825710521362695,
      method: 'exact',
    },
    { name: 'all equal', x: [5, 5, 5], y: [5, 5, 5], u: 4.5, p: 1, method: 'asymptotic' },
    {
      name: '8 vs 30 (exact)',
      x: [10.2214, 9.6182, 8.5489, 10.819, 10.2105, 9.3687, 10.8614, 11.5742],
      y: [8.8683, 11.0903, 11.3459, 11.0805, 12.1018, 11.1254, 9.5965, 14.3001, 10.6462, 11.9821, 12.4661, 11.3814, 8.7019, 8.796, 9.8224, 10.5341, 9.1112, 9.5628, 10.0549, 10.0249, 10.6886, 10.5726, 10.4612, 9.8823, 9.6676, 8.5891, 11.7675, 10.6955, 10.8695, 8.7826],
      u: 103,
      p: 0.5617520728376617,
      method: 'exact',
    },
    {
      name: '30 vs 25 integers with many ties (asymptotic)',
      x: [3, 5, 4, 6, 0, 1, 2, 3, 5, 8, 9, 7, 5, 5, 2, 9, 7, 6, 3, 2, 2, 9, 7, 7, 1, 5, 9, 7, 0, 3],
      y: [6, 2, 11, 10, 7, 9, 11, 9, 10, 11, 2, 3, 11, 8, 5, 6, 6, 2, 7, 5, 2, 4, 7, 2, 10],
      u: 250.5,
      p: 0.03490515268520477,
      method: 'asymptotic',
    },
    {
      name: '50 vs 50 fully separated (far tail)',
      x: Array.from({ length: 50 }, (_, i) => i),
      y: Array.from({ length: 50 }, (_, i) => i + 100.5),
      u: 0,
      p: 7.066071930388932e-18,
      method: 'asymptotic',
    },
  ];

  for (const c of cases) {
    it(`matches scipy: ${c.name}`, () => {
      const r = mannWhitneyU(c.x, c.y);
      expect(r.u).toBe(c.u);
      expect(r.method).toBe(c.method);
      expectRel(r.pValue, c.p, 1e-10);
    });
  }

  it('matches scipy where the exact counts outgrow 2^53 (8 vs 400)', () => {
    // Jx = [((i*7919) % 1000)/10 for i in range(1,9)]
    // Jy = [((i*104729) % 1009)/10.0 + 3.05 for i in range(1,401)]   (no ties)
    // scipy.stats.mannwhitneyu(Jx, Jy, alternative='two-sided', method='auto') -> U 1889.0, p 0.3892330042428565
    const x = Array.from({ length: 8 }, (_, k) => ((k + 1) * 7919 % 1000) / 10);
    const y = Array.from({ length: 400 }, (_, k) => ((k + 1) * 104729 % 1009) / 10.0 + 3.05);
    const r = mannWhitneyU(x, y);
    expect(r.method).toBe('exact');
    expect(r.u).toBe(1889);
    expectRel(r.pValue, 0.3892330042428565, 1e-9);
    // The same y shifted by 3 instead of 3.05 ties with x, which sends scipy to the normal
    // approximation: U 1890.5, p 0.37988061195666056.
    const tied = mannWhitneyU(x, y.map((v) => v - 0.05));
    expect(tied.method).toBe('asymptotic');
    expect(tied.u).toBe(1890.5);
    expectRel(tied.pValue, 0.37988061195666056, 1e-9);
  });

  it('has the exact null distribution of scipy and of direct enumeration', () => {
    // Enumerating itertools.combinations(range(1, 11), 5): P(U <= u) for u = 0..4
    const cdf = exactUCdf(5, 5);
    const want = [0.003968253968253968, 0.007936507936507936, 0.015873015873015872, 0.027777777777777776, 0.047619047619047616];
    want.forEach((w, u) => {
      expectRel(cdf[u] ?? Number.NaN, w, 1e-14);
    });
    expect(cdf[25]).toBe(1);
    // scipy.stats._mannwhitneyu._MWU(8, 400).cdf(np.array([1000])) = 0.03447244444203991
    expectRel(exactUCdf(8, 400)[1000] ?? Number.NaN, 0.03447244444203991, 1e-12);
  });

  it('chooses its method as scipy does and knows the smallest reachable p', () => {
    expect(chooseMethod(9, 9, false)).toBe('asymptotic');
    expect(chooseMethod(8, 100, false)).toBe('exact');
    expect(chooseMethod(3, 3, true)).toBe('asymptotic');
    expectRel(smallestPossiblePValue(3, 3), 0.1, 1e-12);
    expectRel(smallestPossiblePValue(5, 5), 2 / 252, 1e-12);
  });

  it('refuses an empty sample', () => {
    expect(() => mannWhitneyU([], [1])).toThrow(RangeError);
  });
});

describe('ratio confidence interval (Hodges-Lehmann on logs)', () => {
  // Reference: numpy, d = np.sort(np.subtract.outer(np.log(y), np.log(x)).ravel()); k the largest
  // integer with P(U <= k-1) <= 0.025, the null cdf from enumerating
  // itertools.combinations(range(1, m+n+1), m); interval [exp(d[k-1]), exp(d[m*n-k])],
  // estimate exp(np.median(d)), coverage 1 - 2 P(U <= k-1). Script in the report of issue 6.
  it('gives the exact interval and its coverage for 5 vs 5', () => {
    const ci = ratioConfidenceInterval([10.2, 11.5, 9.8, 10.9, 10.4], [12.1, 11.9, 12.8, 11.7, 12.4]);
    expect(ci).not.toBeNull();
    if (!ci) return;
    // k = 3
    expectRel(ci.estimate, 1.1634615384615385, 1e-12);
    expectRel(ci.low, 1.0521739130434784, 1e-12);
    expectRel(ci.high, 1.254901960784314, 1e-12);
    expectRel(ci.level, 0.9682539682539683, 1e-12);
    expect(ci.method).toBe('exact');
  });

  it('gives the exact interval for 7 vs 6', () => {
    const ci = ratioConfidenceInterval([100, 104, 98, 101, 103, 99, 102], [110, 108, 113, 111, 109, 112]);
    if (!ci) throw new Error('expected an interval');
    // k = 7
    expectRel(ci.estimate, 1.093993873328753, 1e-12);
    expectRel(ci.low, 1.0673076923076923, 1e-12);
    expectRel(ci.high, 1.1224489795918366, 1e-12);
    expectRel(ci.level, 0.965034965034965, 1e-12);
  });

  it('uses the normal approximation of the rank for 60 vs 60', () => {
    // x = [50 + (i*37) % 23 for i in range(60)], y = [55 + (i*53) % 29 for i in range(60)];
    // k = floor(3600/2 - ndtri(0.975) * sqrt(3600 * 121 / 12)) = 1426
    const x = Array.from({ length: 60 }, (_, i) => 50 + ((i * 37) % 23));
    const y = Array.from({ length: 60 }, (_, i) => 55 + ((i * 53) % 29));
    const ci = ratioConfidenceInterval(x, y);
    if (!ci) throw new Error('expected an interval');
    expect(ci.method).toBe('asymptotic');
    expectRel(ci.estimate, 1.13221419793743, 1e-12);
    expectRel(ci.low, 1.0833333333333333, 1e-12);
    expectRel(ci.high, 1.1833333333333338, 1e-12);
  });

  it('returns null when 95% is out of reach or a value has no logarithm', () => {
    // 3 vs 3: P(U <= 0) = 1/20 = 0.05 > 0.025
    expect(ratioConfidenceInterval([385229, 367806, 478954], [401000, 390500, 410200])).toBeNull();
    expect(ratioConfidenceInterval([0, 1, 2, 3, 4], [1, 2, 3, 4, 5])).toBeNull();
  });

  it('excludes 1 exactly when the exact test rejects at the matching level', () => {
    const base = [10.2, 11.5, 9.8, 10.9, 10.4];
    const close = [10.5, 11.1, 10.0, 11.2, 10.6];
    const ci = ratioConfidenceInterval(base, close);
    if (!ci) throw new Error('expected an interval');
    expect(ci.low < 1 && ci.high > 1).toBe(mannWhitneyU(base, close).pValue > 1 - ci.level);
  });
});
