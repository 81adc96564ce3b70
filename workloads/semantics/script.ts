/**
 * The script of a run: which operation comes when, from the cell's kinds, count and seed alone,
 * so that the same seed makes the same script on every machine and a missed operation can be
 * made again. Pure; operations.ts makes them.
 */
import { rounds } from '../../contract/schedule.js';
import type { OperationKind } from '../../contract/workloads/semantics/index.js';

export interface PlannedOp {
  /** The operation's place in the script, and the number in its paths' names. */
  readonly index: number;
  readonly kind: OperationKind;
}

/** `perKind` operations of each kind, shuffled by `seed` (Fisher-Yates over mulberry32). */
export function planScript(kinds: readonly OperationKind[], perKind: number, seed: number): PlannedOp[] {
  const ops = kinds.flatMap((kind) => Array.from({ length: perKind }, () => kind));
  const order = rounds(ops.length, 'shuffled', seed).next().value;
  return order.map((from, index) => ({ index, kind: ops[from] ?? 'create' }));
}
