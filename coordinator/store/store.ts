/**
 * The coordinator's database (better-sqlite3), the only place its SQL lives: matrices and their
 * cells here, and a table module for each other part of the record, which the rest of the
 * coordinator reaches through this class: the runs (run-table.ts), the plans of cells under
 * `repetitions: auto` (plan-table.ts), the agent keys and enrollment tokens (key-table.ts) and
 * the summarised history (history-table.ts) and the jobs issued (issued-table.ts). Every table is
 * made by schema.ts.
 */
import { chmodSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import type Database from 'better-sqlite3';
import { z } from 'zod';
import { adaptiveRepetitions, CellParams, type Cell } from '../../contract/matrix.js';
import type { MachineFingerprint } from '../../contract/fingerprint.js';
import { HistoryTable } from './history-table.js';
import { IssuedJobTable } from './issued-table.js';
import { AgentKeyTable } from './key-table.js';
import { MachineRenameTable } from './machine-renames.js';
import { parseColumns, parseTargets, toRecord, type MatrixRecord, type MatrixRow, type MatrixState, type MatrixTotals, type NewMatrix, type ParsedColumns } from './matrix-rows.js';
import { PlanTable, type Planned } from './plan-table.js';
import type { AggregatedRow, PositionedRunRow, RunPosition, RunRow, StoredRun } from './run-rows.js';
import { RunTable } from './run-table.js';
import { DATABASE_FILE, openDatabase, preparedOnce } from './schema.js';

/** How long activeTargets' answer is kept when no matrix was created meanwhile. */
const ACTIVE_TARGETS_MS = 10_000;

export class Store {
  readonly db: Database.Database;
  /** How many runs each cell gets under `repetitions: auto` (matrices/plans.ts judges). */
  readonly plans: PlanTable;
  /** Agent keys and enrollment tokens (enrollment/). */
  readonly agentKeys: AgentKeyTable;
  /** The history's series and points (history/). */
  readonly history: HistoryTable;
  /** The jobs signed, by run and signature digest: recorded by dispatch (matrices/), asked by the collector (ingest/). */
  readonly issued: IssuedJobTable;
  /** Machine renames: a key's new name with its runs, and where an old name went (enrollment/, history/). */
  readonly renames: MachineRenameTable;
  private readonly runs: RunTable;

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
    this.db = openDatabase(file);
    this.runs = new RunTable(this.db);
    this.plans = new PlanTable(this.db);
    this.agentKeys = new AgentKeyTable(this.db);
    this.history = new HistoryTable(this.db);
    this.issued = new IssuedJobTable(this.db);
    this.renames = new MachineRenameTable(this.db, this.agentKeys);
  }

  /** Opens (creating) DATABASE_FILE in `dataDir`, or an in-memory database for `:memory:`. */
  static open(dataDir: string, warn: (line: string) => void = () => undefined): Store {
    if (dataDir === ':memory:') return new Store(':memory:', warn);
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    // A data directory an older fsbench made with the umask's mode: its owner's only from now on.
    chmodSync(dataDir, 0o700);
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

  /** The lookups made per report collected. */
  private readonly lookups = preparedOnce(() => ({
    matrix: this.db.prepare<[string], MatrixRow>('SELECT * FROM matrices WHERE id = ?'),
    cell: this.db.prepare<[string, string], { params: string }>('SELECT params FROM cells WHERE matrix_id = ? AND cell_id = ?'),
  }));

  close(): void {
    this.db.close();
  }

  ping(): void {
    this.db.prepare('SELECT 1').get();
  }

  /**
   * Stores a new matrix with its cells and, under `repetitions: auto`, each cell's plan of
   * `minRepetitions` runs on each target, in one transaction: a matrix is never stored without
   * the plans its runs are queued by. Returns those plans; undefined for a fixed count.
   */
  createMatrix(m: NewMatrix): Planned | undefined {
    const insertMatrix = this.db.prepare(
      `INSERT INTO matrices (id, name, workload, spec, placement, targets, cell_count, expected_runs, estimated_ms, state, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?)`,
    );
    const insertCell = this.db.prepare('INSERT INTO cells (matrix_id, cell_id, position, params) VALUES (?, ?, ?, ?)');
    const adaptive = adaptiveRepetitions(m.spec);
    this.active.clear();
    return this.db.transaction(() => {
      insertMatrix.run(m.id, m.spec.name, m.spec.workload, JSON.stringify(m.spec), JSON.stringify(m.spec.placement),
        JSON.stringify(m.targets), m.cells.length, m.expectedRuns, m.estimatedMs, Date.now());
      m.cells.forEach((c, i) => insertCell.run(m.id, c.id, i, JSON.stringify(c.params)));
      if (!adaptive) return undefined;
      return this.plans.create(m.id, m.cells.map((c) => c.id), m.targets.map((t) => t.target), adaptive.min);
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
    const targets = new Set(rows.flatMap((r) => parseTargets(r.targets).map((t) => t.target)));
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

  /** Marks a queued or running matrix cancelled; false when it was already finished. */
  cancel(id: string): boolean {
    const r = this.db
      .prepare("UPDATE matrices SET state = 'cancelled', finished_at = ? WHERE id = ? AND state IN ('queued', 'running')")
      .run(Date.now(), id);
    return r.changes === 1;
  }

  /** Each cell's position in its matrix's expansion, by cell id. */
  cellPositions(matrixId: string): Map<string, number> {
    const rows = this.db.prepare<[string], { cell_id: string; position: number }>('SELECT cell_id, position FROM cells WHERE matrix_id = ?').all(matrixId);
    return new Map(rows.map((r) => [r.cell_id, r.position]));
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

  /** The database file; ':memory:' (or '') for one in memory. */
  get file(): string {
    return this.db.name;
  }

  // The runs (run-table.ts).

  storeRuns(runs: readonly StoredRun[], cursors?: ReadonlyMap<string, string>): Set<string> {
    return this.runs.storeRuns(runs, cursors);
  }

  putFingerprints(fingerprints: readonly { readonly hash: string; readonly json: string }[]): void {
    this.runs.putFingerprints(fingerprints);
  }

  streamCursors(): Map<string, string> {
    return this.runs.streamCursors();
  }

  storedRunKeys(matrixId: string): Set<string> {
    return this.runs.storedRunKeys(matrixId);
  }

  iterateRuns(matrixId: string): IterableIterator<RunRow> {
    return this.runs.iterateRuns(matrixId);
  }

  iterateRunsToAggregate(matrixId: string, histograms?: boolean): IterableIterator<AggregatedRow> {
    return this.runs.iterateRunsToAggregate(matrixId, histograms);
  }

  runsPage(matrixId: string, after: RunPosition | null, limit: number): PositionedRunRow[] {
    return this.runs.runsPage(matrixId, after, limit);
  }

  progressByMachine(matrixId: string): { machine: string; target: string; state: RunRow['state']; n: number }[] {
    return this.runs.progressByMachine(matrixId);
  }

  failures(matrixId: string, limit: number): RunRow[] {
    return this.runs.failures(matrixId, limit);
  }

  fingerprintByHash(hash: string): MachineFingerprint | null {
    return this.runs.fingerprintByHash(hash);
  }
}
