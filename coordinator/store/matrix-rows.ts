/**
 * A row of the `matrices` table and the record the rest of the coordinator reads: its JSON
 * columns parsed and checked, its counters named. Pure conversion, besides the one statement
 * that says when a matrix is done, which the run and plan tables both apply.
 */
import { z } from 'zod';
import { Matrix, Placement, type Cell } from '../../contract/matrix.js';
import { TargetInfo } from './run-rows.js';

export const MATRIX_STATES = ['queued', 'running', 'done', 'cancelled'] as const;
export type MatrixState = (typeof MATRIX_STATES)[number];

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

export interface MatrixRow {
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

export interface NewMatrix {
  readonly id: string;
  readonly spec: Matrix;
  readonly targets: readonly TargetInfo[];
  readonly cells: readonly Cell[];
  readonly expectedRuns: number;
  readonly estimatedMs: number;
}

/** Matrices and their stored runs in one state, summed over every matrix (/metrics). */
export interface MatrixTotals {
  readonly state: MatrixState;
  readonly matrices: number;
  readonly ok: number;
  readonly failed: number;
  readonly skipped: number;
}

/** A matrix row's JSON columns, parsed and checked. */
export type ParsedColumns = Pick<MatrixRecord, 'spec' | 'placement' | 'targets'>;

export function parseColumns(r: MatrixRow): ParsedColumns {
  return { spec: Matrix.parse(JSON.parse(r.spec)), placement: Placement.parse(JSON.parse(r.placement)), targets: z.array(TargetInfo).parse(JSON.parse(r.targets)) };
}

/** A matrix's targets column, alone (the targets that may still hold results). */
export function parseTargets(text: string): TargetInfo[] {
  return z.array(TargetInfo).parse(JSON.parse(text));
}

export function toRecord(r: MatrixRow, columns: ParsedColumns = parseColumns(r)): MatrixRecord {
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

/**
 * Marks a matrix done once it has stored its expected runs: after runs are stored, and after a
 * cell under `repetitions: auto` stops and takes the runs it will not make off the expected ones.
 * Parameters: finished_at, id.
 */
export const FINISH_IF_COMPLETE =
  "UPDATE matrices SET state = 'done', finished_at = ? WHERE id = ? AND state IN ('queued', 'running') AND stored_runs >= expected_runs";
