/**
 * The `cell_plans` table: how many runs each cell has been given on each target under
 * `repetitions: auto`, and the verdict once it stopped, with the reads of its stored runs a
 * judgement takes. What the verdict is, and when a cell gets one more run, matrices/plans.ts
 * decides; this module only reads and writes. Matrices with a fixed count have no plans.
 */
import type Database from 'better-sqlite3';
import { cellTargetKey } from './run-rows.js';
import { FINISH_IF_COMPLETE } from './matrix-rows.js';
import { preparedOnce } from './schema.js';

/** `reached`: precise enough; `max`: stopped at maxRepetitions without; `stopped`: a run failed or was skipped. */
export const PLAN_VERDICTS = ['reached', 'max', 'stopped'] as const;
export type PlanVerdict = (typeof PLAN_VERDICTS)[number];

/** A cell on a target of a matrix: what one plan is kept for. */
export interface PlanCell {
  readonly matrixId: string;
  readonly cellId: string;
  readonly target: string;
}

/** Runs given so far per cellTargetKey(cell, target). */
export type Planned = ReadonlyMap<string, number>;

type Key = [matrixId: string, cellId: string, target: string];
const key = (c: PlanCell): Key => [c.matrixId, c.cellId, c.target];

export class PlanTable {
  constructor(private readonly db: Database.Database) {}

  /** Prepared once: a batch of stored runs judges each of its cells. */
  private readonly s = preparedOnce(() => ({
    insert: this.db.prepare<[string, string, string, number]>('INSERT OR IGNORE INTO cell_plans (matrix_id, cell_id, target, planned) VALUES (?, ?, ?, ?)'),
    plan: this.db.prepare<Key, { planned: number; verdict: PlanVerdict | null }>('SELECT planned, verdict FROM cell_plans WHERE matrix_id = ? AND cell_id = ? AND target = ?'),
    counts: this.db.prepare<Key, { stored: number; notOk: number | null }>(
      "SELECT COUNT(*) AS stored, SUM(state != 'ok') AS notOk FROM runs WHERE matrix_id = ? AND cell_id = ? AND target = ?",
    ),
    values: this.db.prepare<[string, ...Key], { v: unknown }>(
      "SELECT json_extract(metrics, ?) AS v FROM runs WHERE matrix_id = ? AND cell_id = ? AND target = ? AND state = 'ok'",
    ),
    more: this.db.prepare<Key>('UPDATE cell_plans SET planned = planned + 1 WHERE matrix_id = ? AND cell_id = ? AND target = ?'),
    settle: this.db.prepare<[PlanVerdict, number | null, ...Key]>('UPDATE cell_plans SET verdict = ?, half_width = ? WHERE matrix_id = ? AND cell_id = ? AND target = ?'),
    expectFewer: this.db.prepare<[number, string]>('UPDATE matrices SET expected_runs = expected_runs - ? WHERE id = ?'),
    finish: this.db.prepare<[number, string]>(FINISH_IF_COMPLETE),
  }));

  /** `planned` runs for each of the cells on each of the targets; returns the plans as written. */
  create(matrixId: string, cellIds: readonly string[], targets: readonly string[], planned: number): Planned {
    const { insert } = this.s();
    const plans = new Map<string, number>();
    this.db.transaction(() => {
      for (const t of targets) {
        for (const c of cellIds) {
          insert.run(matrixId, c, t, planned);
          plans.set(cellTargetKey(c, t), planned);
        }
      }
    })();
    return plans;
  }

  /** Every plan of a matrix; empty for a matrix with a fixed count. */
  planned(matrixId: string): Planned {
    const rows = this.db
      .prepare<[string], { cell_id: string; target: string; planned: number }>('SELECT cell_id, target, planned FROM cell_plans WHERE matrix_id = ?')
      .all(matrixId);
    return new Map(rows.map((r) => [cellTargetKey(r.cell_id, r.target), r.planned]));
  }

  /** The runs a cell has been given on a target; undefined without a plan. */
  plannedOf(c: PlanCell): number | undefined {
    return this.s().plan.get(...key(c))?.planned;
  }

  /** The cells still measuring in unfinished matrices: after a restart, runs may have been stored while nobody judged them. */
  measuring(): PlanCell[] {
    return this.db
      .prepare<[], { matrix_id: string; cell_id: string; target: string }>(
        `SELECT p.matrix_id, p.cell_id, p.target FROM cell_plans p JOIN matrices m ON m.id = p.matrix_id
         WHERE p.verdict IS NULL AND m.state IN ('queued', 'running')`,
      )
      .all()
      .map((r) => ({ matrixId: r.matrix_id, cellId: r.cell_id, target: r.target }));
  }

  /** A cell's plan: the runs given so far, and its verdict once it stopped; undefined without a plan. */
  plan(c: PlanCell): { planned: number; verdict: PlanVerdict | null } | undefined {
    return this.s().plan.get(...key(c));
  }

  /** How many runs of the cell are stored, and how many of them are not ok. */
  stored(c: PlanCell): { stored: number; notOk: number } {
    const counts = this.s().counts.get(...key(c));
    return { stored: counts?.stored ?? 0, notOk: counts?.notOk ?? 0 };
  }

  /** The values of `metric` in the cell's ok runs, as stored (anything a metric column holds). */
  values(c: PlanCell, metric: string): unknown[] {
    return this.s().values.all(`$.${metric}`, ...key(c)).map((r) => r.v);
  }

  /** One more run for the cell. */
  more(c: PlanCell): void {
    this.s().more.run(...key(c));
  }

  /**
   * The cell stops with `verdict`: the `fewer` runs it will not make come off its matrix's
   * expected runs, and the matrix is done when it has stored all that are left.
   */
  settle(c: PlanCell, verdict: PlanVerdict, halfWidth: number | null, fewer: number): void {
    const { settle, expectFewer, finish } = this.s();
    settle.run(verdict, halfWidth, ...key(c));
    expectFewer.run(fewer, c.matrixId);
    finish.run(Date.now(), c.matrixId);
  }

  /** Runs `work` in one transaction: a judgement reads and writes its cells all or nothing. */
  transaction<T>(work: () => T): T {
    return this.db.transaction(work)();
  }

  /** How many of a matrix's plans have each verdict (null: still measuring). */
  verdictCounts(matrixId: string): { verdict: PlanVerdict | null; n: number }[] {
    return this.db
      .prepare<[string], { verdict: PlanVerdict | null; n: number }>('SELECT verdict, COUNT(*) AS n FROM cell_plans WHERE matrix_id = ? GROUP BY verdict')
      .all(matrixId);
  }

  /** Cells that stopped at the maximum without the precision, the first `limit` of them. */
  imprecise(matrixId: string, limit: number): { cellId: string; target: string; runs: number; halfWidth: number | null }[] {
    return this.db
      .prepare<[string, number], { cell_id: string; target: string; planned: number; half_width: number | null }>(
        "SELECT cell_id, target, planned, half_width FROM cell_plans WHERE matrix_id = ? AND verdict = 'max' LIMIT ?",
      )
      .all(matrixId, limit)
      .map((r) => ({ cellId: r.cell_id, target: r.target, runs: r.planned, halfWidth: r.half_width }));
  }
}
