/**
 * Change-point detection (stats/change-point.ts) against Apache Otava's published examples (its
 * test suite at commit 1ceb153: analysis_test.py, change_point_divisive_test.py and the
 * TigerBeetle series of tigerbeetle_test.py at ten thresholds), and synthetic series with known
 * steps. The t distribution behind it against values scipy prints.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { changeMagnitude, changePoints } from '../stats/change-point.js';
import { incompleteBeta, studentTTest, studentTwoSidedP } from '../stats/student-t.js';

const TigerBeetle = z.object({
  series: z.array(z.number()),
  cases: z.array(z.object({ name: z.string(), windowLen: z.number(), maxPValue: z.number(), minMagnitude: z.number(), expected: z.array(z.number()) })),
});
const tigerBeetle = TigerBeetle.parse(JSON.parse(readFileSync(new URL('./fixtures/otava-tigerbeetle.json', import.meta.url), 'utf8')));

/** A deterministic noise source (a 32-bit LCG mapped to a sum of uniforms, roughly normal). */
function noise(seed: number): () => number {
  let s = seed >>> 0;
  const u = () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
  return () => u() + u() + u() + u() - 2;
}

describe('Student t', () => {
  it('gives the two-sided p-values scipy gives', () => {
    // scipy.stats.t.sf(t, df) * 2
    expect(studentTwoSidedP(2.0, 10)).toBeCloseTo(0.07338803477074037, 10);
    expect(studentTwoSidedP(2.228138851986, 10)).toBeCloseTo(0.05, 10);
    expect(studentTwoSidedP(5, 3)).toBeCloseTo(0.015392438073302294, 10);
    expect(studentTwoSidedP(0.5, 100)).toBeCloseTo(0.6181735658308866, 10);
    expect(studentTwoSidedP(Number.POSITIVE_INFINITY, 4)).toBe(0);
    expect(incompleteBeta(0.5, 2, 2)).toBeCloseTo(0.5, 12);
  });

  it('judges Otava\'s two significance examples as its tester does', () => {
    const same = studentTTest([1.0, 1.02, 1.05, 0.95, 0.98], [1.0, 1.02, 1.05, 0.95, 0.98]);
    expect(same.p).toBeGreaterThan(0.99);
    const step = studentTTest([1.0, 1.02, 1.05, 0.95, 0.98], [0.8, 0.82, 0.85, 0.79, 0.77]);
    expect(step.p).toBeGreaterThan(0);
    expect(step.p).toBeLessThan(0.001);
  });
});

describe('change points', () => {
  it('finds the one step of Otava\'s single series at index 10', () => {
    const series = [1.02, 0.95, 0.99, 1.0, 1.12, 1.0, 1.01, 0.98, 1.01, 0.96, 0.5, 0.51, 0.48, 0.48, 0.55, 0.5, 0.49, 0.51, 0.5, 0.49];
    const found = changePoints(series, { windowLength: 10, maxP: 0.0001 });
    expect(found.map((c) => c.index)).toEqual([10]);
    expect(found[0]?.test.meanA).toBeCloseTo(1.004, 6);
    expect(found[0]?.test.meanB).toBeCloseTo(0.501, 6);
  });

  it('finds both steps of Otava\'s divisive example at 5 and 8', () => {
    const series = [0.3, 2.4, 1.5, -0.9, -0.5, 99.7, 98.3, 99.1, 149.0, 149.7, 149.5, 149.1, 148.8, 150.0];
    expect(changePoints(series, { windowLength: 30, maxP: 0.01 }).map((c) => c.index)).toEqual([5, 8]);
  });

  it.each(tigerBeetle.cases.map((c) => [c.name, c] as const))('finds Otava\'s change points in the TigerBeetle series: %s', (_name, c) => {
    expect(tigerBeetle.series.length).toBe(365);
    const options = { windowLength: c.windowLen, maxP: c.maxPValue, minMagnitude: c.minMagnitude };
    expect(changePoints(tigerBeetle.series, { ...options, otava: true }).map((p) => p.index)).toEqual(c.expected);
    // By default each point is judged against its final neighbours: every one is significant,
    // and a point Otava keeps on a stale p is gone.
    const found = changePoints(tigerBeetle.series, options);
    expect(found.length).toBeGreaterThan(0);
    for (const p of found) expect(p.test.p).toBeLessThan(c.maxPValue);
    for (const p of found) expect(changeMagnitude(p.test)).toBeGreaterThan(c.minMagnitude);
  });

  it('finds a known 20% step in 2% noise where it is, with its magnitude, and nothing in noise alone', () => {
    const draw = noise(7);
    const flat = Array.from({ length: 120 }, () => 100 * (1 + 0.02 * draw()));
    expect(changePoints(flat, { windowLength: 30, maxP: 0.001 })).toEqual([]);
    const stepped = flat.map((x, i) => (i >= 70 ? x * 1.2 : x));
    const found = changePoints(stepped, { windowLength: 30, maxP: 0.001 });
    expect(found.map((c) => c.index)).toEqual([70]);
    const first = found[0];
    expect(first).toBeDefined();
    if (first) expect(changeMagnitude(first.test)).toBeGreaterThan(0.17);
    if (first) expect(changeMagnitude(first.test)).toBeLessThan(0.23);
  });

  it('finds two steps, up then back down, and keeps the same answer on a second run', () => {
    const draw = noise(11);
    const series = Array.from({ length: 90 }, (_, i) => (i >= 30 && i < 60 ? 130 : 100) + draw());
    const once = changePoints(series, { windowLength: 30 });
    expect(once.map((c) => c.index)).toEqual([30, 60]);
    expect(changePoints(series, { windowLength: 30 })).toEqual(once);
  });

  it('refuses a series it cannot judge instead of answering something', () => {
    expect(() => changePoints([1, Number.NaN, 2])).toThrow(RangeError);
    expect(() => changePoints([1, 2, 3], { windowLength: 1 })).toThrow(RangeError);
    expect(changePoints([])).toEqual([]);
    expect(changePoints([5, 5, 5, 5])).toEqual([]);
  });
});
