/** The cell's parameters, typed: derived from the contract's one declaration (contract/workloads/semantics). */
import type { Cell } from '../../contract/matrix.js';
import { paramsSchema, type ParamsOf } from '../../contract/params.js';
import { kindsOf, semanticsParams, type OperationKind } from '../../contract/workloads/semantics/index.js';
import { cellParams } from '../workload.js';
import { DIRS_PER_OP, ENTRIES_PER_OP } from './operations.js';

const SemanticsParams = paramsSchema(semanticsParams);
export type SemanticsParams = ParamsOf<typeof semanticsParams> & { readonly kindList: readonly OperationKind[] };

export function parseSemanticsParams(cell: Cell): SemanticsParams {
  const p = cellParams(SemanticsParams, cell);
  return { ...p, kindList: kindsOf(p.kinds) };
}

/** What the script adds to the tree at most: entries (the tmpfs's inodes) and directories (a recursive watcher's watches). */
export function treeSize(p: SemanticsParams): { readonly entries: number; readonly dirs: number } {
  const sum = (f: (k: OperationKind) => number) => p.kindList.reduce((s, k) => s + f(k) * p.perKind, 0);
  // The root, its four shared directories and the unwatched one beside it.
  return { entries: 6 + sum((k) => ENTRIES_PER_OP[k]), dirs: 6 + sum((k) => DIRS_PER_OP[k] ?? 0) };
}
