/**
 * Where a matrix stands: its answers in the API (a summary for lists, a detail view with
 * progress per machine, shaped by answers.ts), the snapshot a progress event carries, and the hub that tells whoever
 * watches a matrix that it changed.
 */
import { maxRepetitions } from '../../contract/matrix.js';
import type { MachineProgress, MatrixDetail, MatrixSummary } from './answers.js';
import { precisionSummary } from './plans.js';
import type { MatrixRecord, MatrixState, Store } from '../store/index.js';

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export function summaryOf(m: MatrixRecord): MatrixSummary {
  const self = `/v1/matrices/${m.id}`;
  return {
    id: m.id,
    name: m.name,
    // The spec's: the same name, typed as the workloads' enum.
    workload: m.spec.workload,
    state: m.state,
    placement: m.placement,
    cells: m.cellCount,
    runs: m.expectedRuns,
    createdAt: new Date(m.createdAt).toISOString(),
    startedAt: iso(m.startedAt),
    finishedAt: iso(m.finishedAt),
    progress: {
      expected: m.expectedRuns,
      stored: m.storedRuns,
      ok: m.okRuns,
      failed: m.failedRuns,
      skipped: m.skippedRuns,
      fraction: m.expectedRuns === 0 ? 1 : m.storedRuns / m.expectedRuns,
    },
    links: { self, events: `${self}/events`, results: `${self}/results` },
  };
}

const MAX_FAILURES_SHOWN = 20;

export function detailOf(store: Store, m: MatrixRecord): MatrixDetail {
  const byMachine = new Map<string, { machine: string; target: string; stored: number; ok: number; failed: number; skipped: number }>();
  for (const r of store.progressByMachine(m.id)) {
    const key = `${r.target}\u0000${r.machine}`;
    const e = byMachine.get(key) ?? { machine: r.machine, target: r.target, stored: 0, ok: 0, failed: 0, skipped: 0 };
    e.stored += r.n;
    e[r.state] += r.n;
    byMachine.set(key, e);
  }
  // Under `repetitions: auto` the most a target can store; the matrix's expected runs fall as cells stop early.
  const perTarget = m.cellCount * maxRepetitions(m.spec);
  const machines: MachineProgress[] = [...byMachine.values()].map((e) => ({ ...e, expected: e.target === 'any' ? null : perTarget }));
  // Target hosts that have not stored anything yet still belong in the picture.
  const reported = new Set(machines.map((x) => x.target));
  for (const t of m.targets) {
    if (t.target !== 'any' && !reported.has(t.target)) {
      machines.push({ machine: t.machine ?? t.target, target: t.target, expected: perTarget, stored: 0, ok: 0, failed: 0, skipped: 0 });
    }
  }
  return {
    ...summaryOf(m),
    description: m.spec.description ?? null,
    repetitions: m.spec.repetitions,
    order: m.spec.order,
    ...(m.spec.seed === undefined ? {} : { seed: m.spec.seed }),
    warmup: m.spec.warmup,
    precision: precisionSummary(store, m),
    targets: [...m.targets],
    estimatedDurationMs: m.estimatedMs,
    machines,
    failures: store.failures(m.id, MAX_FAILURES_SHOWN).map((r) => ({
      cellId: r.cell_id,
      repetition: r.repetition,
      machine: r.machine,
      code: r.error_code,
      message: r.error_message,
    })),
  };
}

export interface ProgressEvent {
  readonly id: string;
  readonly state: MatrixState;
  readonly expectedRuns: number;
  readonly storedRuns: number;
  readonly okRuns: number;
  readonly failedRuns: number;
  readonly skippedRuns: number;
  readonly startedAt: string | null;
  readonly finishedAt: string | null;
}

export function isFinal(state: MatrixState): boolean {
  return state === 'done' || state === 'cancelled';
}

export function progressOf(m: MatrixRecord): ProgressEvent {
  return {
    id: m.id,
    state: m.state,
    expectedRuns: m.expectedRuns,
    storedRuns: m.storedRuns,
    okRuns: m.okRuns,
    failedRuns: m.failedRuns,
    skippedRuns: m.skippedRuns,
    startedAt: iso(m.startedAt),
    finishedAt: iso(m.finishedAt),
  };
}

type Listener = (m: MatrixRecord) => void;

/** Who listens to which matrix; the collector and the cancel route tell it what changed. */
export class ProgressHub {
  private readonly listeners = new Map<string, Set<Listener>>();

  constructor(private readonly store: Store) {}

  subscribe(matrixId: string, listener: Listener): () => void {
    let set = this.listeners.get(matrixId);
    if (!set) {
      set = new Set();
      this.listeners.set(matrixId, set);
    }
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.listeners.delete(matrixId);
    };
  }

  changed(matrixIds: Iterable<string>): void {
    for (const id of matrixIds) {
      const set = this.listeners.get(id);
      if (!set) continue;
      const m = this.store.getMatrix(id);
      if (m) for (const l of [...set]) l(m);
    }
  }

  /** Open streams, for shutdown. */
  get size(): number {
    let n = 0;
    for (const s of this.listeners.values()) n += s.size;
    return n;
  }
}
