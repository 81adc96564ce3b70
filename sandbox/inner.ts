/**
 * The run container's side: runs one cell in this process, exactly as an agent would without a
 * sandbox, and turns whatever happens into one SandboxOutput. Started by `fsbench run-cell`.
 */
import { FsbenchError, toFsbenchError, messageOf } from '../contract/errors.js';
import { Cell } from '../contract/matrix.js';
import { Journal } from '../host/journal.js';
import { RUNNERS } from '../runner/workloads.js';
import { containerShape, type SandboxOutput } from './protocol.js';

export interface InsideOptions {
  /** Where the run makes its files (the container's work directory). */
  readonly scratchDir: string;
  readonly journalDir: string;
  readonly signal: AbortSignal;
  readonly log: (line: string) => void;
}

function parseCell(json: string): Cell {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch (err) {
    throw new FsbenchError('SANDBOX_FAILED', `the cell given to run-cell is not JSON: ${messageOf(err)}`);
  }
  const r = Cell.safeParse(raw);
  if (!r.success) {
    const why = r.error.issues.map((i) => `${i.path.join('.') || '(cell)'}: ${i.message}`).join('; ');
    throw new FsbenchError('SANDBOX_FAILED', `the cell given to run-cell is invalid: ${why}`);
  }
  return r.data;
}

export async function runInside(cellJson: string, o: InsideOptions): Promise<SandboxOutput> {
  try {
    const cell = parseCell(cellJson);
    if (containerShape(cell) !== null) {
      throw new FsbenchError('SANDBOX_FAILED', 'run-cell runs cells with container.storage: none only (a sandbox never starts another)');
    }
    // Checked like any scratch directory (and made, mode 0700); the run holds its owner lock
    // for as long as it runs, so the agent's sweep leaves its limits alone until it is gone.
    const journal = await Journal.open(o.journalDir, { scratch: o.scratchDir });
    try {
      for (const line of await journal.recover()) o.log(`recovered: ${line}`);
      const outcome = await RUNNERS[cell.workload].run(cell, { scratchDir: journal.scratch, journal, signal: o.signal, log: o.log });
      return { ok: true, outcome: { ...outcome } };
    } finally {
      await journal.close();
    }
  } catch (err) {
    const e = toFsbenchError(err, 'WORKLOAD_FAILED');
    return { ok: false, error: { code: e.code, message: e.message } };
  }
}
