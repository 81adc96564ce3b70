/**
 * What each metric is, declared once beside its workload's metric schema: its unit, which way
 * is better, and what it means. Statistics, compare, the exporters, the dashboard, `fsbench
 * params` and docs/reference.md's metric tables all read it here, so "is more overflows worse?" is
 * answered in one place rather than guessed from a metric's name.
 */

/**
 * `higher` / `lower`: which way a change is an improvement, so a compare can call a
 * significant delta better or worse and a sweep's knee can look for the best value.
 * `neither`: a count of what happened or a fact about the setup (writes made, reads issued,
 * filesystem geometry): a change is reported, never called better or worse.
 */
export const DIRECTIONS = ['higher', 'lower', 'neither'] as const;
export type Direction = (typeof DIRECTIONS)[number];

export interface MetricDoc {
  /** Unit as printed next to a value (`events/s`, `ms`, `bytes`); `1` for a pure number. */
  readonly unit: string;
  readonly direction: Direction;
  /** One line: what the number counts or measures. */
  readonly doc: string;
}

/**
 * One doc per metric of a workload's metric type, no more and no fewer: used with `satisfies`,
 * so a metric added to a schema without its doc (or a doc left behind) does not compile.
 */
export type MetricDocs<M> = { readonly [K in keyof M]-?: MetricDoc };

/** A metric's doc together with its name and whether summaries show it first. */
export interface MetricInfo extends MetricDoc {
  readonly name: string;
  readonly headline: boolean;
}

/**
 * Rates and durations: the quantities whose spread across repetitions says how repeatable a
 * measurement is. Counts of rare events (overflows: 0, 0, 2) and fractions near zero have a
 * CV too, but a large one there says nothing about the machine.
 */
export function isMeasure(doc: MetricDoc): boolean {
  return doc.direction !== 'neither' && (doc.unit.endsWith('/s') || doc.unit === 'ms' || doc.unit === 'us');
}
