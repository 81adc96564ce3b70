/**
 * The journal of everything a run changes on the host: kernel limits, mounts, loop devices,
 * scratch files. Each change is written down (and fsynced) *before* it is made, so whatever
 * kills a run, the next start of fsbench on this host finds the entries and undoes them.
 *
 * This module owns that state; workloads go through `Teardown`, never around it.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { constants as fsConstants, promises as fs } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { z } from 'zod';
import { FsbenchError } from '../contract/errors.js';
import { readBootId, readMounts } from './kernel.js';

const exec = promisify(execFile);

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

/** Written into a scratch directory when a journal is opened for it: what makes a root a scratch root. */
export const SCRATCH_MARKER = '.fsbench-scratch';
/** Where refused entries are kept for a person to look at, never replayed. */
export const REFUSED_DIR = 'refused';

const NormalPath = z
  .string()
  .max(4096)
  .refine(
    (p) => p.startsWith('/') && p !== '/' && !p.endsWith('/') && !p.includes('\0') && path.normalize(p) === p && !p.split('/').includes('..'),
    'must be a normalised absolute path other than / without .. or a trailing /',
  );

export const JournalEntry = z.discriminatedUnion('kind', [
  /** A /proc/sys value to write back: one of the known limits, and a number, as the kernel printed it. */
  z.object({ kind: z.literal('sysctl'), path: z.enum(KNOWN_SYSCTLS), original: z.string().regex(/^\d{1,12}\n?$/, 'must be a number') }).strict(),
  /** A mount point to unmount, inside a scratch root. */
  z.object({ kind: z.literal('mount'), target: NormalPath }).strict(),
  /** A loop device to detach. */
  z.object({ kind: z.literal('loop'), device: z.string().regex(/^\/dev\/loop\d+$/) }).strict(),
  /** A file or directory tree to delete, inside a scratch root. */
  z.object({ kind: z.literal('path'), path: NormalPath }).strict(),
]);
export type JournalEntry = z.infer<typeof JournalEntry>;

const StoredEntry = z
  .object({
    pid: z.number().int(),
    bootId: z.string().max(64),
    /** The writer's pid namespace: a pid means nothing to a reader in another one (another container). */
    pidNs: z.string().max(64).optional(),
    /** The scratch root (or allowed target root) the entry's path lies in, when it has one. */
    root: NormalPath.optional(),
    /**
     * The writer's host id: agents simulating several hosts on one kernel (FSBENCH_HOST_ID) may
     * share a journal, and one host's lock says nothing about another's runs.
     */
    hostId: z.string().max(200).optional(),
    entry: JournalEntry,
  })
  .strict();
type StoredEntry = z.infer<typeof StoredEntry>;

/** The kernel's boot id: journal entries from another boot describe changes that are gone. */
export async function currentBootId(): Promise<string> {
  return (await readBootId()) ?? 'unknown';
}

async function pidNamespace(): Promise<string | undefined> {
  return fs.readlink('/proc/self/ns/pid').catch(() => undefined);
}

/** Whether a process of this pid namespace is alive (EPERM: alive, someone else's). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function sleep(ms: number): Promise<void> {
  await new Promise((r) => setTimeout(r, ms));
}

/** Undoes one change. Idempotent: undoing what is already gone succeeds. */
export async function undo(entry: JournalEntry): Promise<void> {
  switch (entry.kind) {
    case 'sysctl':
      await fs.writeFile(entry.path, entry.original);
      return;
    case 'mount': {
      for (let attempt = 0; ; attempt++) {
        const mounted = (await readMounts()).some((m) => m.point === entry.target);
        if (!mounted) return;
        try {
          // A process that just exited may still hold the mount busy for a moment.
          await exec('umount', attempt < 20 ? [entry.target] : ['-l', entry.target]);
          return;
        } catch (err) {
          if (attempt >= 20) throw err;
          await sleep(50);
        }
      }
    }
    case 'loop': {
      const { stdout } = await exec('losetup', ['-a']).catch(() => ({ stdout: '' }));
      if (!stdout.split('\n').some((l) => l.startsWith(`${entry.device}:`))) return;
      await exec('losetup', ['-d', entry.device]);
      return;
    }
    case 'path':
      await fs.rm(entry.path, { recursive: true, force: true });
      return;
  }
}

function entryPath(entry: JournalEntry): string | undefined {
  return entry.kind === 'path' ? entry.path : entry.kind === 'mount' ? entry.target : undefined;
}

function strictlyInside(p: string, root: string): boolean {
  return p.startsWith(`${root}/`);
}

