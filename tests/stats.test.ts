import { describe, expect, it } from 'vitest';
import { medianConfidenceInterval, summarize } from '../stats/summary.js';

describe('summary statistics', () => {
  it('matches R for mean, sample standard deviation and CV', () => {
    // R 4.3: x <- c(2,4,4,4,5,5,7,9); mean(x) = 5; sd(x) = 2.13809; median(x) = 4.5
    const s = summarize([9, 2, 4, 4, 5, 4, 5, 7]);
    expect(s.n).toBe(8);
    expect(s.mean).toBe(5);
    expect(s.median).toBe(4.5);
    expect(s.stddev).toBeCloseTo(2.13809, 5);
    expect(s.cv).toBeCloseTo(2.13809 / 5, 5);
    expect([s.min, s.max]).toEqual([2, 9]);
  });

  it('gives the order-statistic CI of the median with its exact coverage', () => {
    // Conover (1999) table A3 / R: n = 10 -> [x(2), x(9)], coverage 1 - 2 * pbinom(1, 10, 0.5) = 0.9785156
    const ci = medianConfidenceInterval([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(ci).toEqual({ low: 2, high: 9, level: expect.closeTo(0.9785156, 6) as number });
    // n = 20 -> [x(6), x(15)], 1 - 2 * pbinom(5, 20, 0.5) = 0.9586105
    const ci20 = medianConfidenceInterval(Array.from({ length: 20 }, (_, i) => i + 1));
    expect(ci20).toEqual({ low: 6, high: 15, level: expect.closeTo(0.9586105, 6) as number });
  });

  it('refuses to claim 95% confidence from fewer than 6 runs', () => {
    expect(medianConfidenceInterval([1, 2, 3, 4, 5])).toBeNull();
    const s = summarize([3, 1, 2]);
    expect(s.ciLow).toBeNull();
    expect(s.median).toBe(2);
  });
});
