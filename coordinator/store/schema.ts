/**
 * Every table, index and migration of the coordinator's database, in one place, whichever store
 * module reads and writes the table. `openDatabase` applies them at every open, so a database an
 * older fsbench made gains what it lacks, and a backup (backup.ts) holds all of them.
 */
import { chmodSync } from 'node:fs';
import { isMainThread } from 'node:worker_threads';
import Database from 'better-sqlite3';

/** The database file in a data directory (FSBENCH_DATA_DIR); backups copy it (backup.ts). */
export const DATABASE_FILE = 'fsbench.db';

/**
 * Agent keys: pending until enrolled, enrolled with the id and expiry of the approval the
 * coordinator last signed for them, revoked for good (a revoked row is kept, so that nothing in
 * Redis enrolls its key again).
 */
const AGENT_KEYS_TABLE = (name: string) => `CREATE TABLE IF NOT EXISTS ${name} (
  key TEXT PRIMARY KEY, public_key TEXT NOT NULL, report_key TEXT NOT NULL, host_id TEXT NOT NULL, machine TEXT NOT NULL, labels TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('pending', 'enrolled', 'revoked')), via TEXT, first_seen INTEGER NOT NULL, enrolled_at INTEGER,
  approval_id TEXT, approval_expires INTEGER, revoked_at INTEGER, rotate_requested TEXT
) WITHOUT ROWID;`;

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
CREATE TABLE IF NOT EXISTS cell_plans (
  matrix_id TEXT NOT NULL REFERENCES matrices (id) ON DELETE CASCADE, cell_id TEXT NOT NULL, target TEXT NOT NULL,
  planned INTEGER NOT NULL,
  verdict TEXT CHECK (verdict IN ('reached', 'max', 'stopped')),
  half_width REAL,
  PRIMARY KEY (matrix_id, cell_id, target)
) WITHOUT ROWID;
${AGENT_KEYS_TABLE('agent_keys')}
-- Every change to who is enrolled (a token used, an approval, an approval taken in, a
-- revocation), in order: what \`fsbench agents --history\` lists. A few rows per host, never trimmed.
CREATE TABLE IF NOT EXISTS enrollment_audit (
  id INTEGER PRIMARY KEY, at INTEGER NOT NULL, actor TEXT NOT NULL, action TEXT NOT NULL,
  key TEXT NOT NULL, host_id TEXT NOT NULL, machine TEXT NOT NULL, detail TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS enrollment_tokens (
  id TEXT PRIMARY KEY, secret_hash BLOB NOT NULL, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL,
  used_by TEXT, used_at INTEGER, copy INTEGER NOT NULL DEFAULT 0,
  machine TEXT, host_id TEXT, replace_live INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS history_series (
  id INTEGER PRIMARY KEY, name TEXT NOT NULL, machine TEXT NOT NULL, metric TEXT NOT NULL, cell_key TEXT NOT NULL,
  workload TEXT NOT NULL, params TEXT NOT NULL,
  UNIQUE (name, machine, metric, cell_key)
);
CREATE TABLE IF NOT EXISTS history_series_points (
  series_id INTEGER NOT NULL REFERENCES history_series (id) ON DELETE CASCADE,
  matrix_id TEXT NOT NULL REFERENCES matrices (id) ON DELETE CASCADE,
  at TEXT NOT NULL, n INTEGER NOT NULL, median REAL NOT NULL, ci_low REAL, ci_high REAL,
  flagged INTEGER NOT NULL, fingerprint_hash TEXT,
  PRIMARY KEY (series_id, at, matrix_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS history_series_points_by_matrix ON history_series_points (matrix_id);
CREATE TABLE IF NOT EXISTS history_summarised (
  matrix_id TEXT PRIMARY KEY REFERENCES matrices (id) ON DELETE CASCADE
) WITHOUT ROWID;
-- Machines renamed by an operator (fsbench agents rename), in order: the runs moved to the new name
-- with the rename; this says where an old name went, for a history asked by it. Never trimmed.
CREATE TABLE IF NOT EXISTS machine_renames (
  id INTEGER PRIMARY KEY, at INTEGER NOT NULL, old TEXT NOT NULL, new TEXT NOT NULL, key TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS machine_renames_by_old ON machine_renames (old, id);
`;

/**
 * The jobs the coordinator signed, by run and signature digest (issued-table.ts), and the matrices
 * whose jobs were signed before it recorded them. Made apart from SCHEMA: when the table is new,
 * every matrix already in the database is one of those (migrateJobBinding).
 */
const ISSUED_JOBS = `
CREATE TABLE IF NOT EXISTS issued_jobs (
  matrix_id TEXT NOT NULL REFERENCES matrices (id) ON DELETE CASCADE, cell_id TEXT NOT NULL, target TEXT NOT NULL,
  repetition INTEGER NOT NULL, digest TEXT NOT NULL,
  PRIMARY KEY (matrix_id, cell_id, target, repetition, digest)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS unbound_matrices (matrix_id TEXT PRIMARY KEY REFERENCES matrices (id) ON DELETE CASCADE) WITHOUT ROWID;
`;

