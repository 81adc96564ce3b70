/**
 * The store: the coordinator's SQLite database. Every other module reaches it through this face:
 * Store itself, matrices' runs read as reports read them (the adapters), and backups.
 */
export { backupDatabase, restoreDatabase, type DatabaseSummary } from './backup.js';
export { interferenceOfRow, TargetInfo, type RunRow, type StoredRun } from './run-rows.js';
export {
  DATABASE_FILE, MATRIX_STATES, Store, type AggregatedRow, type MatrixRecord, type MatrixState, type MatrixTotals, type NewMatrix, type PositionedRunRow, type RunPosition,
} from './store.js';
export { storeResultSink, storeRunSource, type ImportedMatrix, type MatrixRuns, type ResultSink, type RunSource } from './store-adapter.js';
