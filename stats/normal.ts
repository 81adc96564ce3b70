/**
 * The standard normal distribution's tail, to double precision, for the large-sample
 * approximations of rank tests. Written out rather than imported because one function does not
 * justify a numerics dependency, and the usual 7-digit textbook approximations (Abramowitz &
 * Stegun 7.1.26) are too coarse to reproduce scipy's p-values in tests.
 */

const TWO_OVER_SQRT_PI = 2 / Math.sqrt(Math.PI);
const ONE_OVER_SQRT_PI = 1 / Math.sqrt(Math.PI);

/**
 * Complementary error function erfc(x) = 1 - erf(x).
 *
 * For |x| < 2, the all-positive series erf(x) = 2/sqrt(pi) exp(-x^2) sum_{n>=0} 2^n x^(2n+1) /
 * (1 * 3 * ... * (2n+1)) (Abramowitz & Stegun 7.1.6), which has no cancellation; for x >= 2, the
 * continued fraction erfc(x) = exp(-x^2)/sqrt(pi) * 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + ...))))
 * (A&S 7.1.14) evaluated by the modified Lentz method (Numerical Recipes, 3rd ed., section 5.2),
 * which keeps full relative precision far into the tail. erfc(-x) = 2 - erfc(x).
 */
export function erfc(x: number): number {
  if (Number.isNaN(x)) return Number.NaN;
  if (x < 0) return 2 - erfc(-x);
  if (x < 2) {
    const x2 = x * x;
    let term = x;
    let sum = x;
    for (let n = 1; n < 200; n++) {
      term *= (2 * x2) / (2 * n + 1);
      sum += term;
      if (term < sum * 1e-17) break;
    }
    return 1 - TWO_OVER_SQRT_PI * Math.exp(-x2) * sum;
  }
  if (x > 27) return 0; // exp(-x^2) underflows below the smallest double
  const tiny = 1e-300;
  let f = x;
  let c = x;
  let d = 0;
  for (let k = 1; k < 500; k++) {
    const a = k / 2;
    d = x + a * d;
    d = d === 0 ? tiny : d;
    c = x + a / c;
    c = c === 0 ? tiny : c;
    d = 1 / d;
    const delta = c * d;
    f *= delta;
    if (Math.abs(delta - 1) < 1e-16) break;
  }
  return (ONE_OVER_SQRT_PI * Math.exp(-x * x)) / f;
}

/** P(Z > z) for a standard normal Z: sf(z) = erfc(z / sqrt(2)) / 2 (scipy.special.ndtr(-z)). */
export function normalSf(z: number): number {
  if (z === Number.POSITIVE_INFINITY) return 0;
  if (z === Number.NEGATIVE_INFINITY) return 1;
  return erfc(z / Math.SQRT2) / 2;
}

/** P(Z <= z) for a standard normal Z. */
export function normalCdf(z: number): number {
  return normalSf(-z);
}

/**
 * The quantile z with P(Z <= z) = p, by bisection on `normalCdf` (60 halvings of [-40, 40]
 * reach the spacing of doubles near 1). Only used for interval widths, never in a hot loop.
 */
export function normalQuantile(p: number): number {
  if (!(p > 0 && p < 1)) {
    if (p === 0) return Number.NEGATIVE_INFINITY;
    if (p === 1) return Number.POSITIVE_INFINITY;
    return Number.NaN;
  }
  let lo = -40;
  let hi = 40;
  for (let i = 0; i < 200 && hi - lo > 1e-15 * Math.max(1, Math.abs(lo)); i++) {
    const mid = (lo + hi) / 2;
    if (normalCdf(mid) < p) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}
