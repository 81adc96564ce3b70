/**
 * The watch-setup workload on this host (docs/watches.md): sets fs.inotify.max_user_watches as
 * the cell asks, makes the memory cgroup the watcher's kernel charges are read from, builds the
 * tree, watches it with the backend (natively for inotify and fanotify, in a Node child for the
 * libraries) and turns the readings into the contract's metrics. Everything it made is undone
 * by the teardown, whatever happened.
 */
import { FsbenchError } from '../../contract/errors.js';
import type { WatchesMetrics } from '../../contract/workloads/watches/index.js';
import { readInotifyLimits } from '../../host/fingerprint.js';
import type { Teardown } from '../../host/teardown.js';
import { withTeardown, type RunContext, type WorkloadOutcome, type WorkloadSlice } from '../workload.js';
import { watchesHostNeeds } from './budget.js';
import { markCache, prepareAccounting, type Accounting } from './accounting.js';
import { applyMaxUserWatches, watchesHeldByUser } from './limits.js';
import { runNodeWatcher } from './node-backend.js';
import { expectedWatches, parseWatchesParams, type WatchesParams } from './params.js';
import { runWatchesNative, WatchOutput } from './native.js';
import { prepareTree, type Tree } from './tree.js';

const NS_PER_MS = 1e6;

/** One watcher's readings, whichever side measured them. */
interface Readings {
  readonly watches: number;
  readonly limitHit: boolean;
  readonly setupNs: number;
  readonly firstEventNs: number | null;
  readonly teardownNs: number;
  readonly beforeMemcg: number | null;
  readonly afterMemcg: number | null;
  readonly beforeSUnreclaim: number | null;
  readonly afterSUnreclaim: number | null;
  readonly beforeRss: number;
  readonly afterRss: number;
  readonly info: Record<string, string | number | boolean | null>;
}

const delta = (a: number | null, b: number | null) => (a === null || b === null ? null : b - a);

async function watchNatively(p: WatchesParams, tree: Tree, acc: Accounting, signal: AbortSignal): Promise<Readings> {
  const op = p.backend === 'fanotify' ? 'fanotify' : 'inotify';
  const argv = ['--root', tree.root, '--marker-dir', tree.build.markerDir];
  if (op === 'fanotify') argv.push('--mark', p.mark);
  if (acc.cgroup !== null && acc.file !== null) {
    argv.push('--cgroup', acc.cgroup, '--memcg-file', acc.file);
    if (acc.key !== null) argv.push('--memcg-key', acc.key);
  }
  const out = WatchOutput.parse(await runWatchesNative(op, argv, signal));
  if (out.limitErrno === 'ENOMEM') {
    throw new FsbenchError('LIMIT_REACHED', `inotify_add_watch failed with ENOMEM after ${out.watches} watches: the kernel could not allocate another mark`);
  }
  return {
    ...out,
    limitHit: out.limitErrno === 'ENOSPC',
    info: { measuredBy: 'native', ...(out.foreignEvents === undefined ? {} : { foreignEvents: out.foreignEvents }), peakRssBytes: out.peakRss },
  };
}

async function watchFromNode(p: WatchesParams, tree: Tree, acc: Accounting, signal: AbortSignal): Promise<Readings> {
  if (p.backend === 'inotify' || p.backend === 'fanotify') throw new FsbenchError('INTERNAL', `${p.backend} is not a Node backend`);
  const entries = tree.build.dirs + tree.build.files;
  // Generous: chokidar stats every entry, and 100,000 directories take it tens of seconds here.
  const timeoutMs = 120_000 + entries * 5;
  const r = await runNodeWatcher(
    { backend: p.backend, root: tree.root, markerDir: tree.build.markerDir, cgroup: acc.cgroup, memcgFile: acc.file, memcgKey: acc.key, timeoutMs },
    signal,
    timeoutMs + 60_000,
  );
  // No event and fewer watches than the tree needs: the library stopped at the limit without
  // reporting it (Node's recursive fs.watch drops ENOSPC), which is what its users live with.
  const silent = r.limitError === null && r.firstEventNs === null && r.watches < expectedWatches(p);
  if (r.limitError === null && r.firstEventNs === null && !silent) {
    throw new FsbenchError('BACKEND_FAILED', `${p.backend} holds ${r.watches} watches for the tree but reported no event for ${r.markers} marker files in ${tree.build.markerDir}`);
  }
  return {
    ...r,
    limitHit: r.limitError !== null || silent,
    info: {
      measuredBy: 'node child process',
      markers: r.markers,
      limitError: silent ? `none reported: ${r.watches} of ${expectedWatches(p)} watches, and no event` : r.limitError,
      backendErrors: r.errors.length > 0 ? r.errors.slice(0, 5).join('; ') : null,
    },
  };
}

