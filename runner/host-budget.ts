/**
 * What a host lets a cell take, checked before anything of the run exists: a cell comes from
 * whoever can submit a matrix, and its parameters reach host-wide kernel limits, memory and
 * disks. `runCell` checks every cell here, for `fsbench run` and agents alike, and a refusal is a
 * `failed` run with its code, never a crash and never a host pushed into the OOM killer.
 *
 * - a tmpfs (inotify `target: tmpfs`, `container.storage: tmpfs`) lives in memory: its size
 *   against MemAvailable and the cgroup's memory headroom, minus a reserve;
 * - files on disk and filesystem images against the free space of the filesystem they land on;
 * - `maxQueuedEvents` and watches against this host's caps (the sysctls are host-wide), for
 *   fanotify its own max_queued_events, its marks and FAN_UNLIMITED_QUEUE;
 * - `target` directories, resolved, inside the scratch directory or an allowed root.
 */
import { readFile, statfs } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { FsbenchError } from '../contract/errors.js';
import type { Cell } from '../contract/matrix.js';
import { defaultValue } from '../contract/params.js';
import { formatSize } from '../contract/units.js';
import { WORKLOADS } from '../contract/workloads/index.js';
import { resolveAllowedTarget } from '../host/safe-dir.js';
import { tmpfsBytes } from '../workloads/inotify/target.js';
import { MetadataParams } from '../workloads/metadata/params.js';
import { bytesNeeded } from '../workloads/metadata/space.js';

export interface HostBudget {
  /** Directories besides the scratch directory that `target` paths may lie in (FSBENCH_ALLOWED_TARGETS). */
  readonly allowedTargets: readonly string[];
  /** Largest max_queued_events a run may set (FSBENCH_MAX_QUEUED_EVENTS). */
  readonly maxQueuedEvents: number;
  /** Most inotify watches a run may add (FSBENCH_MAX_WATCHES). */
  readonly maxWatches: number;
}

/** The settings' defaults, for callers that were given none. */
export const DEFAULT_BUDGET: HostBudget = { allowedTargets: [], maxQueuedEvents: 1_048_576, maxWatches: 131_072 };

const MiB = 1024 ** 2;
/** Memory left to the kernel, the agent and everything else on the host: a tenth, at least 256 MiB. */
const MIN_RESERVE = 256 * MiB;
/** What mkfs writes into a sparse image besides the files: XFS zeroes its log (up to 2 GiB), ext4 its tables. */
function mkfsBytes(fsSize: number): number {
  return 64 * MiB + Math.ceil(fsSize / 2048);
}

const InotifyBudgetParams = z.object({
  files: z.number().int(),
  writers: z.number().int(),
  writeBytes: z.number().int(),
  maxQueuedEvents: z.union([z.number().int(), z.literal('system')]),
  watch: z.enum(['files', 'dir']),
  target: z.string(),
  latencySampling: z.number().int(),
  backend: z.string(),
  mark: z.string(),
  fanotifyUnlimitedQueue: z.boolean(),
  'container.storage': z.string(),
});

/** The largest value FSBENCH_MAX_QUEUED_EVENTS takes: a host that sets it allows any queue. */
const UNBOUNDED_QUEUE = 2 ** 31 - 1;

/** The cell's parameters with the workload's defaults filled in, parsed by `schema`. */
function paramsOf<T extends z.ZodType>(cell: Cell, schema: T): z.output<T> {
  const withDefaults: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(WORKLOADS[cell.workload].params)) withDefaults[name] = cell.params[name] ?? defaultValue(spec);
  const r = schema.safeParse(withDefaults);
  if (!r.success) throw new FsbenchError('INTERNAL', `the cell's parameters do not match the contract: ${r.error.message}`);
  return r.data;
}

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
  let why = `MemAvailable ${human(info.MemAvailable)}`;
  const limit = await cgroupHeadroom();
  if (limit !== null && limit.headroom < free) {
    total = Math.min(total, limit.max);
    free = limit.headroom;
    why = `the memory limit of cgroup ${limit.group} (${human(limit.max)}, ${human(limit.headroom)} unused)`;
  }
  const reserve = Math.max(MIN_RESERVE, Math.round(total / 10));
  return { available: Math.max(0, free - reserve), why: `${why}, less ${human(reserve)} kept for the host` };
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

async function freeBytes(dir: string): Promise<number> {
  const s = await statfs(dir);
  return s.bavail * s.bsize;
}

/** Amounts of memory and space, to the tenth of a GiB (or MiB): the message is read, not parsed. */
function human(bytes: number): string {
  const mib = bytes / MiB;
  return mib >= 1024 ? `${(mib / 1024).toFixed(1)} GiB` : `${mib.toFixed(1)} MiB`;
}

function tooSmall(what: string, need: number, have: string, fix: string): FsbenchError {
  return new FsbenchError('HOST_TOO_SMALL', `${what} needs ${human(need)}, but ${have}: ${fix}`);
}

/**
 * Resolves a `target` path and refuses it outside the allowed roots (host/safe-dir.ts). The
 * workload resolves and checks it again against its journal's roots (the same ones) and uses
 * the resolved path it checked; this check is here so that a refused cell fails before
 * anything of the run exists, and sizes the run against the filesystem the path resolves to.
 */
async function allowedTarget(target: string, scratchDir: string, budget: HostBudget): Promise<string> {
  return resolveAllowedTarget(target, [scratchDir, ...budget.allowedTargets]);
}

