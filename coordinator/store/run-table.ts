/**
 * The `runs` table with the fingerprints its rows name and the stream cursors stored with them:
 * every completed run, stored exactly once under PRIMARY KEY (matrix, cell, target, repetition),
 * and read back as pages, as rows to aggregate, and as progress. `target` is the host a run was
 * placed on (`all`, `{labels}`), or `any`: a retried `any` run that lands on another machine is
 * still the same run.
 */
import type Database from 'better-sqlite3';
import { fingerprintHash, keepFingerprint, MachineFingerprint } from '../../contract/fingerprint.js';
import { FINISH_IF_COMPLETE } from './matrix-rows.js';
import { preparedOnce } from './schema.js';
import {
  aggregatedRows, runKey, toRow, type AggregatedRow, type AggregatedRowValues, type PositionedRunRow, type RunPosition, type RunRow, type StoredRun,
} from './run-rows.js';

export class RunTable {
  private readonly fingerprintHashes = new Map<string, string>();

  constructor(private readonly db: Database.Database) {}

  /**
   * Content-addressed: a fingerprint is stored once however many runs carry it. The hash of a
   * JSON text is remembered (bounded), so the runs of one agent cost one hash between them.
   */
  private hashOf(f: MachineFingerprint): string {
    const json = JSON.stringify(f);
    let hash = this.fingerprintHashes.get(json);
    if (hash === undefined) {
      hash = fingerprintHash(json);
      this.writes().putFingerprint.run(hash, json);
      keepFingerprint(this.fingerprintHashes, json, hash);
    }
    return hash;
  }

  /** Stores fingerprints under their hashes (see fingerprintHash), each once, in one transaction. */
  putFingerprints(fingerprints: readonly { readonly hash: string; readonly json: string }[]): void {
    if (fingerprints.length === 0) return;
    const put = this.writes().putFingerprint;
    this.db.transaction(() => {
      for (const f of fingerprints) put.run(f.hash, f.json);
    })();
  }