function issues(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.join('.') || '(entry)'}: ${i.message}`).join('; ');
}

export interface JournalOptions {
  /**
   * The scratch directory of the runs that write here (default: the journal directory's parent,
   * the layout where the journal lives inside the scratch directory). It gets a marker file, so a
   * journal shared by agents with separate scratch directories accepts each other's entries.
   */
  readonly scratch?: string;
  /** Further directories runs may make their directories in (FSBENCH_ALLOWED_TARGETS). */
  readonly targets?: readonly string[];
  /** The host id of the agent writing (see StoredEntry.hostId); none outside an agent. */
  readonly hostId?: string;
}

export class Journal {
  private constructor(
    readonly dir: string,
    private readonly bootId: string,
    private readonly pidNs: string | undefined,
    /** Lexical and resolved forms of every root this journal's runs write in. */
    private readonly roots: readonly string[],
    private readonly hostId: string | undefined,
  ) {}

  /** Opens (creating if needed) the journal directory, and marks the scratch directory as one. */
  static async open(dir: string, options: JournalOptions = {}): Promise<Journal> {
    await fs.mkdir(dir, { recursive: true });
    const scratch = path.resolve(options.scratch ?? path.dirname(dir));
    await fs.mkdir(scratch, { recursive: true });
    await fs.writeFile(path.join(scratch, SCRATCH_MARKER), 'fsbench scratch directory: journal entries may name paths in it\n');
    const roots = new Set<string>();
    for (const root of [scratch, ...(options.targets ?? []).map((t) => path.resolve(t))]) {
      if (root === '/') continue;
      roots.add(root);
      roots.add(await fs.realpath(root).catch(() => root));
    }
    return new Journal(dir, await currentBootId(), await pidNamespace(), [...roots], options.hostId);
  }

  /** The root `p` lies strictly inside, among this journal's roots. */
  private rootOf(p: string): string | undefined {
    return this.roots.find((r) => strictlyInside(p, r));
  }

  /**
   * Writes an entry down durably and returns its handle. An entry replay would refuse is never
   * written: a bug, or a run container asking for something it must not.
   */
  async record(entry: JournalEntry): Promise<string> {
    const parsed = JournalEntry.safeParse(entry);
    if (!parsed.success) throw new FsbenchError('INTERNAL', `refusing to journal ${JSON.stringify(entry)}: ${issues(parsed.error)}`);
    const p = entryPath(parsed.data);
    const root = p === undefined ? undefined : this.rootOf(p);
    if (p !== undefined && root === undefined) {
      throw new FsbenchError('INTERNAL', `refusing to journal ${p}: it is outside the scratch directory and the allowed targets (${this.roots.join(', ')})`);
    }
    const stored: StoredEntry = {
      pid: process.pid,
      bootId: this.bootId,
      ...(this.pidNs ? { pidNs: this.pidNs } : {}),
      ...(root ? { root } : {}),
      ...(this.hostId === undefined ? {} : { hostId: this.hostId }),
      entry: parsed.data,
    };
    // Unique across agents sharing the directory (pids repeat across containers, the UUID does not); O_EXCL never overwrites.
    const file = path.join(this.dir, `${Date.now()}-${process.pid}-${randomUUID()}.json`);
    const handle = await fs.open(file, fsConstants.O_CREAT | fsConstants.O_WRONLY | fsConstants.O_EXCL);
    try {
      await handle.writeFile(JSON.stringify(stored));
      await handle.sync();
    } finally {
      await handle.close();
    }
    return file;
  }

  async forget(handle: string): Promise<void> {
    await fs.rm(handle, { force: true });
  }

  /**
   * Why a parsed entry's path must not be touched, or undefined when it may: it must lie in a
   * scratch root (this journal's, or one another agent marked), also once symlinks are resolved.
   */
  private async refusal(stored: StoredEntry): Promise<string | undefined> {
    const p = entryPath(stored.entry);
    if (p === undefined) return undefined;
    const root = stored.root ?? this.rootOf(p);
    if (root === undefined) return `${p} is outside the scratch directory (${this.roots.join(', ')})`;
    if (!strictlyInside(p, root)) return `${p} is outside its root ${root}`;
    if (!this.roots.includes(root)) {
      const marker = await fs.lstat(path.join(root, SCRATCH_MARKER)).catch(() => null);
      if (!marker?.isFile()) return `${root} is neither this agent's scratch directory nor marked as another's (${SCRATCH_MARKER})`;
    }
    // Symlinks in the parent must not lead out of the root; a parent that is gone leaves nothing to undo.
    const realParent = await fs.realpath(path.dirname(p)).catch(() => null);
    if (realParent === null) return undefined;
    const lexicalRoot = root;
    const realRoot = await fs.realpath(lexicalRoot).catch(() => lexicalRoot);
    if (realParent !== realRoot && !strictlyInside(realParent, realRoot)) return `${p} resolves to ${realParent}, outside ${realRoot}`;
    return undefined;
  }

  /** Moves a refused entry aside: never replayed, kept for whoever wants to know who wrote it. */
  private async quarantine(file: string): Promise<void> {
    const dir = path.join(this.dir, REFUSED_DIR);
    await fs.mkdir(dir, { recursive: true });
    await fs.rename(file, path.join(dir, path.basename(file))).catch(() => fs.rm(file, { force: true }));
  }

  /**
   * Undoes the entries left by processes that are gone, newest first, after checking each
   * (known sysctls with numbers, paths inside a scratch root): a refused entry is moved to
   * `refused/` and reported, never executed. Of an earlier boot only `path` entries are undone:
   * its mounts, loop devices and limits went with it, its files did not. Returns a line per
   * entry for the log.
   */
  async recover(options: RecoverOptions = {}): Promise<string[]> {
    const names = (await fs.readdir(this.dir)).filter((n) => n.endsWith('.json')).sort().reverse();
    const done: string[] = [];
    for (const name of names) {
      const file = path.join(this.dir, name);
      let raw: unknown;
      try {
        raw = JSON.parse(await fs.readFile(file, 'utf8'));
      } catch {
        // A torn write from a crash in the middle of record(): nothing was changed after it.
        await fs.rm(file, { force: true });
        continue;
      }
      const parsed = StoredEntry.safeParse(raw);
      if (!parsed.success) {
        await this.quarantine(file);
        done.push(`refused ${name}: ${issues(parsed.error)}`);
        continue;
      }
      const stored = parsed.data;
      const sameBoot = stored.bootId === this.bootId;
      if (sameBoot && !this.ownerGone(stored, options)) continue;
      const wanted = options.kinds?.includes(stored.entry.kind) ?? true;
      const undoable = wanted && (sameBoot || stored.entry.kind === 'path');
      if (!undoable) {
        await fs.rm(file, { force: true });
        if (wanted) done.push(`dropped (earlier boot) ${describe(stored.entry)}`);
        continue;
      }
      const why = await this.refusal(stored);
      if (why !== undefined) {
        await this.quarantine(file);
        done.push(`refused ${name}: ${why}`);
        continue;
      }
      await undo(stored.entry);
      await fs.rm(file, { force: true });
      done.push(`${sameBoot ? 'undid' : 'undid (earlier boot)'} ${describe(stored.entry)}`);
    }
    return done;
  }

  private ownerGone(stored: StoredEntry, options: RecoverOptions): boolean {
    if (options.ownersGone === true) return true;
    const sameNs = stored.pidNs === undefined || this.pidNs === undefined || stored.pidNs === this.pidNs;
    // Another container's pid says nothing here; under the host lock no other run of this host
    // is going on, but the run of another (simulated) host on this kernel may be.
    if (!sameNs) return options.holdsHostLock === true && (stored.hostId === undefined || stored.hostId === this.hostId);
    return stored.pid === process.pid || !processAlive(stored.pid);
  }
}

export interface RecoverOptions {
  /**
   * The writers are known to be gone (for example a removed container, whose pids belong to
   * another namespace): do not ask whether their pids are alive.
   */
  readonly ownersGone?: boolean;
  /**
   * The caller holds the host lock, so no other agent of this host is measuring: entries of this
   * host written from another pid namespace (an agent in another container sharing the journal)
   * are a dead run's.
   */
  readonly holdsHostLock?: boolean;
  /** Undo only these kinds; entries of other kinds are dropped (what they changed went with their writer). */
  readonly kinds?: readonly JournalEntry['kind'][];
}

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
  }
}

/**
 * The changes one run makes, undone in reverse order by `dispose()` whatever happened. Each
 * change is journaled before it is made and forgotten only once it has been undone.
 */
export class Teardown {
  private readonly stack: { entry: JournalEntry; handle: string }[] = [];

  constructor(private readonly journal: Journal) {}

  /** Journals `entry`, then makes the change; if making it fails, undoes whatever part of it happened. */
  async add<T>(entry: JournalEntry, make: () => Promise<T>): Promise<T> {
    const handle = await this.journal.record(entry);
    this.stack.push({ entry, handle });
    return make();
  }

  /** Undoes every change, newest first; reports every failure together after trying them all. */
  async dispose(): Promise<void> {
    const failures: string[] = [];
    while (this.stack.length > 0) {
      const item = this.stack.pop();
      if (!item) break;
      try {
        await undo(item.entry);
        await this.journal.forget(item.handle);
      } catch (err) {
        failures.push(`${describe(item.entry)}: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    if (failures.length > 0) {
      throw new FsbenchError(
        'INTERNAL',
        `could not undo every change of the run (the next start retries from the journal): ${failures.join('; ')}`,
      );
    }
  }
}
