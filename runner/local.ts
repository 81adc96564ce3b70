/**
 * Runs a matrix on this machine: each cell's warmups (thrown away), then its measured
 * repetitions in the matrix's order, each handed to `onResult` as soon as it exists so an
 * interrupted run keeps what it measured. The agent runs cells through the same `runCell`.
 */
import path from 'node:path';
import type { MachineFingerprint } from '../contract/fingerprint.js';
import type { InterferenceThresholds } from '../contract/interference.js';
import { adaptiveRepetitions, maxRepetitions, type Cell, type Matrix } from '../contract/matrix.js';
import type { RunResult } from '../contract/result.js';
import { newSeed, rounds, scheduleInfo } from '../contract/schedule.js';
import { Journal } from '../host/journal.js';
import { precisionVerdict, relativeHalfWidth, type PrecisionVerdict } from '../stats/precision.js';
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
  /**
   * The journal, opened already (and recovered) by the caller, who closes it: `fsbench run` opens
   * it first of all, so the scratch directory is checked before anything else uses it. Without
   * one, the run opens its own (openJournal) and closes it at the end.
   */
  readonly journal?: Journal;
  /** What this host lets a cell take (FSBENCH_ALLOWED_TARGETS, FSBENCH_MAX_QUEUED_EVENTS, FSBENCH_MAX_WATCHES). */
  readonly budget?: HostBudget;
  /** When a run counts as disturbed (FSBENCH_MAX_STEAL, FSBENCH_MAX_OUTSIDE_CPU). */
  readonly interference?: InterferenceThresholds;
  /** Once every cell is measured (not when cancelled): how each ended. */
  readonly onCellsDone?: (outcomes: readonly CellOutcome[]) => void;
}

/**
 * The journal of the host, found again by whatever runs next here, so a killed run's changes are
 * undone. Opening it checks that only root (or this user) controls the scratch and journal
 * directories (DIRECTORY_UNSAFE otherwise) and takes this process's owner lock: close it.
 */
export async function openJournal(
  scratchDir: string,
  log: (line: string) => void,
  journalDir: string = path.join(scratchDir, 'journal'),
  targets: readonly string[] = [],
): Promise<Journal> {
  const journal = await Journal.open(journalDir, { scratch: scratchDir, targets });
  try {
    for (const line of await journal.recover()) log(`recovered from an earlier run: ${line}`);
  } catch (err) {
    await journal.close();
    throw err;
  }
  return journal;
}

/** How a cell's measuring ended, for the summary `fsbench run` prints. */
export interface CellOutcome {
  readonly cell: Cell;
  /** Measured ok runs. */
  readonly runs: number;
  /**
   * `reached`/`max` under `repetitions: auto` (precision reached, or the maximum run without it),
   * `done` for a fixed count, `stopped` after a skipped or failed run.
   */
  readonly verdict: PrecisionVerdict | 'done' | 'stopped';
  /** The relative half-width of the median's 95% CI of the precision metric, when known. */
  readonly halfWidth: number | null;
}

interface CellState {
  warmed: boolean;
  /** Runs made, warmups included. */
  made: number;
  done: boolean;
  repetitions: number;
  readonly values: number[];
  verdict: CellOutcome['verdict'] | null;
}

/**
 * Returns the measured results in the order they were made; stops early (keeping them) when
 * `signal` aborts. The order follows the matrix's `order` (contract/schedule.ts); each cell's
 * warmups come right before its first measured run. Under `repetitions: auto` a cell leaves the
 * rounds once its median is precise enough (stats/precision.ts) or it reached the maximum.
 */
export async function runMatrixLocally(o: LocalRunOptions): Promise<RunResult[]> {
  if (o.journal) return runWithJournal(o, o.journal);
  const journal = await openJournal(o.scratchDir, o.log, o.journalDir, o.budget?.allowedTargets);
  try {
    return await runWithJournal(o, journal);
  } finally {
    await journal.close();
  }
}

