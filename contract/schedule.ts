/**
 * In which order a matrix's runs are made: the one schedule `fsbench run` follows and the
 * coordinator queues. Slow drift on a machine (heat, a neighbour, a growing page cache) lands on
 * whatever runs last; visiting every cell once per round spreads it over all cells instead of
 * biasing the last ones, and a shuffled round order also breaks the link between a cell and its
 * place in the round.
 */
import { z } from 'zod';

export const RUN_ORDERS = ['interleaved', 'sequential', 'shuffled'] as const;
/**
 * `interleaved`: round r makes repetition r of every cell, in matrix order. `sequential`: every
 * repetition of a cell, then the next cell. `shuffled`: rounds as interleaved, each in its own
 * order drawn from `seed`.
 */
export const RunOrder = z.enum(RUN_ORDERS);
export type RunOrder = z.infer<typeof RunOrder>;

/** A shuffle seed: 32 bits, recorded with the matrix so its order can be made again. */
export const Seed = z.number().int().min(0).max(0xffff_ffff);

/** What `repetitions: auto` resolves to (contract/matrix.ts `adaptiveRepetitions`). */
export interface AdaptiveRepetitions {
  /** Runs every cell gets before its precision is judged. */
  readonly min: number;
  /** Runs after which a cell stops whatever its precision. */
  readonly max: number;
  /** The wanted relative half-width of the median's 95% confidence interval (0.02 = ±2%). */
  readonly target: number;
  /**
   * The change a comparison of two such sets of runs must be able to detect with 80% power (0.05
   * = 5%), besides the precision; absent: precision alone decides.
   */
  readonly detectable?: number;
  /** The metric whose median must reach the target. */
  readonly metric: string;
}

/**
 * What every measured run records of how its place was decided (its `info`): the order, the
 * seed of a shuffled one, and under `repetitions: auto` the precision its cell was run to.
 */
export function scheduleInfo(
  order: RunOrder,
  seed: number | undefined,
  adaptive: AdaptiveRepetitions | null,
): Record<string, string | number> {
  return {
    order,
    ...(seed === undefined ? {} : { seed }),
    ...(adaptive ? { precisionMetric: adaptive.metric, precisionTarget: adaptive.target } : {}),
  };
}

/** A seed for a shuffled matrix that gave none. */
export function newSeed(): number {
  return Math.floor(Math.random() * 0x1_0000_0000);
}

/**
 * mulberry32 (Tommy Ettinger's public-domain generator), uniform in [0, 1): its whole state is the
 * 32-bit seed, so a seed replays an order.
 */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/**
 * The order of the cells (indexes into the matrix's cells) in each successive round of an
 * interleaved or shuffled schedule, without end: `repetitions: auto` adds rounds as cells need them.
 */
export function* rounds(cells: number, order: RunOrder, seed: number | undefined): Generator<readonly number[], never> {
  const identity: readonly number[] = Array.from({ length: cells }, (_, i) => i);
  const next = mulberry32(seed ?? 0);
  for (;;) {
    if (order !== 'shuffled') {
      yield identity;
      continue;
    }
    const o = [...identity];
    // Fisher-Yates.
    for (let i = o.length - 1; i > 0; i--) {
      const j = Math.floor(next() * (i + 1));
      const t = o[i] ?? 0;
      o[i] = o[j] ?? 0;
      o[j] = t;
    }
    yield o;
  }
}

/** One run to make: a cell (by index in the matrix's cells) and its repetition. */
export interface ScheduledRun {
  readonly cell: number;
  readonly repetition: number;
}

/**
 * Every run of `cells` cells with `repetitions` repetitions each, in the order `order` asks for.
 * The same arguments give the same list on every machine.
 */
export function runOrder(cells: number, repetitions: number, order: RunOrder, seed?: number): ScheduledRun[] {
  const out: ScheduledRun[] = [];
  if (order === 'sequential') {
    for (let cell = 0; cell < cells; cell++) for (let repetition = 0; repetition < repetitions; repetition++) out.push({ cell, repetition });
    return out;
  }
  const each = rounds(cells, order, seed);
  for (let repetition = 0; repetition < repetitions; repetition++) {
    for (const cell of each.next().value) out.push({ cell, repetition });
  }
  return out;
}
