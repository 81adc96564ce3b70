/**
 * What a watches run takes from the host, in its own words (runner/host-budget.ts holds each
 * need against what this host has and allows, before anything of the run exists): the inotify
 * watches against the host's cap (FSBENCH_MAX_WATCHES), an explicit maxUserWatches too (it is
 * host-wide), the tree's inodes and dentries (tmpfs: memory; scratch: space and inodes), and
 * what the watcher keeps per watch, in memory.
 */
import type { Cell } from '../../contract/matrix.js';
import type { HostNeed } from '../workload.js';
import { expectedWatches, parseWatchesParams } from './params.js';
import { treeMemoryBytes } from './tree.js';

/**
 * What the watcher keeps per watched entry, generously (docs/watches.md measures it: the raw
 * walk ~100 B of kernel memory a watch, @parcel/watcher under 1 KiB, chokidar and Node's
 * recursive fs.watch several KiB of heap an entry).
 */
const WATCHER_BYTES_PER_ENTRY = { inotify: 256, fanotify: 0, parcel: 2048, chokidar: 8192, fswatch: 8192 } as const;

export function watchesHostNeeds(cell: Cell): readonly HostNeed[] {
  const p = parseWatchesParams(cell);
  const watches = expectedWatches(p);
  const entries = p.dirs * (p.filesPerDir + 1);
  const needs: HostNeed[] = [
    {
      kind: 'limit',
      cap: 'maxWatches',
      value: watches,
      refusal: (cap) =>
        `the tree needs ${watches} inotify watches with backend ${p.backend}, above the ${cap} this host allows (FSBENCH_MAX_WATCHES): lower dirs, or raise the cap on the host`,
    },
  ];
  if (typeof p.maxUserWatches === 'number') {
    const asked = p.maxUserWatches;
    needs.push({
      kind: 'limit',
      cap: 'maxWatches',
      // The host-wide limit itself: set above the cap, it would let any watcher of this user take that many.
      value: asked,
      refusal: (cap) => `maxUserWatches ${asked} lets the run add more than the ${cap} watches this host allows (FSBENCH_MAX_WATCHES): ask for less, or raise the cap`,
    });
  }
  const watcher = (p.backend === 'fswatch' || p.backend === 'chokidar' ? entries : p.dirs) * WATCHER_BYTES_PER_ENTRY[p.backend];
  const tree = p.target === 'tmpfs' ? treeMemoryBytes(p.dirs, p.filesPerDir) : 0;
  needs.push({
    kind: 'memory',
    bytes: watcher + tree,
    what: `a watched tree of ${entries} entries with ${p.backend}${tree > 0 ? ' (its tmpfs inodes and the watcher)' : ' (the watcher)'}`,
    fix: `lower dirs or filesPerDir${p.target === 'tmpfs' ? ', or use target: scratch' : ''}`,
  });
  if (p.target === 'scratch') {
    // A directory takes a block on disk filesystems; an empty file only its inode.
    needs.push({ kind: 'space', bytes: p.dirs * 4096, inodes: entries, what: `a tree of ${p.dirs} directories and ${entries - p.dirs} files`, fix: 'lower dirs or filesPerDir' });
  }
  return needs;
}