async function runWithJournal(o: LocalRunOptions, journal: Journal): Promise<RunResult[]> {
  const ctx = {
    scratchDir: o.scratchDir,
    journal,
    signal: o.signal,
    log: o.log,
    ...(o.budget ? { budget: o.budget } : {}),
    ...(o.interference ? { interference: o.interference } : {}),
  };
  const { matrix } = o;
  const adaptive = adaptiveRepetitions(matrix);
  const repetitions = maxRepetitions(matrix);
  const seed = matrix.order === 'shuffled' ? (matrix.seed ?? newSeed()) : undefined;
  // Recorded with every run: how its place in the schedule was decided.
  const recorded = scheduleInfo(matrix.order, seed, adaptive);
  if (seed !== undefined && matrix.seed === undefined) o.log(`order: shuffled with seed ${seed} (give seed: ${seed} to make the same order again)`);
  // An upper bound, lowered as cells stop early (precise enough, skipped, failed).
  let runsTotal = o.cells.length * (matrix.warmup + repetitions);
  const start = performance.now();
  const results: RunResult[] = [];
  const states: CellState[] = o.cells.map(() => ({ warmed: false, made: 0, done: false, repetitions: 0, values: [], verdict: null }));
  let runsDone = 0;
  let position = 0;

  const progress = (cellIndex: number, phase: Progress['phase'], repetition: number) => {
    const elapsedMs = performance.now() - start;
    const etaMs = runsDone > 0 ? (elapsedMs / runsDone) * (runsTotal - runsDone) : null;
    o.onProgress?.({ cellIndex, cells: o.cells.length, runsDone, runsTotal, phase, repetition, elapsedMs, etaMs });
  };
  const emit = async (run: RunResult) => {
    const annotated: RunResult = matrix.annotations === undefined || Object.keys(matrix.annotations).length === 0 ? run : { ...run, annotations: matrix.annotations };
    const withInfo: RunResult = annotated.state === 'ok' ? { ...annotated, info: { ...annotated.info, ...recorded, position: position++ } } : annotated;
    results.push(withInfo);
    await o.onResult(withInfo);
  };
  // A function, not a property read: the signal changes while the loop awaits.
  const cancelled = () => o.signal.aborted;
  const stop = (st: CellState, verdict: CellOutcome['verdict']) => {
    st.done = true;
    st.verdict = verdict;
    runsTotal -= matrix.warmup + repetitions - st.made;
  };

  /** One measured run of a cell (after its warmups, the first time); false when cancelled. */
  const step = async (cellIndex: number, cell: Cell, st: CellState): Promise<boolean> => {
    for (let w = 0; !st.warmed && w < matrix.warmup; w++) {
      if (cancelled()) return false;
      progress(cellIndex, 'warmup', w);
      const warm = await runCell({ matrix: matrix.name, cell, repetition: 0, fingerprint: o.fingerprint }, ctx);
      runsDone++;
      st.made++;
      if (cancelled()) return false; // a cancelled run is not a measurement
      // A skip or failure repeats identically (a refused combination, a missing privilege):
      // report it once for the cell instead of once per repetition.
      if (warm.state !== 'ok') {
        await emit(warm);
        st.warmed = true;
        stop(st, 'stopped');
        return true;
      }
    }
    st.warmed = true;
    if (cancelled()) return false;
    progress(cellIndex, 'measure', st.repetitions);
    const run = await runCell({ matrix: matrix.name, cell, repetition: st.repetitions, fingerprint: o.fingerprint }, ctx);
    runsDone++;
    st.made++;
    if (cancelled()) return false;
    await emit(run);
    st.repetitions++;
    if (run.state !== 'ok') {
      stop(st, 'stopped');
      return true;
    }
    if (adaptive) {
      const v = run.metrics[adaptive.metric];
      if (typeof v === 'number' && Number.isFinite(v)) st.values.push(v);
      const verdict = precisionVerdict(st.values, adaptive);
      // A metric the runs do not report (null) cannot become precise: such a cell runs to the maximum.
      if (verdict !== 'more' || st.repetitions >= repetitions) stop(st, verdict === 'more' ? 'max' : verdict);
    } else if (st.repetitions >= repetitions) {
      stop(st, 'done');
    }
    return true;
  };

  if (matrix.order === 'sequential') {
    for (const [cellIndex, cell] of o.cells.entries()) {
      const st = states[cellIndex];
      while (st && !st.done) if (!(await step(cellIndex, cell, st))) return results;
    }
  } else {
    const each = rounds(o.cells.length, matrix.order, seed);
    for (let round = 0; round < repetitions && states.some((st) => !st.done); round++) {
      for (const cellIndex of each.next().value) {
        const cell = o.cells[cellIndex];
        const st = states[cellIndex];
        if (!cell || !st || st.done) continue;
        if (!(await step(cellIndex, cell, st))) return results;
      }
    }
  }
  progress(o.cells.length - 1, 'measure', repetitions);
  o.onCellsDone?.(
    o.cells.map((cell, i) => {
      const st = states[i];
      return { cell, runs: st?.values.length ?? 0, verdict: st?.verdict ?? 'done', halfWidth: st ? relativeHalfWidth(st.values) : null };
    }),
  );
  return results;
}
