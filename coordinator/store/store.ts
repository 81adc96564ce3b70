/**
 * The coordinator's database (better-sqlite3): matrices, their cells, and every completed run,
 * stored exactly once under PRIMARY KEY (matrix, cell, target, repetition). `target` is the host
 * a run was placed on (`all`, `{labels}`), or `any`: a retried `any` run that lands on another
 * machine is still the same run. This module owns the matrices, cells, runs, fingerprints and
 * stream cursors; two others own a table each on the same database and write only there:
 * plans.ts (how many runs a cell under `repetitions: auto` gets) and enrollment.ts (agent keys
 * and enrollment tokens).
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { z } from 'zod';
import { CellParams, Matrix, Placement, type Cell } from '../../contract/matrix.js';
import { fingerprintHash, keepFingerprint, MachineFingerprint } from '../../contract/fingerprint.js';
import { CellPlans } from '../plans.js';
import { TargetInfo, toRow, type RunRow, type StoredRun } from './run-rows.js';

export type { RunRow, StoredRun } from './run-rows.js';

/** What aggregation reads of a stored run (iterateRunsToAggregate). */
export type AggregatedRow = Pick<RunRow, 'cell_id' | 'machine' | 'state' | 'params' | 'metrics' | 'error_code' | 'error_message' | 'reason' | 'fingerprint_hash' | 'histograms' | 'details' | 'interference'>;

export const MATRIX_STATES = ['queued', 'running', 'done', 'cancelled'] as const;
export type MatrixState = (typeof MATRIX_STATES)[number];

/** A matrix's targets (run-rows.ts), re-exported for the modules that read matrices. */
export { TargetInfo };

export interface MatrixRecord {
  readonly id: string;
  readonly name: string;
  readonly workload: string;
  readonly spec: Matrix;
  readonly placement: Placement;
  readonly targets: readonly TargetInfo[];
  readonly cellCount: number;
  readonly expectedRuns: number;
  readonly estimatedMs: number;
  readonly state: MatrixState;
  readonly enqueued: boolean;
  readonly storedRuns: number;
  readonly okRuns: number;
  readonly failedRuns: number;
  readonly skippedRuns: number;
  readonly createdAt: number;
  readonly startedAt: number | null;
  readonly finishedAt: number | null;
}