async function checkInotify(cell: Cell, scratchDir: string, budget: HostBudget): Promise<void> {
  const p = paramsOf(cell, InotifyBudgetParams);
  const fanotify = p.backend === 'fanotify';
  const markers = (p.backend === 'inotify' || fanotify) && p.latencySampling > 0 ? p.writers : 0;
  const sysctl = fanotify ? 'fs.fanotify.max_queued_events' : 'fs.inotify.max_queued_events';
  if (p.maxQueuedEvents !== 'system' && p.maxQueuedEvents > budget.maxQueuedEvents) {
    throw new FsbenchError(
      'LIMIT_NOT_ALLOWED',
      `maxQueuedEvents ${p.maxQueuedEvents} is above the ${budget.maxQueuedEvents} this host allows on its host-wide ` +
        `${sysctl} (FSBENCH_MAX_QUEUED_EVENTS): ask for less, or raise the cap on the host`,
    );
  }
  // No limit at all: the queue grows with whatever the writers outpace, in kernel memory.
  if (fanotify && p.fanotifyUnlimitedQueue && budget.maxQueuedEvents < UNBOUNDED_QUEUE) {
    throw new FsbenchError(
      'LIMIT_NOT_ALLOWED',
      `fanotifyUnlimitedQueue lets the kernel queue events without bound, above the ${budget.maxQueuedEvents} this host ` +
        `allows (FSBENCH_MAX_QUEUED_EVENTS): use maxQueuedEvents instead, or set the cap to ${UNBOUNDED_QUEUE} on the host to allow it`,
    );
  }
  // fanotify's inode marks are its per-file watches (fs.fanotify.max_user_marks); one mark otherwise.
  const perFile = fanotify ? p.mark === 'inode' : p.watch === 'files';
  const watches = perFile ? p.files + markers : 1;
  if (watches > budget.maxWatches) {
    const what = fanotify ? 'fanotify marks' : 'inotify watches';
    throw new FsbenchError(
      'LIMIT_NOT_ALLOWED',
      `the run needs ${watches} ${what} (files + latency markers), above the ${budget.maxWatches} this host allows ` +
        `(FSBENCH_MAX_WATCHES): use fewer files or ${fanotify ? 'mark: dir' : 'watch: dir'}, or raise the cap on the host`,
    );
  }
  const target = p.target === 'tmpfs' ? null : await allowedTarget(p.target, scratchDir, budget);
  if (target === null || p['container.storage'] === 'tmpfs') {
    const need = tmpfsBytes(p.files + markers, p.writeBytes);
    const memory = await availableMemory();
    if (need > memory.available) {
      throw tooSmall(
        `a tmpfs for ${p.files + markers} files of ${formatSize(p.writeBytes)} writes`,
        need,
        `this host has ${human(memory.available)} to spare (${memory.why})`,
        'lower files or writeBytes, or use a target directory on disk',
      );
    }
  } else {
    const need = (p.files + markers) * Math.ceil(Math.max(1, p.writeBytes) / 4096) * 4096;
    const free = await freeBytes(target);
    if (need > free) {
      throw tooSmall(`${p.files + markers} files of ${formatSize(p.writeBytes)}`, need, `${target} has ${human(free)} free`, 'lower files or writeBytes');
    }
  }
}

async function checkMetadata(cell: Cell, scratchDir: string, budget: HostBudget): Promise<void> {
  const p = paramsOf(cell, MetadataParams);
  // 4 KiB blocks and 512-byte inodes: what mkfs picks unless told otherwise, and no less than any choice costs.
  const files = bytesNeeded(p, 4096, p.inodeSize ?? 512);
  if (p.fs === 'none') {
    const dir = p.target === 'scratch' ? scratchDir : await allowedTarget(p.target, scratchDir, budget);
    const free = await freeBytes(dir).catch(() => Infinity);
    if (files > free) {
      throw tooSmall(`${p.dirs} x ${p.filesPerDir} files of ${formatSize(p.fileSize)}`, files, `${dir} has ${human(free)} free`, 'lower dirs, filesPerDir or fileSize');
    }
    return;
  }
  // The image is sparse: it grows by what mkfs and the files write, never past fsSize.
  const image = Math.min(p.fsSize, files + mkfsBytes(p.fsSize));
  const free = await freeBytes(scratchDir).catch(() => Infinity);
  if (image > free) {
    throw tooSmall(
      `the sparse ${p.fs} image (fsSize ${formatSize(p.fsSize)}; mkfs's metadata and ${p.dirs} x ${p.filesPerDir} files of ${formatSize(p.fileSize)})`,
      image,
      `the scratch directory ${scratchDir} has ${human(free)} free`,
      'lower dirs, filesPerDir or fileSize (or fsSize), or give the host a larger scratch filesystem',
    );
  }
}

/** Throws HOST_TOO_SMALL, TARGET_NOT_ALLOWED or LIMIT_NOT_ALLOWED when this host must not run the cell. */
export async function checkHostBudget(cell: Cell, scratchDir: string, budget: HostBudget = DEFAULT_BUDGET): Promise<void> {
  switch (cell.workload) {
    case 'inotify':
      return checkInotify(cell, scratchDir, budget);
    case 'metadata':
      return checkMetadata(cell, scratchDir, budget);
    case 'noop':
      return;
  }
}
