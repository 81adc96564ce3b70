/**
 * How many runs each cell gets on each target under `repetitions: auto`. A matrix starts with
 * `minRepetitions` runs of every cell queued and its expected runs at the most it could make
 * (`maxRepetitions` each), so it cannot be done early. Once every queued run of a cell has been
 * stored, the cell is judged on its stored values (stats/precision.ts, the same rule `fsbench run`
 * follows): one more run is queued, or the cell stops, and the runs it will not make are taken
 * off the matrix's expected runs. Matrices with a fixed count have no plans.
 *
 * The plans live in the coordinator's database (`cell_plans`, owned here), so a restart finds
 * what was queued; a cell whose runs were all stored while the coordinator was down is judged
 * then (`judgeAll`).
 */
import type Database from 'better-sqlite3';
import { z } from 'zod';
import { adaptiveRepetitions, maxRepetitions, type Cell, type Matrix } from '../contract/matrix.js';
import { precisionVerdict, relativeHalfWidth } from '../stats/precision.js';
import type { StoredRun, TargetInfo } from './store/index.js';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS cell_plans (
  matrix_id TEXT NOT NULL REFERENCES matrices (id) ON DELETE CASCADE, cell_id TEXT NOT NULL, target TEXT NOT NULL,
  planned INTEGER NOT NULL,
  verdict TEXT CHECK (verdict IN ('reached', 'max', 'stopped')),
  half_width REAL,
  PRIMARY KEY (matrix_id, cell_id, target)
) WITHOUT ROWID;
`;

/** `reached`: precise enough; `max`: stopped at maxRepetitions without; `stopped`: a run failed or was skipped. */
export const PLAN_VERDICTS = ['reached', 'max', 'stopped'] as const;

/** A run to queue because its cell is not precise enough yet. */
export interface NextRun {
  readonly matrixId: string;
  readonly cellId: string;
  readonly target: string;
  readonly repetition: number;
}

/** Where a matrix's cells stand (GET /v1/matrices/:id). */
export interface PrecisionSummary {
  readonly metric: string;
  readonly target: number;
  readonly minRepetitions: number;
  readonly maxRepetitions: number;
  readonly measuring: number;
  readonly reached: number;
  readonly atMaximum: number;
  readonly stopped: number;
  /** Cells that stopped at the maximum without the precision (the first 100). */
  readonly imprecise: readonly { readonly cellId: string; readonly target: string; readonly runs: number; readonly halfWidth: number | null }[];
}

const Counts = z.object({ stored: z.number().int(), notOk: z.number().int().nullable() });
const Plan = z.object({ planned: z.number().int(), verdict: z.enum(PLAN_VERDICTS).nullable() });

export class CellPlans {
  constructor(
    private readonly db: Database.Database,
    /** A matrix's spec, or undefined for an unknown or unreadable one. */
    private readonly specOf: (matrixId: string) => Matrix | undefined,
    /** Marks a matrix done once it has stored its expected runs (the store's own rule). */
    private readonly finishIfComplete: (matrixId: string, now: number) => void,
  ) {
    db.exec(SCHEMA);
  }

  /** Plans for a new matrix under `repetitions: auto`; nothing for a fixed count. */
  create(matrixId: string, spec: Matrix, cells: readonly Cell[], targets: readonly TargetInfo[]): void {
    const a = adaptiveRepetitions(spec);
    if (!a) return;
    const insert = this.db.prepare('INSERT OR IGNORE INTO cell_plans (matrix_id, cell_id, target, planned) VALUES (?, ?, ?, ?)');
    this.db.transaction(() => {
      for (const t of targets) for (const c of cells) insert.run(matrixId, c.id, t.target, a.min);
    })();
  }

  /**
   * Runs queued so far per `cellId.target`, for a matrix under `auto` (requeue, cancel, give up);
   * undefined for a fixed count, where every cell has `repetitions`.
   */
  planned(matrixId: string): Map<string, number> | undefined {
    const spec = this.specOf(matrixId);
    if (!spec || spec.repetitions !== 'auto') return undefined;
    const rows = this.db
      .prepare<[string], { cell_id: string; target: string; planned: number }>('SELECT cell_id, target, planned FROM cell_plans WHERE matrix_id = ?')
      .all(matrixId);
    return new Map(rows.map((r) => [`${r.cell_id}.${r.target}`, r.planned]));
  }

  /** How many runs of this cell on this target were issued: a report past it was not. */
  issued(matrixId: string, cellId: string, target: string): number | undefined {
    const spec = this.specOf(matrixId);
    if (!spec) return undefined;
    if (spec.repetitions !== 'auto') return spec.repetitions;
    return this.db
      .prepare<[string, string, string], { planned: number }>('SELECT planned FROM cell_plans WHERE matrix_id = ? AND cell_id = ? AND target = ?')
      .get(matrixId, cellId, target)?.planned;
  }

  /**
   * Judges the cells these stored runs belong to; returns the runs to queue next and the
   * matrices whose expected runs changed (and which may now be done).
   */
  afterStored(runs: readonly StoredRun[]): { next: NextRun[]; changed: Set<string> } {
    const touched = new Map<string, { matrixId: string; cellId: string; target: string }>();
    for (const r of runs) {
      const cellId = r.kind === 'result' ? r.result.cellId : r.cell.id;
      touched.set(`${r.matrixId} ${cellId} ${r.target}`, { matrixId: r.matrixId, cellId, target: r.target });
    }
    return this.judge([...touched.values()]);
  }

  /** Judges every cell still measuring: after a restart, runs stored while nobody judged them. */
  judgeAll(): { next: NextRun[]; changed: Set<string> } {
    const rows = this.db
      .prepare<[], { matrix_id: string; cell_id: string; target: string }>(
        `SELECT p.matrix_id, p.cell_id, p.target FROM cell_plans p JOIN matrices m ON m.id = p.matrix_id
         WHERE p.verdict IS NULL AND m.state IN ('queued', 'running')`,
      )
      .all();
    return this.judge(rows.map((r) => ({ matrixId: r.matrix_id, cellId: r.cell_id, target: r.target })));
  }

  private judge(cells: readonly { matrixId: string; cellId: string; target: string }[]): { next: NextRun[]; changed: Set<string> } {
    const next: NextRun[] = [];
    const changed = new Set<string>();
    const plan = this.db.prepare<[string, string, string]>('SELECT planned, verdict FROM cell_plans WHERE matrix_id = ? AND cell_id = ? AND target = ?');
    const counts = this.db.prepare<[string, string, string]>(
      "SELECT COUNT(*) AS stored, SUM(state != 'ok') AS notOk FROM runs WHERE matrix_id = ? AND cell_id = ? AND target = ?",
    );
    const values = this.db.prepare<[string, string, string, string], { v: unknown }>(
      "SELECT json_extract(metrics, ?) AS v FROM runs WHERE matrix_id = ? AND cell_id = ? AND target = ? AND state = 'ok'",
    );
    const more = this.db.prepare('UPDATE cell_plans SET planned = planned + 1 WHERE matrix_id = ? AND cell_id = ? AND target = ?');
    const settle = this.db.prepare('UPDATE cell_plans SET verdict = ?, half_width = ? WHERE matrix_id = ? AND cell_id = ? AND target = ?');
    const expectFewer = this.db.prepare('UPDATE matrices SET expected_runs = expected_runs - ? WHERE id = ?');
    // Once per matrix, not per cell: a batch of a fixed-count matrix touches hundreds of cells.
    const specs = new Map<string, Matrix | undefined>();
    const specOf = (id: string) => {
      if (!specs.has(id)) specs.set(id, this.specOf(id));
      return specs.get(id);
    };
    this.db.transaction(() => {
      for (const c of cells) {
        const spec = specOf(c.matrixId);
        const a = spec ? adaptiveRepetitions(spec) : null;
        if (!spec || !a) continue;
        const p = Plan.safeParse(plan.get(c.matrixId, c.cellId, c.target));
        if (!p.success || p.data.verdict !== null) continue;
        const n = Counts.parse(counts.get(c.matrixId, c.cellId, c.target));
        // Runs of this cell are still on their way: judge it on all of them.
        if (n.stored < p.data.planned) continue;
        const got = values.all(`$.${a.metric}`, c.matrixId, c.cellId, c.target).flatMap((r) => (typeof r.v === 'number' && Number.isFinite(r.v) ? [r.v] : []));
        const verdict = (n.notOk ?? 0) > 0 ? 'stopped' : precisionVerdict(got, a);
        if (verdict === 'more' && p.data.planned < a.max) {
          more.run(c.matrixId, c.cellId, c.target);
          next.push({ matrixId: c.matrixId, cellId: c.cellId, target: c.target, repetition: p.data.planned });
          continue;
        }
        settle.run(verdict === 'more' ? 'max' : verdict, relativeHalfWidth(got), c.matrixId, c.cellId, c.target);
        expectFewer.run(maxRepetitions(spec) - p.data.planned, c.matrixId);
        this.finishIfComplete(c.matrixId, Date.now());
        changed.add(c.matrixId);
      }
    })();
    return { next, changed };
  }

  /** Where the cells of a matrix under `auto` stand; null for a fixed count. */
  summary(matrixId: string): PrecisionSummary | null {
    const spec = this.specOf(matrixId);
    const a = spec ? adaptiveRepetitions(spec) : null;
    if (!a) return null;
    const rows = this.db
      .prepare<[string], { verdict: string | null; n: number }>('SELECT verdict, COUNT(*) AS n FROM cell_plans WHERE matrix_id = ? GROUP BY verdict')
      .all(matrixId);
    const count = (v: string | null) => rows.find((r) => r.verdict === v)?.n ?? 0;
    const imprecise = this.db
      .prepare<[string], { cell_id: string; target: string; planned: number; half_width: number | null }>(
        "SELECT cell_id, target, planned, half_width FROM cell_plans WHERE matrix_id = ? AND verdict = 'max' LIMIT 100",
      )
      .all(matrixId)
      .map((r) => ({ cellId: r.cell_id, target: r.target, runs: r.planned, halfWidth: r.half_width }));
    return {
      metric: a.metric,
      target: a.target,
      minRepetitions: a.min,
      maxRepetitions: a.max,
      measuring: count(null),
      reached: count('reached'),
      atMaximum: count('max'),
      stopped: count('stopped'),
      imprecise,
    };
  }
}
