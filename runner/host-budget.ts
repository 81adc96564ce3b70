/**
 * What a host lets a cell take, checked before anything of the run exists: a cell comes from
 * whoever can submit a matrix, and its parameters reach host-wide kernel limits, memory and
 * disks. `runCell` checks every cell here, for `fsbench run` and agents alike, and a refusal is a
 * `failed` run with its code, never a crash and never a host pushed into the OOM killer.
 *
 * The workload says what a run takes (WorkloadSlice.hostNeeds, in its own words); this file
 * holds each need against the host:
 * - kernel limits (host-wide sysctls) against this host's caps (FSBENCH_MAX_QUEUED_EVENTS,
 *   FSBENCH_MAX_WATCHES): LIMIT_NOT_ALLOWED;
 * - directories a cell names, resolved, inside the scratch directory or an allowed root:
 *   TARGET_NOT_ALLOWED;
 * - a watcher of the host's operator a cell names, in the host's list (FSBENCH_WATCHERS):
 *   WATCHER_NOT_LISTED;
 * - memory (a tmpfs) against MemAvailable and the cgroup's memory headroom, minus a reserve,
 *   and files on disk against the free space and inodes of the filesystem they land on:
 *   HOST_TOO_SMALL.
 */
import { readFile, statfs } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { FsbenchError } from '../contract/errors.js';
import type { Cell } from '../contract/matrix.js';
import { formatAmount } from '../contract/units.js';
import { resolveAllowedTarget } from '../host/safe-dir.js';
import { listedWatcher, type WatcherList } from '../host/watcher-list.js';
import type { HostNeed } from '../workloads/workload.js';
import { RUNNERS } from './workloads.js';

export interface HostBudget {
  /** Directories besides the scratch directory that `target` paths may lie in (FSBENCH_ALLOWED_TARGETS). */
  readonly allowedTargets: readonly string[];
  /** Largest max_queued_events a run may set (FSBENCH_MAX_QUEUED_EVENTS). */
  readonly maxQueuedEvents: number;
  /** Most inotify watches a run may add (FSBENCH_MAX_WATCHES). */
  readonly maxWatches: number;
  /** The operator's own watchers a cell may name (FSBENCH_WATCHERS); none when absent. */
  readonly watchers?: WatcherList;
}

/** The settings' defaults, for callers that were given none. */
export const DEFAULT_BUDGET: HostBudget = { allowedTargets: [], maxQueuedEvents: 1_048_576, maxWatches: 131_072 };

const MiB = 1024 ** 2;
/** Memory left to the kernel, the agent and everything else on the host: a tenth, at least 256 MiB. */
const MIN_RESERVE = 256 * MiB;

interface Memory {
  /** What a run may still take. */
  readonly available: number;
  readonly why: string;
}

const Meminfo = z.object({ MemTotal: z.number().int().nonnegative(), MemAvailable: z.number().int().nonnegative() });

/**
 * The tighter of the kernel's MemAvailable and the headroom of this process's cgroup (a
 * container's memory limit: tmpfs pages are charged to the cgroup of whoever writes them).
 */
export async function availableMemory(): Promise<Memory> {
  const fields: Record<string, number> = {};
  for (const line of (await readFile('/proc/meminfo', 'utf8')).split('\n')) {
    const m = /^(\w+):\s+(\d+) kB$/.exec(line);
    if (m?.[1] !== undefined && m[2] !== undefined) fields[m[1]] = Number(m[2]) * 1024;
  }
  const info = Meminfo.parse(fields);
  let total = info.MemTotal;
  let free = info.MemAvailable;
  let why = `MemAvailable ${formatAmount(info.MemAvailable)}`;
  const limit = await cgroupHeadroom();
  if (limit !== null && limit.headroom < free) {
    total = Math.min(total, limit.max);
    free = limit.headroom;
    why = `the memory limit of cgroup ${limit.group} (${formatAmount(limit.max)}, ${formatAmount(limit.headroom)} unused)`;
  }
  const reserve = Math.max(MIN_RESERVE, Math.round(total / 10));
  return { available: Math.max(0, free - reserve), why: `${why}, less ${formatAmount(reserve)} kept for the host` };
}

