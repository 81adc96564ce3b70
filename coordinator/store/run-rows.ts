/**
 * How a run becomes a row of the `runs` table (run-table.ts) and back: the agent's RunResult, or
 * a failure the coordinator records for a job that gave up; the columns aggregation reads; where a
 * run sits in a page; the keys a run and a cell's plan are known by. Pure conversion, no SQL.
 */
import { z } from 'zod';
import type { ErrorCode } from '../../contract/errors.js';
import type { MachineFingerprint } from '../../contract/fingerprint.js';
import type { Cell } from '../../contract/matrix.js';
import { Interference } from '../../contract/interference.js';
import type { RunResult } from '../../contract/result.js';
import type { RunInterference } from '../../stats/aggregate.js';

/** A matrix's target: a host (boot id) or `any`, and the machine name it had when placed. */
export const TargetInfo = z.object({ target: z.string(), machine: z.string().nullable() }).strict();
export type TargetInfo = z.infer<typeof TargetInfo>;

/** A cell on a target: what a plan counts the runs of (EnqueueRequest.planned, PlanTable). */
export function cellTargetKey(cellId: string, target: string): string {
  return `${cellId}.${target}`;
}

/** One run of a cell on a target: what storedRunKeys holds, so that queueing again skips it. */
export function runKey(cellId: string, target: string, repetition: number): string {
  return `${cellTargetKey(cellId, target)}.${repetition}`;
}

export type StoredRun =
  | {
      readonly kind: 'result';
      readonly matrixId: string;
      readonly target: string;
      readonly result: RunResult;
      readonly attempts: number;
      /** The result's fingerprint's hash when it is known already (and its fingerprint stored). */
      readonly fingerprintHash?: string;
      /** The enrolled agent key whose signature the report carried; absent for uploads. */
      readonly signedBy?: string;
    }
  | {
      readonly kind: 'gave-up';
      /** ABANDONED for a run nobody finished; INTERNAL for a report the coordinator could not store. */
      readonly code: ErrorCode;
      readonly matrixId: string;
      readonly target: string;
      readonly cell: Cell;
      readonly repetition: number;
      readonly machine: string;
      readonly message: string;
      readonly attempts: number;
    };

export interface RunRow {
  matrix_id: string;
  cell_id: string;
  target: string;
  repetition: number;
  machine: string;
  host_id: string | null;
  state: 'ok' | 'failed' | 'skipped';
  params: string;
  started_at: string | null;
  finished_at: string | null;
  metrics: string | null;
  error_code: string | null;
  error_message: string | null;
  reason: string | null;
  /** JSON: limits and info, which are shown but never aggregated (and, in rows stored before 0.2, histograms). */
  details: string | null;
  fingerprint_hash: string | null;
  attempts: number;
  stored_at: number;
  /** JSON: the latency histograms, apart from the details so that aggregation parses only them. */
  histograms: string | null;
  /** JSON: the run's interference (contract/interference.ts), apart so that aggregation reads it without the details; null before it was measured. */
  interference: string | null;
  /** The agent key that signed the report; null for what the coordinator recorded itself (a run given up) and for uploads. */
  signed_by: string | null;
}

/** The values of an INSERT into `runs`, in the order of its columns. */
export type RowValues = [
  matrixId: string,
  cellId: string,
  target: string,
  repetition: number,
  machine: string,
  hostId: string | null,
  state: RunRow['state'],
  params: string,
  startedAt: string | null,
  finishedAt: string | null,
  metrics: string | null,
  errorCode: string | null,
  errorMessage: string | null,
  reason: string | null,
  details: string | null,
  fingerprintHash: string | null,
  attempts: number,
  storedAt: number,
  histograms: string | null,
  interference: string | null,
  signedBy: string | null,
];

/** What aggregation reads of the stored column; loose, so a newer version's extra fields do not hide it. */
const StoredInterference = Interference.pick({ stealFraction: true, outsideCpuFraction: true, flagged: true }).loose();

/** A row's interference as aggregation reads it; undefined for runs stored without (or with one this version cannot read). */
export function interferenceOfRow(text: string | null): RunInterference | undefined {
  if (text === null) return undefined;
  const r = StoredInterference.safeParse(JSON.parse(text));
  return r.success ? r.data : undefined;
}

export function toRow(run: StoredRun, now: number, fingerprintHash: (f: MachineFingerprint) => string): RowValues {
  if (run.kind === 'gave-up') {
    return [run.matrixId, run.cell.id, run.target, run.repetition, run.machine, null, 'failed', JSON.stringify(run.cell.params),
      null, null, null, run.code, run.message, null, null, null, run.attempts, now, null, null, null];
  }
  const r = run.result;
  const fp = run.fingerprintHash ?? fingerprintHash(r.fingerprint);
  const interference = r.interference ? JSON.stringify(r.interference) : null;
  const signedBy = run.signedBy ?? null;
  const common = [run.matrixId, r.cellId, run.target, r.repetition, r.fingerprint.machine, r.fingerprint.bootId, r.state,
    JSON.stringify(r.params), r.startedAt, r.finishedAt] as const;
  switch (r.state) {
    case 'ok':
      return [...common, JSON.stringify(r.metrics), null, null, null, JSON.stringify({ limits: r.limits, info: r.info }), fp, run.attempts, now,
        Object.keys(r.histograms).length > 0 ? JSON.stringify(r.histograms) : null, interference, signedBy];
    case 'failed':
      return [...common, null, r.error.code, r.error.message, null, JSON.stringify({ limits: r.limits }), fp, run.attempts, now, null, interference, signedBy];
    case 'skipped':
      return [...common, null, null, null, r.reason, null, fp, run.attempts, now, null, null, signedBy];
  }
}

/** What aggregation reads of a stored run (iterateRunsToAggregate). */
export type AggregatedRow = Pick<RunRow, 'cell_id' | 'machine' | 'state' | 'params' | 'metrics' | 'error_code' | 'error_message' | 'reason' | 'fingerprint_hash' | 'histograms' | 'details' | 'interference'>;

/** iterateRunsToAggregate's columns, in its SELECT's order. */
export type AggregatedRowValues = [
  cell_id: string, machine: string, state: RunRow['state'], params: string, metrics: string | null, error_code: string | null,
  error_message: string | null, reason: string | null, fingerprint_hash: string | null, interference: string | null,
  histograms: string | null, details: string | null,
];

export function* aggregatedRows(rows: IterableIterator<AggregatedRowValues>): Generator<AggregatedRow, undefined, undefined> {
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