/** Columns `runs` gained after it was first released: rows stored before keep them null. */
const ADDED_RUN_COLUMNS = [
  // Databases made before histograms had a column of their own keep them in `details`.
  'histograms',
  // Runs stored before interference was measured.
  'interference',
  // Runs stored before reports were signed.
  'signed_by',
] as const;

/**
 * Statements prepared on first use and kept: better-sqlite3 compiles a statement on every
 * prepare(), which for those run per report collected was 6% of the coordinator's CPU per run.
 */
export function preparedOnce<T>(prepare: () => T): () => T {
  let statements: T | undefined;
  return () => (statements ??= prepare());
}

/**
 * Runs `make` with the umask 077: a file it creates is 0600 from its first byte (the database,
 * its WAL, a backup), never readable by others for a moment before a chmod. Synchronous, so no
 * other code of this process runs under that umask.
 */
export function privately<T>(make: () => T): T {
  // A worker thread (the report and read threads) may not set the umask, and needs none: it
  // opens the database the main thread made, whose files (the WAL's too) are there already.
  if (!isMainThread) return make();
  const before = process.umask(0o077);
  try {
    return make();
  } finally {
    process.umask(before);
  }
}

/** Opens (creating) the database at `file`, or one in memory for `:memory:`, with every table. */
export function openDatabase(file: string): Database.Database {
  // It holds enrolled keys, token hashes and every result: its owner's only, WAL included.
  const db = privately(() => {
    const opened = new Database(file);
    // WAL: readers (the HTTP API) never wait for the collector's writes. NORMAL survives a killed
    // process, which is the crash the coordinator must survive; power loss may lose the last commits.
    opened.pragma('journal_mode = WAL');
    return opened;
  });
  if (file !== ':memory:') chmodSync(file, 0o600);
  db.pragma('synchronous = NORMAL');
  db.pragma('foreign_keys = ON');
  db.exec(SCHEMA);
  const columns = new Set(db.prepare<[], { name: string }>("SELECT name FROM pragma_table_info('runs')").all().map((c) => c.name));
  for (const column of ADDED_RUN_COLUMNS) if (!columns.has(column)) db.exec(`ALTER TABLE runs ADD COLUMN ${column} TEXT`);
  migrateAgentKeys(db);
  migrateJobBinding(db);
  // Added after their tables were first released: a rotation asked for, and what a token is bound to.
  addMissingColumns(db, 'agent_keys', { rotate_requested: 'TEXT' });
  addMissingColumns(db, 'enrollment_tokens', { machine: 'TEXT', host_id: 'TEXT', replace_live: 'INTEGER NOT NULL DEFAULT 0' });
  // Pending keys are counted per host at each new announcement (key-table.ts recordPending).
  db.exec("CREATE INDEX IF NOT EXISTS agent_keys_by_host ON agent_keys (host_id, state)");
  return db;
}

function addMissingColumns(db: Database.Database, table: 'agent_keys' | 'enrollment_tokens', columns: Readonly<Record<string, string>>): void {
  const have = new Set(db.prepare<[string], { name: string }>('SELECT name FROM pragma_table_info(?)').all(table).map((c) => c.name));
  for (const [name, declaration] of Object.entries(columns)) if (!have.has(name)) db.exec(`ALTER TABLE ${table} ADD COLUMN ${name} ${declaration}`);
}

/**
 * Databases made before jobs were recorded: the matrices they hold have jobs in flight whose
 * signatures nobody recorded, listed as unbound in the same transaction that makes the tables.
 */
function migrateJobBinding(db: Database.Database): void {
  if (db.prepare("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'issued_jobs'").get() !== undefined) return;
  db.transaction(() => {
    db.exec(ISSUED_JOBS);
    db.exec('INSERT INTO unbound_matrices (matrix_id) SELECT id FROM matrices');
  })();
}

/**
 * Databases made before keys could be revoked: their agent_keys table's CHECK allows no
 * 'revoked' and it lacks the approval's columns. SQLite cannot change a CHECK in place, so the
 * table is copied into its new form, in one transaction; enrolled keys get their approval's id
 * and expiry at the coordinator's next start, when it signs their approvals again.
 */
function migrateAgentKeys(db: Database.Database): void {
  const sql = db.prepare<[], { sql: string }>("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'agent_keys'").get()?.sql ?? '';
  if (sql.includes("'revoked'")) return;
  db.transaction(() => {
    db.exec(AGENT_KEYS_TABLE('agent_keys_new'));
    db.exec(
      `INSERT INTO agent_keys_new (key, public_key, report_key, host_id, machine, labels, state, via, first_seen, enrolled_at)
       SELECT key, public_key, report_key, host_id, machine, labels, state, via, first_seen, enrolled_at FROM agent_keys`,
    );
    db.exec('DROP TABLE agent_keys');
    db.exec('ALTER TABLE agent_keys_new RENAME TO agent_keys');
  })();
}