/** The tightest memory.max over this process's cgroup v2 and its ancestors, or null without one. */
async function cgroupHeadroom(): Promise<{ group: string; max: number; headroom: number } | null> {
  const own = /^0::(\/.*)$/m.exec(await readFile('/proc/self/cgroup', 'utf8').catch(() => ''))?.[1];
  if (own === undefined) return null;
  let best: { group: string; max: number; headroom: number } | null = null;
  for (let group = own; ; group = path.dirname(group)) {
    const dir = path.join('/sys/fs/cgroup', group);
    const max = await readFile(path.join(dir, 'memory.max'), 'utf8').then((s) => s.trim(), () => 'max');
    if (/^\d+$/.test(max)) {
      const current = Number(await readFile(path.join(dir, 'memory.current'), 'utf8').catch(() => '0'));
      const headroom = Math.max(0, Number(max) - current);
      if (best === null || headroom < best.headroom) best = { group, max: Number(max), headroom };
    }
    if (group === '/') return best;
  }
}

function tooSmall(what: string, need: number, have: string, fix: string): FsbenchError {
  return new FsbenchError('HOST_TOO_SMALL', `${what} needs ${formatAmount(need)}, but ${have}: ${fix}`);
}

/**
 * Resolves a directory a cell names and refuses it outside the allowed roots (host/safe-dir.ts).
 * The workload resolves and checks it again against its journal's roots (the same ones) and
 * uses the resolved path it checked; this check is here so that a refused cell fails before
 * anything of the run exists, and sizes the run against the filesystem the path resolves to.
 */
async function allowedTarget(target: string, scratchDir: string, budget: HostBudget): Promise<string> {
  return resolveAllowedTarget(target, [scratchDir, ...budget.allowedTargets]);
}

/** Free bytes and inodes (null where the filesystem counts none: btrfs allocates them as it goes). */
async function freeOn(dir: string): Promise<{ bytes: number; inodes: number | null }> {
  const s = await statfs(dir);
  return { bytes: s.bavail * s.bsize, inodes: s.files > 0 ? s.ffree : null };
}

async function checkNeed(need: HostNeed, scratchDir: string, budget: HostBudget, memory: () => Promise<Memory>): Promise<void> {
  switch (need.kind) {
    case 'limit': {
      const cap = budget[need.cap];
      if (need.value > cap) throw new FsbenchError('LIMIT_NOT_ALLOWED', need.refusal(cap));
      return;
    }
    case 'directory':
      await allowedTarget(need.path, scratchDir, budget);
      return;
    case 'watcher':
      listedWatcher(budget.watchers ?? { file: null, watchers: [] }, need.name);
      return;
    case 'memory': {
      const m = await memory();
      if (need.bytes > m.available) throw tooSmall(need.what, need.bytes, `this host has ${formatAmount(m.available)} to spare (${m.why})`, need.fix);
      return;
    }
    case 'space': {
      const dir = need.dir === undefined ? scratchDir : await allowedTarget(need.dir, scratchDir, budget);
      const where = dir === scratchDir ? `the scratch directory ${dir}` : dir;
      // A directory statfs cannot read is the run's to report (TARGET_UNUSABLE), in its words.
      const free = await freeOn(dir).catch(() => null);
      if (free === null) return;
      if (need.bytes > free.bytes) throw tooSmall(need.what, need.bytes, `${where} has ${formatAmount(free.bytes)} free`, need.fix);
      if (need.inodes !== undefined && free.inodes !== null && need.inodes > free.inodes) {
        throw new FsbenchError('HOST_TOO_SMALL', `${need.what} needs ${need.inodes} inodes, but ${where} has ${free.inodes} free: ${need.fix}`);
      }
      return;
    }
  }
}

/** Holds each need against this host, in order; throws at the first it cannot meet. */
export async function checkNeeds(needs: readonly HostNeed[], scratchDir: string, budget: HostBudget = DEFAULT_BUDGET): Promise<void> {
  // Read once, and only for a cell that holds memory.
  let memory: Promise<Memory> | undefined;
  const readMemory = () => (memory ??= availableMemory());
  for (const need of needs) await checkNeed(need, scratchDir, budget, readMemory);
}

/** Throws HOST_TOO_SMALL, TARGET_NOT_ALLOWED or LIMIT_NOT_ALLOWED when this host must not run the cell. */
export async function checkHostBudget(cell: Cell, scratchDir: string, budget: HostBudget = DEFAULT_BUDGET): Promise<void> {
  await checkNeeds(RUNNERS[cell.workload].hostNeeds(cell), scratchDir, budget);
}
