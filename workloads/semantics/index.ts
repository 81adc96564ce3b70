/**
 * The semantics workload on this host (docs/semantics.md): makes the tree (a private tmpfs, or a
 * directory on the scratch filesystem), prepares what the script's operations need, starts the
 * backend's watcher, waits until it reports a marker file in every directory, makes the script at
 * its pace, waits the settle window (and again after the appends that test deafness), stops the
 * watcher and matches its events to the operations' log. Everything it made is undone by the
 * teardown, whatever happened.
 */
import { writeFileSync } from 'node:fs';
import { realpath } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { FsbenchError, messageOf } from '../../contract/errors.js';
import { MAX_INFO_TEXT } from '../../contract/result.js';
import type { Cell } from '../../contract/matrix.js';
import type { WatchEvent } from '../../contract/workloads/semantics/events.js';
import { readInotifyLimits } from '../../host/fingerprint.js';
import { filesystemType } from '../../host/kernel.js';
import { makeRunDirectory, mountPrivateTmpfs } from '../../host/run-dir.js';
import type { Teardown } from '../../host/teardown.js';
import { withTeardown, type HostNeed, type RunContext, type WorkloadOutcome, type WorkloadSlice } from '../workload.js';
import { USER_BACKEND } from '../../contract/workloads/semantics/backends.js';
import { adapterOf } from './backends.js';
import { matchEvents, type MissedOp, type Truth } from './matching.js';
import { semanticsMetrics } from './metrics.js';
import { Layout, perform, performAfter, prepare } from './operations.js';
import { parseSemanticsParams, treeSize, type SemanticsParams } from './params.js';
import { planScript, type PlannedOp } from './script.js';
import { openTreeTo } from './tree-access.js';
import type { RunningWatcher, WatcherExit } from './watcher.js';

/** Readiness markers: files made in every directory until the watcher reports one there; never matched. */
const MARKER_PREFIX = '.fsbench-marker-';
const isMarker = (p: string) => path.basename(p).startsWith(MARKER_PREFIX);
/** How long a watcher may take to report a marker in every directory. */
const READY_TIMEOUT_MS = 60_000;
/** Events kept: a storm of the largest cell makes about 600,000; beyond, the run says how many it dropped. */
const MAX_EVENTS = 4_000_000;
/** Missed operations listed in the run's info. */
const MAX_MISSED_LISTED = 50;
/** A page per entry (tiny files still take one on tmpfs) and its inode, dentry and the writer's log. */
const BYTES_PER_ENTRY = 4096 + 1536 + 512;

const now = () => process.hrtime.bigint();

function memoryBytes(p: SemanticsParams): number {
  const { entries } = treeSize(p);
  return 16 * 1024 ** 2 + entries * (p.target === 'tmpfs' ? BYTES_PER_ENTRY : 512);
}

function semanticsHostNeeds(cell: Cell): readonly HostNeed[] {
  const p = parseSemanticsParams(cell);
  const { entries, dirs } = treeSize(p);
  const needs: HostNeed[] = [
    // Every watcher but fanotify (one filesystem mark) holds an inotify watch per directory.
    ...(p.backend === 'fanotify'
      ? []
      : [
          {
            kind: 'limit',
            cap: 'maxWatches',
            value: dirs,
            refusal: (cap: number) =>
              `the script makes up to ${dirs} directories, each an inotify watch, above the ${cap} this host allows (FSBENCH_MAX_WATCHES): lower perKind, or raise the cap on the host`,
          } as const,
        ]),
    {
      kind: 'memory',
      bytes: memoryBytes(p),
      what: `a script of ${entries} entries${p.target === 'tmpfs' ? ' on tmpfs' : ''} and the watcher's events`,
      fix: `lower perKind${p.target === 'tmpfs' ? ', or use target: scratch' : ''}`,
    },
  ];
  if (p.target === 'scratch') needs.push({ kind: 'space', bytes: entries * 4096, inodes: entries * 2, what: `a tree of ${entries} entries`, fix: 'lower perKind' });
  if (p.backend === USER_BACKEND) needs.push({ kind: 'watcher', name: p.watcher });
  return needs;
}