function toMetrics(p: WatchesParams, tree: Tree, r: Readings, acc: Accounting, limit: number | null, needed: number | null): WatchesMetrics {
  const memcg = acc.method !== 'meminfo';
  const kernel = memcg ? delta(r.beforeMemcg, r.afterMemcg) : delta(r.beforeSUnreclaim, r.afterSUnreclaim);
  const sunreclaim = delta(r.beforeSUnreclaim, r.afterSUnreclaim);
  const per = (v: number | null) => (v === null || r.watches === 0 ? null : v / r.watches);
  const setupMs = r.setupNs / NS_PER_MS;
  return {
    setupMs,
    firstEventMs: r.firstEventNs === null ? null : r.firstEventNs / NS_PER_MS,
    watchesPerSec: setupMs > 0 && r.watches > 0 ? r.watches / (setupMs / 1000) : null,
    watches: r.watches,
    kernelBytes: kernel,
    kernelBytesPerWatch: per(kernel),
    sunreclaimBytesPerWatch: per(sunreclaim),
    kernelBytesHostWide: memcg ? 0 : 1,
    watcherRssBytes: r.afterRss,
    rssBytesPerWatch: per(r.afterRss - r.beforeRss),
    teardownMs: r.teardownNs / NS_PER_MS,
    limitHit: r.limitHit ? 1 : 0,
    maxUserWatches: limit,
    watchesNeeded: needed,
    treeDirs: tree.build.dirs,
    treeFiles: tree.build.files,
    treeDepth: tree.build.depth,
    treeBuildMs: tree.build.ns / NS_PER_MS,
  };
}

async function measure(p: WatchesParams, ctx: RunContext, teardown: Teardown): Promise<WorkloadOutcome> {
  const checkAborted = () => {
    if (ctx.signal.aborted) throw new FsbenchError('CANCELLED', 'the run was cancelled');
  };
  const expected = expectedWatches(p);
  // fanotify's marks do not count against fs.inotify.max_user_watches: it is neither set nor recorded.
  const limit = p.backend === 'fanotify' ? null : await applyMaxUserWatches(teardown, p.maxUserWatches, expected);
  const acc = await prepareAccounting(teardown, p.accounting);
  checkAborted();
  ctx.log(`watches: building ${p.dirs} directories (fanout ${p.fanout}, ${p.filesPerDir} files each) on ${p.target}`);
  const tree = await prepareTree(teardown, p, ctx.scratchDir, ctx.signal);
  checkAborted();
  ctx.log(`watches: ${p.backend} watching the tree (kernel memory by ${acc.method})`);
  const r = p.backend === 'inotify' || p.backend === 'fanotify' ? await watchNatively(p, tree, acc, ctx.signal) : await watchFromNode(p, tree, acc, ctx.signal);
  let needed: number | null = null;
  if (r.limitHit && limit !== null) {
    // The raw walk stopped exactly at the limit: everything else this user held was limit - watches.
    // A library may have let its watches go by now: count what this user's other processes hold.
    const others = p.backend === 'inotify' ? Math.max(0, limit - r.watches) : await watchesHeldByUser(process.getuid?.() ?? 0);
    needed = others + expected;
  }
  return {
    metrics: toMetrics(p, tree, r, acc, limit, needed),
    info: {
      ...r.info,
      backend: p.backend,
      kernelMemoryMethod: acc.method,
      accountingFallback: acc.fallback,
      markCache: await markCache(),
      treeRoot: tree.root,
      markerDir: tree.build.markerDir,
      maxUserWatchesSetting: String(p.maxUserWatches),
    },
    limits: p.backend === 'fanotify' ? null : await readInotifyLimits(),
    targetFs: tree.fsType,
  };
}

export const watchesWorkload: WorkloadSlice = {
  hostNeeds: watchesHostNeeds,
  run(cell, ctx) {
    const p = parseWatchesParams(cell);
    // A WorkloadSkipped (fanotify refused) keeps its class: the runner makes the run `skipped`.
    return withTeardown(ctx, (teardown) => measure(p, ctx, teardown));
  },
};
