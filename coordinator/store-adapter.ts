/**
 * The coordinator's SQLite store seen as compare needs it: a matrix's runs as a stream of
 * aggregatable runs, and a sink that stores uploaded `.jsonl` runs exactly once. Only the
 * store's public methods are used; nothing here writes SQL.
 */
import { createHash } from 'node:crypto';
import { CellParams, type Cell, type Matrix } from '../contract/matrix.js';
import type { RunResult } from '../contract/result.js';
import type { WorkloadName } from '../contract/workloads/index.js';
import type { Store, RunRow } from './store.js';
import type { AggregatableRun } from '../stats/aggregate.js';

export interface MatrixRuns {
  readonly id: string;
  readonly name: string;
  readonly workload: WorkloadName;
  /** Grouped by (cell, machine), as the store's index returns them. */
  readonly runs: Iterable<AggregatableRun>;
}

/** Where compare reads a matrix's runs from; undefined when there is no such matrix. */
export type RunSource = (matrixId: string) => MatrixRuns | undefined;

export interface ImportedMatrix {
  readonly id: string;
  readonly name: string;
  readonly machine: string;
  readonly stored: number;
  readonly duplicates: number;
}

/** Stores validated runs; a run stored before is counted as a duplicate and left as it was. */
export interface ResultSink {
  importRuns(runs: readonly RunResult[]): { readonly matrices: readonly ImportedMatrix[]; readonly stored: number; readonly duplicates: number };
}

const parseJson = (text: string | null): unknown => (text === null ? null : JSON.parse(text));

type Fingerprint = AggregatableRun['fingerprint'];

/** A stored row as an aggregatable run, without re-validating what the store validated on the way in. */
export function rowToRun(row: RunRow, matrix: string, workload: WorkloadName, fingerprint: Fingerprint, params: AggregatableRun['params']): AggregatableRun {
  if (row.state === 'ok') {
    return { matrix, cellId: row.cell_id, workload, params, fingerprint, state: 'ok', metrics: (parseJson(row.metrics) ?? {}) as Record<string, number | null> };
  }
  if (row.state === 'failed') {
    return { matrix, cellId: row.cell_id, workload, params, fingerprint, state: 'failed', error: { code: row.error_code ?? 'INTERNAL', message: row.error_message ?? '' } };
  }
  return { matrix, cellId: row.cell_id, workload, params, fingerprint, state: 'skipped', reason: row.reason ?? '' };
}

/** The L3 size of a stored fingerprint, by its hash, read once per hash. */
function l3Lookup(store: Store): (hash: string | null) => number | null {
  const cache = new Map<string, number | null>();
  return (hash) => {
    if (hash === null) return null;
    let l3 = cache.get(hash);
    if (l3 === undefined) {
      l3 = store.fingerprintByHash(hash)?.cpu.l3Bytes ?? null;
      cache.set(hash, l3);
    }
    return l3;
  };
}

export function storeRunSource(store: Store): RunSource {
  const l3Of = l3Lookup(store);
  return (id) => {
    const m = store.getMatrix(id);
    if (!m) return undefined;
    const workload = m.spec.workload;
    function* runs(): Generator<AggregatableRun> {
      // Rows come cell by cell: parse a cell's parameters once, and share one fingerprint
      // object per machine, rather than allocating both for every run.
      let lastParams = '';
      let params: AggregatableRun['params'] = {};
      const fingerprints = new Map<string, Fingerprint>();
      for (const row of store.iterateRuns(id)) {
        if (row.params !== lastParams) {
          lastParams = row.params;
          params = CellParams.parse(JSON.parse(row.params));
        }
        const key = `${row.machine}\u0000${row.fingerprint_hash ?? ''}`;
        let fingerprint = fingerprints.get(key);
        if (!fingerprint) {
          fingerprint = { machine: row.machine, cpu: { l3Bytes: l3Of(row.fingerprint_hash) } };
          fingerprints.set(key, fingerprint);
        }
        yield rowToRun(row, id, workload, fingerprint, params);
      }
    }
    return { id, name: m.name, workload, runs: runs() };
  };
}

/** The target uploaded runs are stored under: they were placed by nobody. */
export const UPLOAD_TARGET = 'upload';

/**
 * Uploaded runs become one matrix per (machine, matrix name, workload, first start time): the id
 * is a hash of those, so uploading the same file again lands on the same matrix and the store's
 * primary key (matrix, cell, target, repetition) keeps every run exactly once.
 */
export function uploadMatrixId(machine: string, matrix: string, workload: string, firstStartedAt: string): string {
  return `up${createHash('sha256').update(JSON.stringify([machine, matrix, workload, firstStartedAt])).digest('hex').slice(0, 14)}`;
}

export function storeResultSink(store: Store): ResultSink {
  return {
    importRuns(runs) {
      const groups = new Map<string, RunResult[]>();
      for (const r of runs) {
        const key = JSON.stringify([r.fingerprint.machine, r.matrix, r.workload]);
        const list = groups.get(key);
        if (list) list.push(r);
        else groups.set(key, [r]);
      }
      const matrices: ImportedMatrix[] = [];
      for (const group of groups.values()) {
        const first = group[0];
        if (!first) continue;
        const firstStartedAt = group.reduce((min, r) => (r.startedAt < min ? r.startedAt : min), first.startedAt);
        const id = uploadMatrixId(first.fingerprint.machine, first.matrix, first.workload, firstStartedAt);
        if (!store.getMatrix(id)) {
          const cells = new Map<string, Cell>();
          for (const r of group) if (!cells.has(r.cellId)) cells.set(r.cellId, { id: r.cellId, workload: r.workload, params: r.params });
          const repetitions = Math.min(1000, Math.max(1, ...group.map((r) => r.repetition + 1)));
          const spec: Matrix = {
            name: first.matrix,
            description: `uploaded from ${first.fingerprint.machine}`,
            workload: first.workload,
            repetitions,
            warmup: 0,
            params: {},
            include: [],
            exclude: [],
            placement: 'any',
          };
          store.createMatrix({
            id,
            spec,
            targets: [{ target: UPLOAD_TARGET, machine: first.fingerprint.machine }],
            cells: [...cells.values()],
            expectedRuns: new Set(group.map((r) => `${r.cellId}.${r.repetition}`)).size,
            estimatedMs: 0,
          });
          // Nothing to dispatch: without this the coordinator's recovery would enqueue its runs.
          store.markEnqueued(id);
        }
        const before = store.storedRunKeys(id).size;
        store.storeRuns(group.map((result) => ({ kind: 'result' as const, matrixId: id, target: UPLOAD_TARGET, result, attempts: 1 })));
        const stored = store.storedRunKeys(id).size - before;
        matrices.push({ id, name: first.matrix, machine: first.fingerprint.machine, stored, duplicates: group.length - stored });
      }
      return {
        matrices,
        stored: matrices.reduce((n, m) => n + m.stored, 0),
        duplicates: matrices.reduce((n, m) => n + m.duplicates, 0),
      };
    },
  };
}