/** The first wait for a round of markers; see awaitReady. */
const READY_FIRST_WAIT_MS = 1500;

function checkAborted(signal: AbortSignal): void {
  if (signal.aborted) throw new FsbenchError('CANCELLED', 'the run was cancelled');
}

/**
 * Makes markers in each directory not yet confirmed until the watcher has reported one in every
 * directory. A watcher whose start returned is watching (each adapter waits for that), so the
 * first round's markers are normally all it needs; a new round comes only after a wait with no
 * marker reported, 1.5 s at first (longer than fswatch's one-second batches) and twice as long
 * each time. Marking sooner buries a watcher that reads its queue slowly (fswatch reads one small
 * buffer a second) under markers, and the script's operations wait behind them.
 */
async function awaitReady(dirs: readonly string[], confirmed: ReadonlySet<string>, backend: string, signal: AbortSignal): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  const firstWaitMs = Math.max(READY_FIRST_WAIT_MS, dirs.length * 0.02);
  for (let round = 0; ; round++) {
    const waiting = dirs.filter((d) => !confirmed.has(d));
    if (waiting.length === 0) return;
    if (Date.now() > deadline) {
      throw new FsbenchError(
        'BACKEND_FAILED',
        `${backend} reported no marker file in ${waiting.length} of ${dirs.length} directories within ${READY_TIMEOUT_MS / 1000} s (first: ${waiting[0] ?? ''}): it does not watch the whole tree`,
      );
    }
    for (const d of waiting) writeFileSync(path.join(d, `${MARKER_PREFIX}${round}`), '', { flag: 'wx' });
    const waitMs = firstWaitMs * 2 ** Math.min(round, 5);
    let seen = confirmed.size;
    let quietSince = Date.now();
    while (Date.now() - quietSince < waitMs && Date.now() < deadline && confirmed.size < dirs.length) {
      checkAborted(signal);
      await sleep(5);
      if (confirmed.size !== seen) {
        seen = confirmed.size;
        quietSince = Date.now();
      }
    }
  }
}

/** Makes the script at its pace; the loop yields after each operation, so the watcher's lines are read as they come. */
async function runScript(layout: Layout, script: readonly PlannedOp[], pace: number | 'max', signal: AbortSignal): Promise<Truth[]> {
  const intervalNs = pace === 'max' ? 0n : BigInt(Math.round(1e9 / pace));
  const start = now();
  const truths: Truth[] = [];
  for (const [n, op] of script.entries()) {
    checkAborted(signal);
    const waitMs = Number(start + BigInt(n) * intervalNs - now()) / 1e6;
    if (waitMs >= 1) await sleep(waitMs);
    else await new Promise<void>((resolve) => setImmediate(resolve));
    try {
      truths.push(perform(layout, op));
    } catch (err) {
      throw new FsbenchError('WORKLOAD_FAILED', `operation ${op.index} (${op.kind}) failed: ${messageOf(err)}`);
    }
  }
  return truths;
}

/** The missed operations, as many as fit in one info entry (paths relative to the tree): the list and how many it holds. */
export function missedInfo(missed: readonly MissedOp[], root: string): { text: string; listed: number } {
  const rel = (p: string) => path.relative(root, p);
  const entries: string[] = [];
  let length = 2;
  for (const m of missed.slice(0, MAX_MISSED_LISTED)) {
    const entry = JSON.stringify({ index: m.index, kind: m.kind, step: m.step, missing: m.missing.map(rel) });
    const added = entry.length + (entries.length > 0 ? 1 : 0);
    if (length + added > MAX_INFO_TEXT) break;
    entries.push(entry);
    length += added;
  }
  return { text: `[${entries.join(',')}]`, listed: entries.length };
}

