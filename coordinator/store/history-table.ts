/**
 * The history tables: `history_series` (one metric of one cell on one machine across the matrices
 * of one name), `history_series_points` (a finished matrix's median and interval in a series) and
 * `history_summarised` (the matrices summarised already). What a point holds and how series are
 * judged, history/ decides; this module only reads and writes.
 */
import type Database from 'better-sqlite3';

export interface PointRow {
  matrix_id: string;
  at: string;
  n: number;
  median: number;
  ci_low: number | null;
  ci_high: number | null;
  flagged: number;
  fingerprint_hash: string | null;
}

export interface SeriesRow {
  id: number;
  machine: string;
  metric: string;
  cell_key: string;
  workload: string;
  params: string;
}

/** One point of a finished matrix in the series it belongs to, which is made when new. */
export interface NewPoint {
  readonly machine: string;
  readonly metric: string;
  readonly cellKey: string;
  readonly workload: string;
  /** JSON of the cell's parameters. */
  readonly params: string;
  readonly at: string;
  readonly n: number;
  readonly median: number;
  readonly ciLow: number | null;
  readonly ciHigh: number | null;
  readonly flagged: number;
  readonly fingerprintHash: string | null;
}

export class HistoryTable {
  constructor(private readonly db: Database.Database) {}

  /** The finished matrices of `name` not summarised yet. */
  unsummarised(name: string): { id: string; created_at: number; workload: string }[] {
    return this.db
      .prepare<[string], { id: string; created_at: number; workload: string }>(
        `SELECT id, created_at, workload FROM matrices m WHERE name = ? AND state = 'done'
           AND NOT EXISTS (SELECT 1 FROM history_summarised s WHERE s.matrix_id = m.id)`,
      )
      .all(name);
  }

  /** Per machine of a matrix: its first run's start and a fingerprint hash its runs carry. */
  firstStarts(matrixId: string): { at: string | null; hash: string | null; machine: string }[] {
    return this.db
      .prepare<[string], { at: string | null; hash: string | null; machine: string }>(
        'SELECT min(started_at) AS at, max(fingerprint_hash) AS hash, machine FROM runs WHERE matrix_id = ? GROUP BY machine',
      )
      .all(matrixId);
  }

  /** A matrix's points of series `name`, and the matrix marked summarised, in one transaction. */
  summarised(name: string, matrixId: string, points: readonly NewPoint[]): void {
    const seriesId = this.db.prepare<[{ name: string; machine: string; metric: string; cell_key: string; workload: string; params: string }], { id: number }>(
      `INSERT INTO history_series (name, machine, metric, cell_key, workload, params) VALUES (@name, @machine, @metric, @cell_key, @workload, @params)
       ON CONFLICT (name, machine, metric, cell_key) DO UPDATE SET params = excluded.params RETURNING id`,
    );
    const insert = this.db.prepare(
      `INSERT OR REPLACE INTO history_series_points (series_id, matrix_id, at, n, median, ci_low, ci_high, flagged, fingerprint_hash)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    const done = this.db.prepare('INSERT OR IGNORE INTO history_summarised (matrix_id) VALUES (?)');
    this.db.transaction(() => {
      for (const p of points) {
        const row = seriesId.get({ name, machine: p.machine, metric: p.metric, cell_key: p.cellKey, workload: p.workload, params: p.params });
        if (row) insert.run(row.id, matrixId, p.at, p.n, p.median, p.ciLow, p.ciHigh, p.flagged, p.fingerprintHash);
      }
      done.run(matrixId);
    })();
  }

  /** The newest matrix with a point in a series of `name`, by the point's time. */
  latest(name: string): string | undefined {
    return this.db
      .prepare<[string], { matrix_id: string }>(
        `SELECT p.matrix_id FROM history_series_points p JOIN history_series s ON s.id = p.series_id
         WHERE s.name = ? ORDER BY p.at DESC, p.matrix_id DESC LIMIT 1`,
      )
      .get(name)?.matrix_id;
  }

  /** The series of `name`, optionally of one machine and one metric, in key order. */
  series(name: string, machine?: string, metric?: string): SeriesRow[] {
    return this.db
      .prepare<[{ name: string; machine: string | null; metric: string | null }], SeriesRow>(
        `SELECT id, machine, metric, cell_key, workload, params FROM history_series
         WHERE name = @name AND (@machine IS NULL OR machine = @machine) AND (@metric IS NULL OR metric = @metric)
         ORDER BY machine, metric, cell_key`,
      )
      .all({ name, machine: machine ?? null, metric: metric ?? null });
  }

  /** Reads the points of one series at a time, in time order, leaving out matrix `except` when given. */
  pointReader(except?: string): (seriesId: number) => PointRow[] {
    const points = this.db.prepare<[number, string], PointRow>(
      'SELECT matrix_id, at, n, median, ci_low, ci_high, flagged, fingerprint_hash FROM history_series_points WHERE series_id = ? AND matrix_id <> ? ORDER BY at, matrix_id',
    );
    // A matrix id is never empty: '' leaves none out.
    return (seriesId) => points.all(seriesId, except ?? '');
  }

  /** Reads the annotations of one matrix at a time (JSON, or null): a small read, not the whole matrix. */
  annotationReader(): (matrixId: string) => string | null {
    const row = this.db.prepare<[string], { a: string | null }>("SELECT json_extract(spec, '$.annotations') AS a FROM matrices WHERE id = ?");
    return (matrixId) => row.get(matrixId)?.a ?? null;
  }
}
