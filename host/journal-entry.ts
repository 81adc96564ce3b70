/**
 * What the host journal holds (host/journal.ts): the entries a run writes down before each change
 * it makes, as zod schemas that recovery checks every file it reads against, so an entry can
 * only ever name what fsbench itself changes (a known sysctl, a normalised path, a loop device,
 * an fsbench cgroup), and the envelope each entry is stored in.
 */
import path from 'node:path';
import { z } from 'zod';
import { OwnerId } from './owner-lock.js';

/**
 * The only /proc/sys files fsbench ever changes. Replay writes to nothing else, so an entry
 * cannot name `/proc/sys/../../etc/x` or a sysctl fsbench never touched (core_pattern ...).
 */
export const KNOWN_SYSCTLS = [
  '/proc/sys/fs/inotify/max_queued_events',
  '/proc/sys/fs/inotify/max_user_watches',
  '/proc/sys/fs/inotify/max_user_instances',
  '/proc/sys/fs/fanotify/max_queued_events',
] as const;
export type KnownSysctl = (typeof KNOWN_SYSCTLS)[number];

/** A path an entry may name: absolute, normalised, never `/`; where it may lie is the roots' business (journal-roots.ts). */
export const NormalPath = z
  .string()
  .max(4096)
  .refine(
    (p) => p.startsWith('/') && p !== '/' && !p.endsWith('/') && !p.includes('\0') && path.normalize(p) === p && !p.split('/').includes('..'),
    'must be a normalised absolute path other than / without .. or a trailing /',
  );

const CgroupPath = NormalPath.refine(
  (p) => /^\/sys\/fs\/cgroup(\/[\w.:@-]+)*\/fsbench-[0-9a-f]{8,32}$/.test(p),
  'must be a directory fsbench-<hex> under /sys/fs/cgroup',
);

export const JournalEntry = z.discriminatedUnion('kind', [
  /** A /proc/sys value to write back: one of the known limits, and a number, as the kernel printed it. */
  z.object({ kind: z.literal('sysctl'), path: z.enum(KNOWN_SYSCTLS), original: z.string().regex(/^\d{1,12}\n?$/, 'must be a number') }).strict(),
  /** A mount point to unmount, inside a registered root. */
  z.object({ kind: z.literal('mount'), target: NormalPath }).strict(),
  /** A loop device to detach. */
  z.object({ kind: z.literal('loop'), device: z.string().regex(/^\/dev\/loop\d+$/) }).strict(),
  /** A file or directory tree to delete, inside a registered root. */
  z.object({ kind: z.literal('path'), path: NormalPath }).strict(),
  /**
   * A memory cgroup a run made for its watcher (workloads/watches), to remove: only a directory
   * named fsbench-<hex> under /sys/fs/cgroup, and undone only where a cgroup filesystem is mounted.
   */
  z.object({ kind: z.literal('cgroup'), path: CgroupPath }).strict(),
]);
export type JournalEntry = z.infer<typeof JournalEntry>;

export const StoredEntry = z
  .object({
    pid: z.number().int(),
    bootId: z.string().max(64),
    /** The writer's pid namespace: a pid means nothing to a reader in another one (another container). */
    pidNs: z.string().max(64).optional(),
    /** The root (scratch directory or allowed target) the entry's path lies in, when it has one. */
    root: NormalPath.optional(),
    /** The writer's host id (FSBENCH_HOST_ID), for whoever reads the file; recovery goes by `owner`. */
    hostId: z.string().max(200).optional(),
    /**
     * The writer's owner lock (host/owner-lock.ts): the entry is undone only once that lock is
     * free. Absent in entries of older versions, whose writers are judged by pid alone.
     */
    owner: OwnerId.optional(),
    entry: JournalEntry,
  })
  .strict();
export type StoredEntry = z.infer<typeof StoredEntry>;

/** The path an entry names (a file tree to delete, a mount point), if it names one. */
export function entryPath(entry: JournalEntry): string | undefined {
  return entry.kind === 'path' ? entry.path : entry.kind === 'mount' ? entry.target : undefined;
}

/** A zod error as one line naming each field. */
export function issues(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.join('.') || '(entry)'}: ${i.message}`).join('; ');
}

/** An entry as a line of the log: what it changed. */
export function describe(entry: JournalEntry): string {
  switch (entry.kind) {
    case 'sysctl':
      return `${entry.path} = ${entry.original.trim()}`;
    case 'mount':
      return `mount ${entry.target}`;
    case 'loop':
      return `loop device ${entry.device}`;
    case 'path':
      return `path ${entry.path}`;
    case 'cgroup':
      return `cgroup ${entry.path}`;
  }
}