interface MatrixRow {
  id: string;
  name: string;
  workload: string;
  spec: string;
  placement: string;
  targets: string;
  cell_count: number;
  expected_runs: number;
  estimated_ms: number;
  state: MatrixState;
  enqueued: number;
  stored_runs: number;
  ok_runs: number;
  failed_runs: number;
  skipped_runs: number;
  created_at: number;
  started_at: number | null;
  finished_at: number | null;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS matrices (
  id TEXT PRIMARY KEY, name TEXT NOT NULL, workload TEXT NOT NULL, spec TEXT NOT NULL,
  placement TEXT NOT NULL, targets TEXT NOT NULL, cell_count INTEGER NOT NULL,
  expected_runs INTEGER NOT NULL, estimated_ms INTEGER NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'cancelled')),
  enqueued INTEGER NOT NULL DEFAULT 0,
  stored_runs INTEGER NOT NULL DEFAULT 0, ok_runs INTEGER NOT NULL DEFAULT 0,
  failed_runs INTEGER NOT NULL DEFAULT 0, skipped_runs INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL, started_at INTEGER, finished_at INTEGER
);
CREATE INDEX IF NOT EXISTS matrices_by_state ON matrices (state, created_at);
CREATE TABLE IF NOT EXISTS cells (
  matrix_id TEXT NOT NULL REFERENCES matrices (id) ON DELETE CASCADE, cell_id TEXT NOT NULL,
  position INTEGER NOT NULL, params TEXT NOT NULL, PRIMARY KEY (matrix_id, cell_id)
) WITHOUT ROWID;
-- Results pages walk a matrix's cells in order from a position: without it, every chunk of a
-- download sorted all the matrix's cells (2 ms a chunk at 2,000 cells, most of a download's CPU).
CREATE INDEX IF NOT EXISTS cells_by_position ON cells (matrix_id, position);
CREATE TABLE IF NOT EXISTS fingerprints (hash TEXT PRIMARY KEY, json TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS runs (
  matrix_id TEXT NOT NULL REFERENCES matrices (id) ON DELETE CASCADE, cell_id TEXT NOT NULL,
  target TEXT NOT NULL, repetition INTEGER NOT NULL, machine TEXT NOT NULL, host_id TEXT,
  state TEXT NOT NULL CHECK (state IN ('ok', 'failed', 'skipped')), params TEXT NOT NULL,
  started_at TEXT, finished_at TEXT, metrics TEXT, error_code TEXT, error_message TEXT, reason TEXT,
  details TEXT, fingerprint_hash TEXT, attempts INTEGER NOT NULL, stored_at INTEGER NOT NULL, histograms TEXT,
  interference TEXT, signed_by TEXT,
  PRIMARY KEY (matrix_id, cell_id, target, repetition)
);
CREATE INDEX IF NOT EXISTS runs_by_machine ON runs (matrix_id, cell_id, machine);
-- A matrix's detail lists its first failures at every poll: without it, a scan of all its runs.
CREATE INDEX IF NOT EXISTS runs_failed ON runs (matrix_id, stored_at) WHERE state = 'failed';
CREATE TABLE IF NOT EXISTS stream_cursors (stream TEXT PRIMARY KEY, last_id TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS idempotency (
  key TEXT PRIMARY KEY, request_hash TEXT NOT NULL, status INTEGER NOT NULL, answer TEXT NOT NULL, created_at INTEGER NOT NULL
) WITHOUT ROWID;
`;

/** A matrix row's JSON columns, parsed and checked. */
type ParsedColumns = Pick<MatrixRecord, 'spec' | 'placement' | 'targets'>;

function parseColumns(r: MatrixRow): ParsedColumns {
  return { spec: Matrix.parse(JSON.parse(r.spec)), placement: Placement.parse(JSON.parse(r.placement)), targets: z.array(TargetInfo).parse(JSON.parse(r.targets)) };
}

function toRecord(r: MatrixRow, columns: ParsedColumns = parseColumns(r)): MatrixRecord {
  return {
    id: r.id,
    name: r.name,
    workload: r.workload,
    ...columns,
    cellCount: r.cell_count,
    expectedRuns: r.expected_runs,
    estimatedMs: r.estimated_ms,
    state: r.state,
    enqueued: r.enqueued === 1,
    storedRuns: r.stored_runs,
    okRuns: r.ok_runs,
    failedRuns: r.failed_runs,
    skippedRuns: r.skipped_runs,
    createdAt: r.created_at,
    startedAt: r.started_at,
    finishedAt: r.finished_at,
  };
}

export interface NewMatrix {
  readonly id: string;
  readonly spec: Matrix;
  readonly targets: readonly TargetInfo[];
  readonly cells: readonly Cell[];
  readonly expectedRuns: number;
  readonly estimatedMs: number;
}

/** How long activeTargets' answer is kept when no matrix was created meanwhile. */
const ACTIVE_TARGETS_MS = 10_000;

/** The database file in a data directory (FSBENCH_DATA_DIR); backups copy it (backup.ts). */
export const DATABASE_FILE = 'fsbench.db';

export class Store {
  readonly db: Database.Database;
  private readonly fingerprintHashes = new Map<string, string>();

  /** Matrices whose stored row this version cannot read, each reported once. */
  private readonly unreadable = new Set<string>();
  /**
   * activeTargets' last answer per window. A target joins it only with a new matrix (createMatrix drops the
   * answer) and leaves it only with time, so it is asked again at most every ACTIVE_TARGETS_MS:
   * the collector asks every poll, and at 1,000 hosts parsing every matrix's targets was a tenth
   * of what an idle coordinator did (bench:dispatch --profile).
   */
  private readonly active = new Map<number, { at: number; targets: ReadonlySet<string> }>();

  private constructor(
    file: string,
    /** Where a row that cannot be read is reported (once); listings skip it. */
    private readonly warn: (line: string) => void,
  ) {
    this.db = new Database(file);
    // WAL: readers (the HTTP API) never wait for the collector's writes. NORMAL survives a killed
    // process, which is the crash the coordinator must survive; power loss may lose the last commits.
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = NORMAL');
    this.db.pragma('foreign_keys = ON');
    this.db.exec(SCHEMA);
    // Databases made before histograms had a column of their own keep them in `details`.
    const columns = this.db.prepare<[], { name: string }>('SELECT name FROM pragma_table_info(\'runs\')').all();
    if (!columns.some((c) => c.name === 'histograms')) this.db.exec('ALTER TABLE runs ADD COLUMN histograms TEXT');
    // Runs stored before interference was measured keep it null.
    if (!columns.some((c) => c.name === 'interference')) this.db.exec('ALTER TABLE runs ADD COLUMN interference TEXT');
    // Runs stored before reports were signed keep it null.
    if (!columns.some((c) => c.name === 'signed_by')) this.db.exec('ALTER TABLE runs ADD COLUMN signed_by TEXT');
    this.plans = new CellPlans(this.db, (id) => this.getMatrix(id)?.spec, (id, now) => {
      this.storeStatements().finish.run(now, id);
    });
  }

  /** How many runs each cell gets under `repetitions: auto` (plans.ts owns that table). */
  readonly plans: CellPlans;

  /** Opens (creating) DATABASE_FILE in `dataDir`, or an in-memory database for `:memory:`. */
  static open(dataDir: string, warn: (line: string) => void = () => undefined): Store {
    if (dataDir === ':memory:') return new Store(':memory:', warn);
    mkdirSync(dataDir, { recursive: true });
    return new Store(path.join(dataDir, DATABASE_FILE), warn);
  }

  /**
   * A matrix row as a record, or null when it cannot be read (written by another version, or
   * edited by hand): one bad row must not take a listing down, so it is skipped and said once.
   */
  private readable(row: MatrixRow): MatrixRecord | null {
    try {
      return toRecord(row, this.parsedColumns(row));
    } catch (err) {
      if (!this.unreadable.has(row.id)) {
        this.unreadable.add(row.id);
        const why = err instanceof z.ZodError ? (err.issues[0] ? `${err.issues[0].path.join('.')}: ${err.issues[0].message}` : 'invalid') : String(err);
        this.warn(`matrix ${row.id} in the database cannot be read and is left out of listings (${why})`);
      }
      return null;
    }
  }

  /**
   * Parsed JSON columns by matrix id, reused while the row's text is unchanged (a spec never
   * changes once stored): the collector looks a matrix up for every report it stores, and
   * parsing a spec of 1,000 values with its schema again each time was a sixth of the
   * coordinator's CPU per run. Bounded, like the collector's fingerprints; callers never
   * change a record (its types are read-only), so sharing the parsed values is safe.
   */
  private readonly parsed = new Map<string, { readonly spec: string; readonly placement: string; readonly targets: string; readonly columns: ParsedColumns }>();

  private parsedColumns(row: MatrixRow): ParsedColumns {
    const hit = this.parsed.get(row.id);
    if (hit?.spec === row.spec && hit.placement === row.placement && hit.targets === row.targets) return hit.columns;
    const columns = parseColumns(row);
    if (this.parsed.size >= 256) this.parsed.clear();
    this.parsed.set(row.id, { spec: row.spec, placement: row.placement, targets: row.targets, columns });
    return columns;
  }

  private lookupStatements: ReturnType<Store['prepareLookups']> | undefined;

  /**
   * Statements of the lookups made per report collected, prepared once: better-sqlite3 compiles
   * a statement on every prepare(), which was 6% of the coordinator's CPU per run.
   */
  private lookups(): ReturnType<Store['prepareLookups']> {
    this.lookupStatements ??= this.prepareLookups();
    return this.lookupStatements;
  }

  private prepareLookups() {
    return {
      matrix: this.db.prepare<[string], MatrixRow>('SELECT * FROM matrices WHERE id = ?'),
      cell: this.db.prepare<[string, string], { params: string }>('SELECT params FROM cells WHERE matrix_id = ? AND cell_id = ?'),
    };
  }

  close(): void {
    this.db.close();
  }

  ping(): void {
    this.db.prepare('SELECT 1').get();
  }

  createMatrix(m: NewMatrix): void {
    const insertMatrix = this.db.prepare(
      `INSERT INTO matrices (id, name, workload, spec, placement, targets, cell_count, expected_runs, estimated_ms, state, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?)`,
    );
    const insertCell = this.db.prepare('INSERT INTO cells (matrix_id, cell_id, position, params) VALUES (?, ?, ?, ?)');
    this.active.clear();
    this.db.transaction(() => {
      insertMatrix.run(m.id, m.spec.name, m.spec.workload, JSON.stringify(m.spec), JSON.stringify(m.spec.placement),
        JSON.stringify(m.targets), m.cells.length, m.expectedRuns, m.estimatedMs, Date.now());
      m.cells.forEach((c, i) => insertCell.run(m.id, c.id, i, JSON.stringify(c.params)));
    })();
  }

  deleteMatrix(id: string): void {
    this.db.prepare('DELETE FROM matrices WHERE id = ?').run(id);
  }

  markEnqueued(id: string): void {
    this.db.prepare('UPDATE matrices SET enqueued = 1 WHERE id = ?').run(id);
  }

  /**
   * The matrix, or undefined when there is none or its row cannot be read (reported once): to
   * the API, the collector and a restart alike it is then a matrix that is not there, rather
   * than an error that would stop whichever of them met it first.
   */
  getMatrix(id: string): MatrixRecord | undefined {
    const row = this.lookups().matrix.get(id);
    return row ? (this.readable(row) ?? undefined) : undefined;
  }

  listMatrices(limit: number, state?: MatrixState): MatrixRecord[] {
    const rows = state
      ? this.db.prepare<[string, number], MatrixRow>('SELECT * FROM matrices WHERE state = ? ORDER BY created_at DESC LIMIT ?').all(state, limit)
      : this.db.prepare<[number], MatrixRow>('SELECT * FROM matrices ORDER BY created_at DESC LIMIT ?').all(limit);
    return rows.flatMap((r) => this.readable(r) ?? []);
  }

  /** Matrices whose jobs may not all be in Redis yet (the coordinator died while enqueueing). */
  notEnqueued(): string[] {
    return this.db.prepare<[], { id: string }>("SELECT id FROM matrices WHERE enqueued = 0 AND state IN ('queued', 'running')").all().map((r) => r.id);
  }

  /**
   * Targets whose queues may still hold results: unfinished matrices, and those finished within
   * the last `finishedWithinMs` (a finished one may stay ACTIVE_TARGETS_MS longer). The same set
   * object while the answer is unchanged.
   */
  activeTargets(finishedWithinMs: number): ReadonlySet<string> {
    const now = Date.now();
    const kept = this.active.get(finishedWithinMs);
    if (kept !== undefined && now - kept.at < ACTIVE_TARGETS_MS) return kept.targets;
    const rows = this.db
      .prepare<[number], { targets: string }>("SELECT targets FROM matrices WHERE state IN ('queued', 'running') OR finished_at >= ?")
      .all(now - finishedWithinMs);
    const targets = new Set(rows.flatMap((r) => z.array(TargetInfo).parse(JSON.parse(r.targets)).map((t) => t.target)));
    const same = kept !== undefined && kept.targets.size === targets.size && [...targets].every((t) => kept.targets.has(t));
    const answer = same ? kept.targets : targets;
    this.active.set(finishedWithinMs, { at: now, targets: answer });
    return answer;
  }

  cells(matrixId: string): Cell[] {
    const workload = this.getMatrix(matrixId)?.spec.workload;
    if (!workload) return [];
    return this.db
      .prepare<[string], { cell_id: string; params: string }>('SELECT cell_id, params FROM cells WHERE matrix_id = ? ORDER BY position')
      .all(matrixId)
      .map((r) => ({ id: r.cell_id, workload, params: CellParams.parse(JSON.parse(r.params)) }));
  }

  /** One cell of a matrix, or undefined when either is unknown. */
  cell(matrixId: string, cellId: string): Cell | undefined {
    const workload = this.getMatrix(matrixId)?.spec.workload;
    const row = this.lookups().cell.get(matrixId, cellId);
    return workload && row ? { id: cellId, workload, params: CellParams.parse(JSON.parse(row.params)) } : undefined;
  }

  /** `cellId.target.repetition` of every stored run, to skip when re-enqueueing. */
  storedRunKeys(matrixId: string): Set<string> {
    const rows = this.db
      .prepare<[string], { k: string }>("SELECT cell_id || '.' || target || '.' || repetition AS k FROM runs WHERE matrix_id = ?")
      .all(matrixId);
    return new Set(rows.map((r) => r.k));
  }

  /** Marks a queued or running matrix cancelled; false when it was already finished. */
  cancel(id: string): boolean {
    const r = this.db
      .prepare("UPDATE matrices SET state = 'cancelled', finished_at = ? WHERE id = ? AND state IN ('queued', 'running')")
      .run(Date.now(), id);
    return r.changes === 1;
  }

  /**
   * Content-addressed: a fingerprint is stored once however many runs carry it. The hash of a
   * JSON text is remembered (bounded), so the runs of one agent cost one hash between them.
   */
  private hashOf(f: MachineFingerprint): string {
    const json = JSON.stringify(f);
    let hash = this.fingerprintHashes.get(json);
    if (hash === undefined) {
      hash = fingerprintHash(json);
      this.putFingerprint(hash, json);
      keepFingerprint(this.fingerprintHashes, json, hash);
    }
    return hash;
  }

  /** Stores a fingerprint under its hash (see fingerprintHash), once. */
  putFingerprint(hash: string, json: string): void {
    this.storeStatements().putFingerprint.run(hash, json);
  }

  /** putFingerprint for many, in one transaction. */
  putFingerprints(fingerprints: readonly { readonly hash: string; readonly json: string }[]): void {
    if (fingerprints.length === 0) return;
    const put = this.storeStatements().putFingerprint;
    this.db.transaction(() => {
      for (const f of fingerprints) put.run(f.hash, f.json);
    })();
  }

  private statements: ReturnType<Store['prepareStoreStatements']> | undefined;

  /** Prepared once: the collector stores a batch many times a second. */
  private storeStatements(): ReturnType<Store['prepareStoreStatements']> {
    this.statements ??= this.prepareStoreStatements();
    return this.statements;
  }

  private prepareStoreStatements() {
    return {
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
      finish: this.db.prepare(
        "UPDATE matrices SET state = 'done', finished_at = ? WHERE id = ? AND state IN ('queued', 'running') AND stored_runs >= expected_runs",
      ),
      known: this.db.prepare<[string], { id: string }>('SELECT id FROM matrices WHERE id = ?'),
      cursor: this.db.prepare('INSERT INTO stream_cursors (stream, last_id) VALUES (?, ?) ON CONFLICT (stream) DO UPDATE SET last_id = excluded.last_id'),
    };
  }

  /**
   * Stores runs in one transaction, ignoring any already stored, with the counters and state of
   * their matrices and, when given, how far each Redis stream they came from has been read: a
   * crash either keeps both or neither. Returns the ids of the matrices that changed.
   */
  storeRuns(runs: readonly StoredRun[], cursors: ReadonlyMap<string, string> = new Map()): Set<string> {
    const { insert, count, finish, known, cursor, placeholder, unplace, uncount } = this.storeStatements();
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

  /** Each cell's position in its matrix's expansion, by cell id. */
  cellPositions(matrixId: string): Map<string, number> {
    const rows = this.db.prepare<[string], { cell_id: string; position: number }>('SELECT cell_id, position FROM cells WHERE matrix_id = ?').all(matrixId);
    return new Map(rows.map((r) => [r.cell_id, r.position]));
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
  private pageStatements:
    | {
        readonly cellsFrom: Database.Statement<[string, number, number], { cell_id: string; position: number }>;
        readonly runsOf: Database.Statement<[string, string, number], RunRow>;
        readonly runsAfter: Database.Statement<[string, string, string, string, number, number], RunRow>;
      }
    | undefined;

  /**
   * Up to `limit` runs of a matrix after `after`, in (cell position, machine, target, repetition)
   * order: iterateRuns' order, with `target` breaking ties between hosts of one machine name.
   * Read with all(), never an open iterator, so a caller may wait between pages while the
   * collector writes (better-sqlite3 refuses writes while an iterator is open). Cells are walked
   * by position and each cell's runs read by the primary key, so a page costs its own rows plus
   * one pass over the matrix's cells, wherever it starts.
   */
  runsPage(matrixId: string, after: RunPosition | null, limit: number): PositionedRunRow[] {
    this.pageStatements ??= {
      cellsFrom: this.db.prepare<[string, number, number], { cell_id: string; position: number }>(
        'SELECT cell_id, position FROM cells WHERE matrix_id = ? AND position >= ? ORDER BY position LIMIT ?',
      ),
      runsOf: this.db.prepare<[string, string, number], RunRow>(
        'SELECT * FROM runs WHERE matrix_id = ? AND cell_id = ? ORDER BY machine, target, repetition LIMIT ?',
      ),
      runsAfter: this.db.prepare<[string, string, string, string, number, number], RunRow>(
        `SELECT * FROM runs WHERE matrix_id = ? AND cell_id = ? AND (machine, target, repetition) > (?, ?, ?)
         ORDER BY machine, target, repetition LIMIT ?`,
      ),
    };
    const { cellsFrom, runsOf, runsAfter } = this.pageStatements;
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

  /**
   * Matrices and their stored runs per state, summed by SQLite from the counters each matrix row
   * keeps: what /metrics reports, at a cost that does not parse any matrix.
   */
  matrixTotals(): MatrixTotals[] {
    return this.db
      .prepare<[], MatrixTotals>(
        `SELECT state, COUNT(*) AS matrices, COALESCE(SUM(ok_runs), 0) AS ok, COALESCE(SUM(failed_runs), 0) AS failed,
           COALESCE(SUM(skipped_runs), 0) AS skipped FROM matrices GROUP BY state`,
      )
      .all();
  }

  /** The first answer to a request sent with `key`, while it is kept (see rememberAnswer). */
  answerFor(key: string): { requestHash: string; status: number; answer: string } | undefined {
    const row = this.db
      .prepare<[string], { request_hash: string; status: number; answer: string }>('SELECT request_hash, status, answer FROM idempotency WHERE key = ?')
      .get(key);
    return row ? { requestHash: row.request_hash, status: row.status, answer: row.answer } : undefined;
  }

  /** Keeps the answer to a request sent with an Idempotency-Key for `keepMs`, forgetting older ones. */
  rememberAnswer(key: string, requestHash: string, status: number, answer: string, keepMs: number): void {
    const now = Date.now();
    this.db.transaction(() => {
      this.db.prepare('DELETE FROM idempotency WHERE created_at < ?').run(now - keepMs);
      this.db.prepare('INSERT OR IGNORE INTO idempotency (key, request_hash, status, answer, created_at) VALUES (?, ?, ?, ?, ?)').run(key, requestHash, status, answer, now);
    })();
  }
}

/** iterateRunsToAggregate's columns, in its SELECT's order. */
type AggregatedRowValues = [
  cell_id: string, machine: string, state: RunRow['state'], params: string, metrics: string | null, error_code: string | null,
  error_message: string | null, reason: string | null, fingerprint_hash: string | null, interference: string | null,
  histograms: string | null, details: string | null,
];

function* aggregatedRows(rows: IterableIterator<AggregatedRowValues>): Generator<AggregatedRow, undefined, undefined> {
  for (const [cell_id, machine, state, params, metrics, error_code, error_message, reason, fingerprint_hash, interference, histograms, details] of rows) {
    yield { cell_id, machine, state, params, metrics, error_code, error_message, reason, fingerprint_hash, interference, histograms, details };
  }
}

/** Where a run sits in runsPage's order; a page continues after the last run of the one before. */
export interface RunPosition {
  readonly position: number;
  readonly machine: string;
  readonly target: string;
  readonly repetition: number;
}

export type PositionedRunRow = RunRow & { readonly position: number };

export interface MatrixTotals {
  readonly state: MatrixState;
  readonly matrices: number;
  readonly ok: number;
  readonly failed: number;
  readonly skipped: number;
}
