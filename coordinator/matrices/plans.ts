/**
 * How many runs each cell gets on each target under `repetitions: auto`. A matrix starts with
 * `minRepetitions` runs of every cell queued and its expected runs at the most it could make
 * (`maxRepetitions` each), so it cannot be done early. Once every queued run of a cell has been
 * stored, the cell is judged on its stored values (stats/precision.ts, the same rule `fsbench run`
 * follows): one more run is queued, or the cell stops, and the runs it will not make are taken
 * off the matrix's expected runs. Matrices with a fixed count have no plans.
 *
 * The plans are kept in the store (store/plan-table.ts, written with the matrix), so a restart
 * finds what was queued; a cell whose runs were all stored while the coordinator was down is
 * judged then (`judgeAll`).
 */
import { adaptiveRepetitions, maxRepetitions, type Matrix } from '../../contract/matrix.js';
import { precisionVerdict, relativeHalfWidth } from '../../stats/precision.js';
import type { MatrixRecord, PlanCell, Planned, Store, StoredRun } from '../store/index.js';
import type { PrecisionSummary } from './answers.js';

/** A run to queue because its cell is not precise enough yet. */
export interface NextRun extends PlanCell {
  readonly repetition: number;
}

const MAX_IMPRECISE_SHOWN = 100;

/**
 * The one rule for how many runs of a cell on a target have been issued: all `most` of them
 * (maxRepetitions: a fixed count's `repetitions`), or under `auto` as many as its plan gave so
 * far. What the queues hold, what a cancel takes back, what a host that went away gives up, and
 * past which a report names a run nobody issued.
 */
export function issuedRuns(most: number, planned: number | undefined): number {
  return Math.min(most, planned ?? most);
}

/** issuedRuns of one cell on one target of a stored matrix, its plan read from the store. */
export function issuedOf(store: Store, m: MatrixRecord, cellId: string, target: string): number {
  return issuedRuns(maxRepetitions(m.spec), m.spec.repetitions === 'auto' ? store.plans.plannedOf({ matrixId: m.id, cellId, target }) : undefined);
}

/** Runs queued so far of each cell on each target under `auto`; undefined for a fixed count. */
export function plannedRuns(store: Store, m: MatrixRecord): Planned | undefined {
  return m.spec.repetitions === 'auto' ? store.plans.planned(m.id) : undefined;
}

/**
 * Judges the cells these stored runs belong to; returns the runs to queue next and the
 * matrices whose expected runs changed (and which may now be done).
 */
export function afterStored(store: Store, runs: readonly StoredRun[]): { next: NextRun[]; changed: Set<string> } {
  const touched = new Map<string, PlanCell>();
  for (const r of runs) {
    const cellId = r.kind === 'result' ? r.result.cellId : r.cell.id;
    touched.set(`${r.matrixId} ${cellId} ${r.target}`, { matrixId: r.matrixId, cellId, target: r.target });
  }
  return judge(store, [...touched.values()]);
}

/** Judges every cell still measuring: after a restart, runs stored while nobody judged them. */
export function judgeAll(store: Store): { next: NextRun[]; changed: Set<string> } {
  return judge(store, store.plans.measuring());
}

function judge(store: Store, cells: readonly PlanCell[]): { next: NextRun[]; changed: Set<string> } {
  const next: NextRun[] = [];
  const changed = new Set<string>();
  const { plans } = store;
  // Once per matrix, not per cell: a batch of a fixed-count matrix touches hundreds of cells.
  const specs = new Map<string, Matrix | undefined>();
  const specOf = (id: string) => {
    if (!specs.has(id)) specs.set(id, store.getMatrix(id)?.spec);
    return specs.get(id);
  };
  plans.transaction(() => {
    for (const c of cells) {
      const spec = specOf(c.matrixId);
      const a = spec ? adaptiveRepetitions(spec) : null;
      if (!spec || !a) continue;
      const p = plans.plan(c);
      if (!p || p.verdict !== null) continue;
      const n = plans.stored(c);
      // Runs of this cell are still on their way: judge it on all of them.
      if (n.stored < p.planned) continue;
      const got = plans.values(c, a.metric).flatMap((v) => (typeof v === 'number' && Number.isFinite(v) ? [v] : []));
      const verdict = n.notOk > 0 ? 'stopped' : precisionVerdict(got, a);
      if (verdict === 'more' && p.planned < a.max) {
        plans.more(c);
        next.push({ matrixId: c.matrixId, cellId: c.cellId, target: c.target, repetition: p.planned });
        continue;
      }
      plans.settle(c, verdict === 'more' ? 'max' : verdict, relativeHalfWidth(got), maxRepetitions(spec) - p.planned);
      changed.add(c.matrixId);
    }
  });
  return { next, changed };
}

/** Where the cells of a matrix under `auto` stand; null for a fixed count. */
export function precisionSummary(store: Store, m: MatrixRecord): PrecisionSummary | null {
  const a = adaptiveRepetitions(m.spec);
  if (!a) return null;
  const rows = store.plans.verdictCounts(m.id);
  const count = (v: string | null) => rows.find((r) => r.verdict === v)?.n ?? 0;
  return {
    metric: a.metric,
    target: a.target,
    minRepetitions: a.min,
    maxRepetitions: a.max,
    measuring: count(null),
    reached: count('reached'),
    atMaximum: count('max'),
    stopped: count('stopped'),
    imprecise: store.plans.imprecise(m.id, MAX_IMPRECISE_SHOWN),
  };
}