async function measure(p: SemanticsParams, ctx: RunContext, teardown: Teardown): Promise<WorkloadOutcome> {
  // Before anything of the run exists: a cell naming a watcher this host does not list stops here
  // (the host budget checked it already; this is the entry the run then uses).
  const { adapter, listed } = adapterOf(p.backend, p.watcher, ctx.watchers);
  const runDir = await makeRunDirectory(teardown, await realpath(ctx.scratchDir), 'semantics');
  const { entries } = treeSize(p);
  if (p.target === 'tmpfs') {
    // Markers may take a few rounds: inodes for three times the tree.
    await mountPrivateTmpfs(teardown, runDir, `size=${memoryBytes(p)},nr_inodes=${entries * 3 + 4096}`, 'target: scratch');
  }
  if (listed !== undefined) await openTreeTo(runDir, listed);
  const layout = new Layout(runDir);
  const script = planScript(p.kindList, p.perKind, p.seed);
  const dirs = prepare(layout, script);
  checkAborted(ctx.signal);

  const events: WatchEvent[] = [];
  let dropped = 0;
  const confirmed = new Set<string>();
  ctx.log(`semantics: ${script.length} operations (seed ${p.seed}) watched by ${listed === undefined ? p.backend : `${listed.name} (backend: user)`}`);
  const t0 = now();
  const watcher: RunningWatcher = await adapter.start(
    layout.root,
    (e) => {
      if (isMarker(e.path)) confirmed.add(path.dirname(e.path));
      if (events.length < MAX_EVENTS) events.push(e);
      else dropped++;
    },
    ctx.signal,
  );
  let exit: WatcherExit | null = null;
  let truths: Truth[];
  let readyMs: number;
  try {
    await awaitReady(dirs, confirmed, p.backend, ctx.signal);
    readyMs = Number(now() - t0) / 1e6;
    truths = await runScript(layout, script, p.pace, ctx.signal);
    await sleep(p.settle, undefined, { signal: ctx.signal }).catch(() => undefined);
    checkAborted(ctx.signal);
    const later = script.flatMap((op) => {
      const t = performAfter(layout, op);
      return t === null ? [] : [t];
    });
    if (later.length > 0) {
      truths.push(...later);
      await sleep(p.settle, undefined, { signal: ctx.signal }).catch(() => undefined);
      checkAborted(ctx.signal);
    }
    exit = await watcher.stop();
  } finally {
    // A failed run still stops its watcher before the teardown unmounts the tree under it.
    if (exit === null) await watcher.stop().catch(() => undefined);
  }
  const ops = truths.filter((t) => t.step === 'op');
  const first = ops[0]?.beforeNs ?? 0n;
  const last = ops.reduce((m, t) => t.paths.reduce((x, q) => (q.atNs > x ? q.atNs : x), m), first);
  const seconds = Number(last - first) / 1e9;
  const m = matchEvents(truths, events, { settleNs: BigInt(p.settle) * 1_000_000n, isMarker });
  const missed = missedInfo(m.missed, layout.root);
  return {
    metrics: semanticsMetrics(m, {
      overflowsKnown: adapter.reportsOverflow === true,
      synthesized: exit.synthesized ?? null,
      opsPerSec: seconds > 0 ? ops.length / seconds : 0,
      readyMs,
    }),
    info: {
      backend: p.backend,
      ...(listed === undefined ? {} : { watcher: listed.name }),
      seed: p.seed,
      treeRoot: layout.root,
      missedOps: missed.text,
      missedListed: missed.listed,
      missedTotal: m.missed.length,
      eventsDropped: dropped,
      watcherExit: exit.exit === null ? null : String(exit.exit),
    },
    limits: await readInotifyLimits(),
    targetFs: filesystemType(runDir),
  };
}

export const semanticsWorkload: WorkloadSlice = {
  hostNeeds: semanticsHostNeeds,
  run(cell, ctx) {
    const p = parseSemanticsParams(cell);
    return withTeardown(ctx, (teardown) => measure(p, ctx, teardown));
  },
};
