/** The cell's parameters, typed: derived from the contract's one declaration (contract/workloads/watches). */
import type { Cell } from '../../contract/matrix.js';
import { paramsSchema, type ParamsOf } from '../../contract/params.js';
import { watchesParams } from '../../contract/workloads/watches/index.js';
import { cellParams } from '../workload.js';

const WatchesParams = paramsSchema(watchesParams);
export type WatchesParams = ParamsOf<typeof watchesParams>;

export function parseWatchesParams(cell: Cell): WatchesParams {
  return cellParams(WatchesParams, cell);
}

/** inotify watches a backend takes for the tree: one per directory, and one per file for Node's recursive fs.watch. */
export function expectedWatches(p: WatchesParams): number {
  if (p.backend === 'fanotify') return 0;
  return p.backend === 'fswatch' ? p.dirs * (p.filesPerDir + 1) : p.dirs;
}