  /** Prepared once: the collector stores a batch many times a second. */
  private readonly writes = preparedOnce(() => ({
    putFingerprint: this.db.prepare('INSERT OR IGNORE INTO fingerprints (hash, json) VALUES (?, ?)'),
    insert: this.db.prepare(
      `INSERT OR IGNORE INTO runs (matrix_id, cell_id, target, repetition, machine, host_id, state, params, started_at, finished_at,
         metrics, error_code, error_message, reason, details, fingerprint_hash, attempts, stored_at, histograms, interference, signed_by)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    placeholder: this.db.prepare<[string, string, string, number], { state: RunRow['state'] }>(
      'SELECT state FROM runs WHERE matrix_id = ? AND cell_id = ? AND target = ? AND repetition = ? AND signed_by IS NULL',
    ),
    unplace: this.db.prepare('DELETE FROM runs WHERE matrix_id = ? AND cell_id = ? AND target = ? AND repetition = ? AND signed_by IS NULL'),
    uncount: this.db.prepare(
      'UPDATE matrices SET stored_runs = stored_runs - 1, ok_runs = ok_runs - ?, failed_runs = failed_runs - ?, skipped_runs = skipped_runs - ? WHERE id = ?',
    ),
    count: this.db.prepare(
      `UPDATE matrices SET stored_runs = stored_runs + ?, ok_runs = ok_runs + ?, failed_runs = failed_runs + ?,
         skipped_runs = skipped_runs + ?, started_at = COALESCE(started_at, ?),
         state = CASE WHEN state = 'queued' THEN 'running' ELSE state END
       WHERE id = ?`,
    ),
    finish: this.db.prepare(FINISH_IF_COMPLETE),
    known: this.db.prepare<[string], { id: string }>('SELECT id FROM matrices WHERE id = ?'),
    cursor: this.db.prepare('INSERT INTO stream_cursors (stream, last_id) VALUES (?, ?) ON CONFLICT (stream) DO UPDATE SET last_id = excluded.last_id'),
  }));

  /**
   * Stores runs in one transaction, ignoring any already stored, with the counters and state of
   * their matrices and, when given, how far each Redis stream they came from has been read: a
   * crash either keeps both or neither. Returns the ids of the matrices that changed.
   */
  storeRuns(runs: readonly StoredRun[], cursors: ReadonlyMap<string, string> = new Map()): Set<string> {
    const { insert, count, finish, known, cursor, placeholder, unplace, uncount } = this.writes();
    const counts = new Map<string, { ok: number; failed: number; skipped: number }>();
    this.db.transaction(() => {
      const now = Date.now();
      for (const run of runs) {
        let c = counts.get(run.matrixId);
        if (c === undefined) {
          if (!known.get(run.matrixId)) continue;
          c = { ok: 0, failed: 0, skipped: 0 };
          counts.set(run.matrixId, c);
        }
        const row = toRow(run, now, (f) => this.hashOf(f));
        if (insert.run(...row).changes === 1) {
          c[row[6]]++;
          continue;
        }
        // A run the coordinator recorded itself (given up) yields to the signed report of it, so
        // nothing written to Redis can keep the real result out by being stored first.
        if (run.kind !== 'result' || run.signedBy === undefined) continue;
        const key = [row[0], row[1], row[2], row[3]] as const;
        const old = placeholder.get(...key);
        if (old === undefined) continue;
        unplace.run(...key);
        uncount.run(old.state === 'ok' ? 1 : 0, old.state === 'failed' ? 1 : 0, old.state === 'skipped' ? 1 : 0, run.matrixId);
        if (insert.run(...row).changes === 1) c[row[6]]++;
      }
      for (const [id, c] of counts) {
        const stored = c.ok + c.failed + c.skipped;
        if (stored === 0) {
          counts.delete(id);
          continue;
        }
        count.run(stored, c.ok, c.failed, c.skipped, now, id);
        finish.run(now, id);
      }
      for (const [stream, lastId] of cursors) cursor.run(stream, lastId);
    })();
    return new Set(counts.keys());
  }

  /** How far each Redis stream has been read and stored (stream key -> last entry id). */
  streamCursors(): Map<string, string> {
    const rows = this.db.prepare<[], { stream: string; last_id: string }>('SELECT stream, last_id FROM stream_cursors').all();
    return new Map(rows.map((r) => [r.stream, r.last_id]));
  }

  /** The runKey of every stored run of a matrix, to skip when queueing it again. */
  storedRunKeys(matrixId: string): Set<string> {
    const rows = this.db.prepare<[string], { cell_id: string; target: string; repetition: number }>('SELECT cell_id, target, repetition FROM runs WHERE matrix_id = ?').all(matrixId);
    return new Set(rows.map((r) => runKey(r.cell_id, r.target, r.repetition)));
  }

  /** Runs of a matrix, in cell order, for export; iterated so memory stays flat. */
  iterateRuns(matrixId: string): IterableIterator<RunRow> {
    return this.db
      .prepare<[string], RunRow>(
        `SELECT r.* FROM runs r JOIN cells c ON c.matrix_id = r.matrix_id AND c.cell_id = r.cell_id
         WHERE r.matrix_id = ? ORDER BY c.position, r.machine, r.repetition`,
      )
      .iterate(matrixId);
  }

  /**
   * Runs of a matrix grouped by cell and machine, with only what aggregation reads: a report of a
   * million runs leaves their timestamps, limits and info on disk, and walks the runs_by_machine
   * index rather than sorting by cell position (the report orders its cells by cellPositions).
   * `details` comes only for rows stored before histograms had their own column, which kept them there.
   */
  iterateRunsToAggregate(matrixId: string, histograms = true): IterableIterator<AggregatedRow> {
    // Without histograms (compare, history), neither their column nor the details that held them
    // in older databases is read: on a matrix of 10,000 cells they are most of a row's bytes.
    const columns = histograms ? "histograms, CASE WHEN histograms IS NULL AND state = 'ok' THEN details END AS details" : 'NULL AS histograms, NULL AS details';
    // Rows as arrays, made into objects here: better-sqlite3 builds a named row property by
    // property, which took a third of the time of reading 100,000 rows; a literal has one shape.
    const rows = this.db
      .prepare<[string], AggregatedRowValues>(
        `SELECT cell_id, machine, state, params, metrics, error_code, error_message, reason, fingerprint_hash,
           interference, ${columns}
         FROM runs WHERE matrix_id = ? ORDER BY cell_id, machine`,
      )
      .raw(true)
      .iterate(matrixId);
    return aggregatedRows(rows);
  }

  /** Counts per machine and state, for progress. */
  progressByMachine(matrixId: string): { machine: string; target: string; state: RunRow['state']; n: number }[] {
    return this.db
      .prepare<[string], { machine: string; target: string; state: RunRow['state']; n: number }>(
        'SELECT machine, target, state, COUNT(*) AS n FROM runs WHERE matrix_id = ? GROUP BY machine, target, state ORDER BY machine',
      )
      .all(matrixId);
  }

  failures(matrixId: string, limit: number): RunRow[] {
    return this.db
      .prepare<[string, number], RunRow>("SELECT * FROM runs WHERE matrix_id = ? AND state = 'failed' ORDER BY stored_at LIMIT ?")
      .all(matrixId, limit);
  }

  /** One stored fingerprint by its hash, parsed; null when the hash is unknown. */
  fingerprintByHash(hash: string): MachineFingerprint | null {
    const row = this.db.prepare<[string], { json: string }>('SELECT json FROM fingerprints WHERE hash = ?').get(hash);
    return row === undefined ? null : MachineFingerprint.parse(JSON.parse(row.json));
  }

  /** Prepared once: a large download reads thousands of pages. */
  private readonly pages = preparedOnce(() => ({
    cellsFrom: this.db.prepare<[string, number, number], { cell_id: string; position: number }>(
      'SELECT cell_id, position FROM cells WHERE matrix_id = ? AND position >= ? ORDER BY position LIMIT ?',
    ),
    runsOf: this.db.prepare<[string, string, number], RunRow>('SELECT * FROM runs WHERE matrix_id = ? AND cell_id = ? ORDER BY machine, target, repetition LIMIT ?'),
    runsAfter: this.db.prepare<[string, string, string, string, number, number], RunRow>(
      `SELECT * FROM runs WHERE matrix_id = ? AND cell_id = ? AND (machine, target, repetition) > (?, ?, ?)
       ORDER BY machine, target, repetition LIMIT ?`,
    ),
  }));

  /**
   * Up to `limit` runs of a matrix after `after`, in (cell position, machine, target, repetition)
   * order: iterateRuns' order, with `target` breaking ties between hosts of one machine name.
   * Read with all(), never an open iterator, so a caller may wait between pages while the
   * collector writes (better-sqlite3 refuses writes while an iterator is open). Cells are walked
   * by position and each cell's runs read by the primary key, so a page costs its own rows plus
   * one pass over the matrix's cells, wherever it starts.
   */
  runsPage(matrixId: string, after: RunPosition | null, limit: number): PositionedRunRow[] {
    const { cellsFrom, runsOf, runsAfter } = this.pages();
    const out: PositionedRunRow[] = [];
    let from = after?.position ?? 0;
    while (out.length < limit) {
      const cells = cellsFrom.all(matrixId, from, limit);
      for (const c of cells) {
        const left = limit - out.length;
        if (left === 0) break;
        const rows = after !== null && c.position === after.position
          ? runsAfter.all(matrixId, c.cell_id, after.machine, after.target, after.repetition, left)
          : runsOf.all(matrixId, c.cell_id, left);
        for (const row of rows) out.push({ ...row, position: c.position });
      }
      const last = cells.at(-1);
      if (last === undefined || cells.length < limit) break;
      from = last.position + 1;
    }
    return out;
  }
}
