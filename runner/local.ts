/**
 * Runs a matrix on this machine, cell after cell: warmups (thrown away), then the measured
 * repetitions, each handed to `onResult` as soon as it exists so an interrupted run keeps what
 * it measured. The agent runs cells through the same `runCell`.
 */
import path from 'node:path';
import type { MachineFingerprint } from '../contract/fingerprint.js';
import type { Cell, Matrix } from '../contract/matrix.js';
import type { RunResult } from '../contract/result.js';
import { Journal } from '../host/journal.js';
import type { HostBudget } from './host-budget.js';
import { runCell } from './run-cell.js';

export interface Progress {
  readonly cellIndex: number;
  readonly cells: number;
  readonly runsDone: number;
  readonly runsTotal: number;
  readonly phase: 'warmup' | 'measure';
  readonly repetition: number;
  readonly elapsedMs: number;
  /** Remaining time at the mean pace so far; null before the first run finishes. */
  readonly etaMs: number | null;
}

export interface LocalRunOptions {
  readonly matrix: Matrix;
  readonly cells: readonly Cell[];
  readonly scratchDir: string;
  readonly fingerprint: MachineFingerprint;
  readonly signal: AbortSignal;
  readonly onResult: (run: RunResult) => void | Promise<void>;
  readonly onProgress?: (p: Progress) => void;
  readonly log: (line: string) => void;
  /** The host's journal (FSBENCH_JOURNAL_DIR); by default inside the scratch directory. */
  readonly journalDir?: string | undefined;
  /** What this host lets a cell take (FSBENCH_ALLOWED_TARGETS, FSBENCH_MAX_QUEUED_EVENTS, FSBENCH_MAX_WATCHES). */
  readonly budget?: HostBudget;
}

/** The journal of the host, found again by whatever runs next here, so a killed run's changes are undone. */
export async function openJournal(
  scratchDir: string,
  log: (line: string) => void,
  journalDir: string = path.join(scratchDir, 'journal'),
  targets: readonly string[] = [],
): Promise<Journal> {
  const journal = await Journal.open(journalDir, { scratch: scratchDir, targets });
  for (const line of await journal.recover()) log(`recovered from an earlier run: ${line}`);
  return journal;
}

/** Returns the measured results in order; stops early (keeping them) when `signal` aborts. */
export async function runMatrixLocally(o: LocalRunOptions): Promise<RunResult[]> {
  const journal = await openJournal(o.scratchDir, o.log, o.journalDir, o.budget?.allowedTargets);
  const ctx = { scratchDir: o.scratchDir, journal, signal: o.signal, log: o.log, ...(o.budget ? { budget: o.budget } : {}) };
  const perCell = o.matrix.warmup + o.matrix.repetitions;
  const runsTotal = o.cells.length * perCell;
  const start = performance.now();
  const results: RunResult[] = [];
  let runsDone = 0;

  const progress = (cellIndex: number, phase: Progress['phase'], repetition: number) => {
    const elapsedMs = performance.now() - start;
    const etaMs = runsDone > 0 ? (elapsedMs / runsDone) * (runsTotal - runsDone) : null;
    o.onProgress?.({ cellIndex, cells: o.cells.length, runsDone, runsTotal, phase, repetition, elapsedMs, etaMs });
  };
  const emit = async (run: RunResult) => {
    results.push(run);
    await o.onResult(run);
  };

  // A function, not a property read: the signal changes while the loop awaits.
  const cancelled = () => o.signal.aborted;
  for (const [cellIndex, cell] of o.cells.entries()) {
    let skipRest = false;
    for (let i = 0; i < perCell && !skipRest; i++) {
      if (cancelled()) return results;
      const warm = i < o.matrix.warmup;
      const repetition = warm ? i : i - o.matrix.warmup;
      progress(cellIndex, warm ? 'warmup' : 'measure', repetition);
      const run = await runCell({ matrix: o.matrix.name, cell, repetition: warm ? 0 : repetition, fingerprint: o.fingerprint }, ctx);
      runsDone++;
      if (cancelled()) return results; // a cancelled run is not a measurement
      // A skip or failure repeats identically (a refused combination, a missing privilege):
      // report it once for the cell instead of once per repetition.
      if (run.state !== 'ok') {
        await emit(run);
        skipRest = true;
      } else if (!warm) {
        await emit(run);
      }
    }
    runsDone = (cellIndex + 1) * perCell;
  }
  progress(o.cells.length - 1, 'measure', o.matrix.repetitions);
  return results;
}
