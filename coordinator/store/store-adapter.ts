/**
 * The coordinator's SQLite store seen as reports need it: a matrix's runs as a stream of
 * aggregatable runs (what every report and compare reads), and a sink that stores uploaded
 * `.jsonl` runs exactly once. Only the store's public methods are used; nothing here writes SQL.
 */
import { createHash } from 'node:crypto';
import type { MachineFingerprint } from '../../contract/fingerprint.js';
import type { Cell, Matrix } from '../../contract/matrix.js';
import type { Histogram, RunResult } from '../../contract/result.js';
import type { WorkloadName } from '../../contract/workloads/index.js';
import { interferenceOfRow } from './run-rows.js';
import type { AggregatedRow } from './run-rows.js';
import type { Store } from './store.js';
import type { AggregatableRun, MachineFacts } from '../../stats/aggregate.js';

export interface MatrixRuns {
  readonly id: string;
  readonly name: string;
  readonly workload: WorkloadName;
  /** How many runs are stored (what `runs` yields, give or take runs stored meanwhile), known before reading them. */
  readonly stored: number;
  /** Grouped by (cell, machine), as the store's index returns them (not in cell order: see cellOrder). */
  readonly runs: Iterable<AggregatableRun>;
  /** Each cell's position in the matrix, for the report to order its cells by. */
  readonly cellOrder: ReadonlyMap<string, number>;
  /** A machine's fingerprint as its last run carried it; known once `runs` has been read. */
  readonly fingerprintOf: (machine: string) => MachineFingerprint | null;
}

/**
 * Where compare reads a matrix's runs from; undefined when there is no such matrix. With
 * `histograms: false` the runs come without their latency histograms (compare and history read none).
 */
export type RunSource = (matrixId: string, o?: { readonly histograms?: boolean }) => MatrixRuns | undefined;

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

/**
 * A run's latency histograms: their own column, or for rows stored before it existed, the
 * details. Checked by RunResult when stored, like the metrics.
 */
function histogramsOf(row: AggregatedRow): Record<string, Histogram> | undefined {
  if (row.histograms !== null) return JSON.parse(row.histograms) as Record<string, Histogram>;
  if (row.details === null || !row.details.includes('"histograms":{"')) return undefined;
  return (JSON.parse(row.details) as { histograms?: Record<string, Histogram> }).histograms;
}

/** A stored run's interference, for the report's notes; nothing for runs stored without. */
function interferenceField(row: AggregatedRow): Pick<AggregatableRun, 'interference'> {
  const interference = interferenceOfRow(row.interference);
  return interference ? { interference } : {};
}

/** A stored row as an aggregatable run, without re-validating the metrics the store validated on the way in. */
export function rowToRun(row: AggregatedRow, matrix: string, workload: WorkloadName, fingerprint: MachineFacts, params: AggregatableRun['params']): AggregatableRun {
  if (row.state === 'ok') {
    const histograms = histogramsOf(row);
    // Checked by RunResult when stored; parsing a million rows again with the schema would cost
    // more than the aggregation itself.
    const metrics = (parseJson(row.metrics) ?? {}) as Record<string, number | null>;
    // Most runs carry neither histograms (compare reads none) nor interference: one literal
    // then, rather than spreading two empty objects into each of 100,000 runs.
    if (histograms === undefined && row.interference === null) return { matrix, cellId: row.cell_id, workload, params, fingerprint, state: 'ok', metrics };
    return {
      matrix, cellId: row.cell_id, workload, params, fingerprint, state: 'ok', metrics,
      ...(histograms ? { histograms } : {}),
      ...interferenceField(row),
    };
  }
  if (row.state === 'failed') {
    return { matrix, cellId: row.cell_id, workload, params, fingerprint, state: 'failed', error: { code: row.error_code ?? 'INTERNAL', message: row.error_message ?? '' } };
  }
  return { matrix, cellId: row.cell_id, workload, params, fingerprint, state: 'skipped', reason: row.reason ?? '' };
}

interface StoredFingerprint {
  readonly facts: MachineFacts;
  /** The whole fingerprint; null where this version cannot read it (an older fsbench's). */
  readonly fingerprint: MachineFingerprint | null;
}

/** Stored fingerprints by machine and hash, each read and parsed once. */
function fingerprintLookup(store: Store): (machine: string, hash: string | null) => StoredFingerprint {
  const cache = new Map<string, StoredFingerprint>();
  return (machine, hash) => {
    const key = `${machine}\u0000${hash ?? ''}`;
    let found = cache.get(key);
    if (found === undefined) {
      let fingerprint: MachineFingerprint | null = null;
      try {
        fingerprint = hash === null ? null : store.fingerprintByHash(hash);
      } catch {
        // Stored by a version whose fingerprint this one does not read: the machine keeps its name.
      }
      const cpu = fingerprint?.cpu;
      found = { facts: { machine, cpu: { l1dBytes: cpu?.l1dBytes ?? null, l2Bytes: cpu?.l2Bytes ?? null, l3Bytes: cpu?.l3Bytes ?? null } }, fingerprint };
      cache.set(key, found);
    }
    return found;
  };
}

export function storeRunSource(store: Store): RunSource {
  return (id, o = {}) => {
    const m = store.getMatrix(id);
    if (!m) return undefined;
    const workload = m.spec.workload;
    // Each machine's fingerprint as its last run carried it, known once the runs have been read.
    const latest = new Map<string, MachineFingerprint | null>();
    function* runs(): Generator<AggregatableRun> {
      // Rows come cell by cell: parse a cell's parameters once, and share one facts object per
      // machine and fingerprint, rather than allocating both for every run.
      const lookup = fingerprintLookup(store);
      let lastParams = '';
      let params: AggregatableRun['params'] = {};
      for (const row of store.iterateRunsToAggregate(id, o.histograms !== false)) {
        if (row.params !== lastParams) {
          lastParams = row.params;
          // Checked by RunResult (or the matrix, for a run given up) when stored, like the
          // metrics: the schema again cost 10-25 us a cell, a tenth of a compare of 20,000 cells.
          params = JSON.parse(row.params) as AggregatableRun['params'];
        }
        const stored = lookup(row.machine, row.fingerprint_hash);
        if (stored.fingerprint) latest.set(row.machine, stored.fingerprint);
        yield rowToRun(row, id, workload, stored.facts, params);
      }
    }
    return { id, name: m.name, workload, stored: m.storedRuns, runs: runs(), cellOrder: store.cellPositions(id), fingerprintOf: (machine) => latest.get(machine) ?? null };
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
          // Every run of a matrix carries the same annotations; the first's stand for the matrix.
          const annotations = group.find((r) => r.annotations !== undefined)?.annotations;
          const spec: Matrix = {
            name: first.matrix,
            description: `uploaded from ${first.fingerprint.machine}`,
            ...(annotations === undefined ? {} : { annotations }),
            workload: first.workload,
            repetitions,
            order: 'interleaved',
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
