/**
 * The store: the coordinator's SQLite database, the only place that holds SQL. Every other
 * module reaches its tables through Store (and the table each of its members stands for), reads
 * matrices' runs as reports do through the adapters, and copies the database through backup.
 */
export { backupDatabase, restoreDatabase, type DatabaseSummary } from './backup.js';
export type { AgentKeyRow, AnnouncedKey, ApprovalRecord, AuditAction, AuditRow, EnrolledVia, TokenBinding } from './key-table.js';
export type { NewPoint, SeriesRow } from './history-table.js';
export type { IssuedJob } from './issued-table.js';
export type { MachineRename } from './machine-renames.js';
export { MATRIX_STATES, type MatrixRecord, type MatrixState, type MatrixTotals, type NewMatrix } from './matrix-rows.js';
export type { PlanCell, Planned } from './plan-table.js';
export {
  cellTargetKey, runKey, TargetInfo, type AggregatedRow, type PositionedRunRow, type RunPosition, type RunRow, type StoredRun,
} from './run-rows.js';
export { Store } from './store.js';
export { storeResultSink, storeRunSource, type ImportedMatrix, type MatrixRuns, type ResultSink, type RunSource } from './store-adapter.js';
