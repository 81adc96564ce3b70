/**
 * The journal of everything a run changes on the host: kernel limits, mounts, loop devices,
 * scratch files. Each change is written down (and fsynced) *before* it is made, so whatever
 * kills a run, the next start of fsbench on this host finds the entries and undoes them.
 *
 * Who may be trusted, and when (see docs/operating.md, "The host journal"):
 * - the journal and scratch directories are checked at open (host/safe-dir.ts): only root (or
 *   the user fsbench runs as) can write in them, so an entry or a registered root found there
 *   was written by an fsbench of this host, never planted by another local user;
 * - an entry is undone only once its writer is provably gone: every open Journal holds an
 *   exclusive flock on a file of its own (host/owner-lock.ts) and names it in its entries, so a
 *   live run's entries are never undone, whoever holds the Redis host lock;
 * - an entry may only name paths under a registered root (a scratch directory or allowed target
 *   of a journal opened here), and is undone without following a symlink (host/hostfs.ts).
 *
 * This module owns that state; workloads go through `Teardown`, never around it.
 */
import { execFile } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { constants as fsConstants, promises as fs } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { z } from 'zod';
import { errnoOf, FsbenchError, messageOf } from '../contract/errors.js';
import { HostfsRefusal, removeBeneath, unmountBeneath } from './hostfs.js';
import { readBootId, readMounts } from './kernel.js';
import { OwnerId, OwnerLock, ownersHeld, reapOwnerLocks, takeRecoveryLock } from './owner-lock.js';
import { checkNoSymlinks, checkSafeDir, ensureSafeDir, JOURNAL_PURPOSE, SCRATCH_PURPOSE, writeOwnFile } from './safe-dir.js';

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

/**
 * Written into a scratch directory when a journal is opened for it, saying what the directory is
 * for. Only a label: which directories entries may name is in ROOTS_DIR, inside the journal.
 */
export const SCRATCH_MARKER = '.fsbench-scratch';
/** Where refused entries are kept for a person to look at, never replayed. */
export const REFUSED_DIR = 'refused';
/**
 * The registry of roots, inside the journal directory: each Journal.open registers its scratch
 * directory and allowed targets there, so that agents sharing the journal (each with its own
 * scratch directory) undo each other's entries, and nothing outside a registered root.
 */
export const ROOTS_DIR = 'roots';

const NormalPath = z
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

const StoredEntry = z
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
type StoredEntry = z.infer<typeof StoredEntry>;

/** What a root is: a scratch directory (held to the ownership rules) or an allowed target. */
type RootKind = 'scratch' | 'target';
const RegisteredRoot = z.object({ root: NormalPath, kind: z.enum(['scratch', 'target']) }).strict();

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
    return errnoOf(err) === 'EPERM';
  }
}

async function sleep(ms: number): Promise<void> {
  await new Promise((r) => setTimeout(r, ms));
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


/** The root among `roots` that `p` lies strictly inside, the deepest one when they nest. */
function deepestRoot(p: string, roots: Iterable<string>): string | undefined {
  let best: string | undefined;
  for (const r of roots) if (strictlyInside(p, r) && (best === undefined || r.length > best.length)) best = r;
  return best;
}

/**
 * Why the directories from `root` down to `p`'s parent are not all there as real directories
 * (a missing one, a symlink), or undefined when they are. The removal itself never follows a
 * symlink either; this only refuses such an entry with a reason instead of acting on it.
 */
async function parentRefusal(p: string, root: string): Promise<string | undefined> {
  const parts = path.relative(root, path.dirname(p)).split('/').filter((x) => x !== '');
  let q = root;
  for (const part of parts) {
    q = path.join(q, part);
    const st = await fs.lstat(q).catch(() => null);
    if (st === null) return `its parent directory ${q} is missing`;
    if (st.isSymbolicLink()) return `${p} is reached through a symlink, ${q}`;
    if (!st.isDirectory()) return `${q} on its way is not a directory`;
  }
  return undefined;
}

/** The name of a root's registration: one file per root and kind, whoever registers it. */
function registrationName(root: string, kind: RootKind): string {
  return `${createHash('sha256').update(`${kind}\0${root}`).digest('hex').slice(0, 32)}.json`;
}

async function registerRoots(journalDir: string, roots: ReadonlyMap<string, RootKind>): Promise<void> {
  const dir = path.join(journalDir, ROOTS_DIR);
  await fs.mkdir(dir, { mode: 0o700 }).catch((err: unknown) => {
    if (!(err instanceof Error && 'code' in err && err.code === 'EEXIST')) throw err;
  });
  for (const [root, kind] of roots) await writeOwnFile(dir, registrationName(root, kind), `${JSON.stringify({ root, kind })}\n`);
}

/** Every root registered in the journal directory (unreadable or malformed registrations are skipped). */
async function registeredRoots(journalDir: string): Promise<Map<string, RootKind>> {
  const dir = path.join(journalDir, ROOTS_DIR);
  const roots = new Map<string, RootKind>();
  for (const name of await fs.readdir(dir).catch(() => [] as string[])) {
    if (!name.endsWith('.json')) continue;
    let raw: unknown;
    try {
      const handle = await fs.open(path.join(dir, name), fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
      try {
        raw = JSON.parse(await handle.readFile('utf8'));
      } finally {
        await handle.close();
      }
    } catch {
      continue;
    }
    const r = RegisteredRoot.safeParse(raw);
    // A path registered as a scratch directory by anyone is held to the stricter rules.
    if (r.success && roots.get(r.data.root) !== 'scratch') roots.set(r.data.root, r.data.kind);
  }
  return roots;
}

export interface JournalOptions {
  /**
   * The scratch directory of the runs that write here (default: the journal directory's parent,
   * the layout where the journal lives inside the scratch directory). It is checked (and made,
   * mode 0700) like the journal directory, and registered in the journal as a root.
   */
  readonly scratch?: string;
  /** Further directories runs may make their directories in (FSBENCH_ALLOWED_TARGETS). */
  readonly targets?: readonly string[];
  /** The host id of the agent writing (see StoredEntry.hostId); none outside an agent. */
  readonly hostId?: string;
}

export interface RecoverOptions {
  /**
   * The writers of entries *without* an owner lock (older versions) are known to be gone (a
   * removed container, whose pids belong to another namespace). Entries with an owner lock are
   * judged by that lock, whatever this says.
   */
  readonly ownersGone?: boolean;
  /** Undo only these kinds; entries of other kinds are dropped (what they changed went with their writer). */
  readonly kinds?: readonly JournalEntry['kind'][];
}

export class Journal {
  /** Entry files of this journal that a Teardown still holds: never undone by this journal's own recovery. */
  private readonly active = new Set<string>();
  private closed = false;

  private constructor(
    readonly dir: string,
    /** The scratch directory, checked and free of symlinks. */
    readonly scratch: string,
    private readonly bootId: string,
    private readonly pidNs: string | undefined,
    /** Every root this journal's runs write in: the scratch directory, and each target in its lexical and resolved forms. */
    private readonly roots: ReadonlyMap<string, RootKind>,
    private readonly hostId: string | undefined,
    private readonly lock: OwnerLock,
  ) {}

  /**
   * Opens (creating if needed) the journal directory and the scratch directory, after checking
   * that only root (or this user) controls them (DIRECTORY_UNSAFE otherwise), marks the scratch
   * directory, registers the roots, and takes this writer's owner lock. Close it with close().
   */
  static async open(dir: string, options: JournalOptions = {}): Promise<Journal> {
    // The scratch directory first: in the default layout the journal lives inside it.
    const scratch = await ensureSafeDir(options.scratch ?? path.dirname(path.resolve(dir)), SCRATCH_PURPOSE);
    const journalDir = await ensureSafeDir(dir, JOURNAL_PURPOSE);
    await writeOwnFile(scratch, SCRATCH_MARKER, 'fsbench scratch directory: runs make their files and mounts here\n', 0o644);
    const roots = new Map<string, RootKind>([[scratch, 'scratch']]);
    for (const t of options.targets ?? []) {
      const lexical = path.resolve(t);
      if (lexical === '/') continue;
      if (!roots.has(lexical)) roots.set(lexical, 'target');
      const real = await fs.realpath(lexical).catch(() => lexical);
      if (real !== '/' && !roots.has(real)) roots.set(real, 'target');
    }
    await registerRoots(journalDir, roots);
    // Lock files of owners killed before they could remove their own; best effort.
    await reapOwnerLocks(journalDir).catch(() => undefined);
    const lock = await OwnerLock.hold(journalDir);
    return new Journal(journalDir, scratch, await currentBootId(), await pidNamespace(), roots, options.hostId, lock);
  }

  /** The scratch directory and the allowed targets: where a run's directories may be made. */
  get allowedRoots(): readonly string[] {
    return [...this.roots.keys()];
  }

  /**
   * Lets go of the owner lock: from now on this journal's entries still on disk are a dead
   * run's, for the next recovery to undo. Writing afterwards is refused.
   */
  async close(): Promise<void> {
    this.closed = true;
    await this.lock.release();
  }

  private assertOpen(): void {
    if (this.closed) throw new FsbenchError('INTERNAL', `the journal ${this.dir} is closed`);
  }

  /**
   * Writes an entry down durably and returns its handle. An entry replay would refuse is never
   * written: a bug, or a run container asking for something it must not.
   */
  async record(entry: JournalEntry): Promise<string> {
    this.assertOpen();
    const parsed = JournalEntry.safeParse(entry);
    if (!parsed.success) throw new FsbenchError('INTERNAL', `refusing to journal ${JSON.stringify(entry)}: ${issues(parsed.error)}`);
    const p = entryPath(parsed.data);
    const root = p === undefined ? undefined : deepestRoot(p, this.roots.keys());
    if (p !== undefined && root === undefined) {
      throw new FsbenchError('INTERNAL', `refusing to journal ${p}: it is outside the scratch directory and the allowed targets (${this.allowedRoots.join(', ')})`);
    }
    const stored: StoredEntry = {
      pid: process.pid,
      bootId: this.bootId,
      ...(this.pidNs ? { pidNs: this.pidNs } : {}),
      ...(root ? { root } : {}),
      ...(this.hostId === undefined ? {} : { hostId: this.hostId }),
      owner: this.lock.id,
      entry: parsed.data,
    };
    // Unique across agents sharing the directory (pids repeat across containers, the UUID does not); O_EXCL never overwrites, O_NOFOLLOW never writes through a link.
    const file = path.join(this.dir, `${Date.now()}-${process.pid}-${randomUUID()}.json`);
    const handle = await fs.open(file, fsConstants.O_CREAT | fsConstants.O_WRONLY | fsConstants.O_EXCL | fsConstants.O_NOFOLLOW, 0o600);
    try {
      await handle.writeFile(JSON.stringify(stored));
      await handle.sync();
    } finally {
      await handle.close();
    }
    this.active.add(file);
    return file;
  }

  /** The change is undone: its entry goes. */
  async forget(handle: string): Promise<void> {
    await fs.rm(handle, { force: true });
    this.active.delete(handle);
  }

  /** The run let go of a change it could not undo: the entry stays, for this journal's next recovery to retry. */
  release(handle: string): void {
    this.active.delete(handle);
  }

  /** Undoes one change of this journal's runs (Teardown). Idempotent: undoing what is already gone succeeds. */
  async undo(entry: JournalEntry): Promise<void> {
    const p = entryPath(entry);
    await undoAt(entry, p === undefined ? undefined : deepestRoot(p, this.roots.keys()));
  }

  /** This journal's roots and every root registered in its directory. */
  private async trustedRoots(): Promise<Map<string, RootKind>> {
    const all = await registeredRoots(this.dir);
    for (const [root, kind] of this.roots) if (all.get(root) !== 'scratch') all.set(root, kind);
    return all;
  }

  /**
   * Why a parsed entry's path must not be touched, or undefined when it may: it must lie in a
   * registered root that still passes its checks (a scratch directory only root or this user
   * controls, a target reached without symlinks), under a parent that exists, with no symlink
   * on the way down from the root.
   */
  private async refusal(stored: StoredEntry, roots: ReadonlyMap<string, RootKind>, checked: Map<string, string | undefined>): Promise<string | undefined> {
    const p = entryPath(stored.entry);
    if (p === undefined) return undefined;
    const list = [...roots.keys()].join(', ');
    let root: string;
    if (stored.root !== undefined) {
      if (!roots.has(stored.root)) return `${stored.root} is not a root registered in this journal (${list})`;
      root = stored.root;
    } else {
      const found = deepestRoot(p, roots.keys());
      if (found === undefined) return `${p} is outside the scratch directories and allowed targets registered in this journal (${list})`;
      root = found;
    }
    if (!strictlyInside(p, root)) return `${p} is outside its root ${root}`;
    if (!checked.has(root)) {
      checked.set(root, roots.get(root) === 'scratch' ? await checkSafeDir(root, SCRATCH_PURPOSE) : await checkNoSymlinks(root));
    }
    const unsafe = checked.get(root);
    if (unsafe !== undefined) return `its root ${root} is not safe to act in: ${unsafe}`;
    return parentRefusal(p, root);
  }

  /** Moves a refused entry aside: never replayed, kept for whoever wants to know who wrote it. */
  private async quarantine(file: string): Promise<void> {
    const dir = path.join(this.dir, REFUSED_DIR);
    await fs.mkdir(dir, { mode: 0o700 }).catch(() => undefined);
    await fs.rename(file, path.join(dir, path.basename(file))).catch(() => fs.rm(file, { force: true }));
  }

  /**
   * Undoes the entries left by writers that are gone, newest first, after checking each (known
   * sysctls with numbers, paths inside a registered root): a refused entry is moved to
   * `refused/` and reported, never executed. A writer is gone when its owner lock is free,
   * whoever holds the host lock in Redis; this journal's own entries count as gone once no
   * Teardown holds them. Of an earlier boot only `path` entries are undone: its mounts, loop
   * devices and limits went with it, its files did not. Returns a line per entry for the log.
   */
  async recover(options: RecoverOptions = {}): Promise<string[]> {
    this.assertOpen();
    const names = (await fs.readdir(this.dir)).filter((n) => n.endsWith('.json')).sort().reverse();
    const entries: { name: string; file: string; stored: StoredEntry }[] = [];
    const done: string[] = [];
    for (const name of names) {
      const file = path.join(this.dir, name);
      let raw: unknown;
      try {
        const handle = await fs.open(file, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
        try {
          raw = JSON.parse(await handle.readFile('utf8'));
        } finally {
          await handle.close();
        }
      } catch (err) {
        // Gone meanwhile (its writer forgot it), or a torn write from a crash in the middle of record(): nothing was changed after it.
        if (errnoOf(err) !== 'ENOENT') await fs.rm(file, { force: true });
        continue;
      }
      const parsed = StoredEntry.safeParse(raw);
      if (!parsed.success) {
        await this.quarantine(file);
        done.push(`refused ${name}: ${issues(parsed.error)}`);
        continue;
      }
      entries.push({ name, file, stored: parsed.data });
    }
    if (entries.length === 0) return done;
    const others = entries.flatMap((e) => (e.stored.owner !== undefined && e.stored.owner !== this.lock.id ? [e.stored.owner] : []));
    const held = others.length > 0 ? await ownersHeld(this.dir, others) : new Map<string, boolean>();
    const gone = entries.filter(({ file, stored }) => stored.bootId !== this.bootId || this.writerGone(stored, file, held, options));
    if (gone.length === 0) return done;
    const serial = await takeRecoveryLock(this.dir);
    try {
      done.push(...(await this.undoGone(gone, options)));
    } finally {
      await serial.release();
    }
    return done;
  }

  /**
   * Undoes entries whose writers are gone, holding the recovery lock: an entry another recovery
   * undid while this one waited for the lock has no file any more, and is left alone.
   */
  private async undoGone(gone: readonly { name: string; file: string; stored: StoredEntry }[], options: RecoverOptions): Promise<string[]> {
    const done: string[] = [];
    const roots = await this.trustedRoots();
    const checked = new Map<string, string | undefined>();
    for (const { name, file, stored } of gone) {
      if (!(await fs.lstat(file).then(() => true, () => false))) continue;
      const sameBoot = stored.bootId === this.bootId;
      const wanted = options.kinds?.includes(stored.entry.kind) ?? true;
      const undoable = wanted && (sameBoot || stored.entry.kind === 'path');
      if (!undoable) {
        await fs.rm(file, { force: true });
        if (wanted) done.push(`dropped (earlier boot) ${describe(stored.entry)}`);
        continue;
      }
      const why = await this.refusal(stored, roots, checked);
      if (why !== undefined) {
        await this.quarantine(file);
        done.push(`refused ${name}: ${why}`);
        continue;
      }
      const p = entryPath(stored.entry);
      try {
        await undoAt(stored.entry, p === undefined ? undefined : (stored.root ?? deepestRoot(p, roots.keys())));
      } catch (err) {
        // The path crossed a symlink or a mount after all (changed since the check): never acted on.
        if (!(err instanceof HostfsRefusal)) throw err;
        await this.quarantine(file);
        done.push(`refused ${name}: ${err.message}`);
        continue;
      }
      await fs.rm(file, { force: true });
      this.active.delete(file);
      done.push(`${sameBoot ? 'undid' : 'undid (earlier boot)'} ${describe(stored.entry)}`);
    }
    return done;
  }

  /** Whether the writer of an entry of this boot is provably gone. */
  private writerGone(stored: StoredEntry, file: string, held: ReadonlyMap<string, boolean>, options: RecoverOptions): boolean {
    if (stored.owner !== undefined) {
      // Our own: gone unless a run of ours still holds it (a change its teardown could not undo is let go).
      if (stored.owner === this.lock.id) return !this.active.has(file);
      return held.get(stored.owner) === false;
    }
    // An older version's entry, without an owner lock: only a pid of this very namespace says anything.
    if (options.ownersGone === true) return true;
    if (stored.pidNs !== this.pidNs) return false;
    // We never write such entries: one with our pid is an earlier process's whose pid was reused.
    return stored.pid === process.pid || !processAlive(stored.pid);
  }
}

/** Undoes one change inside `root` (for paths and mounts). Idempotent: undoing what is already gone succeeds. */
async function undoAt(entry: JournalEntry, root: string | undefined): Promise<void> {
  switch (entry.kind) {
    case 'sysctl': {
      // A value that never changed (the write was refused: no root, a read-only /proc/sys) or
      // was put back already has nothing to undo; writing it would fail for the same reason.
      const now = await fs.readFile(entry.path, 'utf8').catch(() => null);
      if (now !== null && now.trim() === entry.original.trim()) return;
      await fs.writeFile(entry.path, entry.original);
      return;
    }
    case 'mount': {
      if (root === undefined) throw new FsbenchError('INTERNAL', `${entry.target} lies in no root of the journal`);
      for (let attempt = 0; ; attempt++) {
        const mounted = (await readMounts()).some((m) => m.point === entry.target);
        if (!mounted) return;
        try {
          // A process that just exited may still hold the mount busy for a moment: detach it at last.
          await unmountBeneath(root, entry.target, attempt >= 20);
          return;
        } catch (err) {
          if (!(err instanceof HostfsRefusal && err.code === 'BUSY') || attempt >= 20) throw err;
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
      if (root === undefined) throw new FsbenchError('INTERNAL', `${entry.path} lies in no root of the journal`);
      await removeBeneath(root, entry.path);
      return;
    case 'cgroup':
      await removeCgroup(entry.path);
      return;
  }
}

/**
 * Removes a cgroup directory a run made: whatever processes are still in it (a watcher that
 * outlived a killed run) go back to its parent first, and a process still exiting may keep it
 * busy for a moment. Only inside a mounted cgroup filesystem: never rmdir anything else.
 */
async function removeCgroup(dir: string): Promise<void> {
  const mounted = (await readMounts()).some((m) => (m.type === 'cgroup' || m.type === 'cgroup2') && dir.startsWith(`${m.point}/`));
  if (!mounted) throw new FsbenchError('INTERNAL', `${dir} lies in no mounted cgroup filesystem`);
  for (let attempt = 0; ; attempt++) {
    const procs = await fs.readFile(path.join(dir, 'cgroup.procs'), 'utf8').catch((err: unknown) => {
      if (errnoOf(err) === 'ENOENT') return null;
      throw err;
    });
    if (procs === null) return;
    for (const pid of procs.split('\n').filter((l) => /^\d+$/.test(l))) {
      await fs.writeFile(path.join(path.dirname(dir), 'cgroup.procs'), `${pid}\n`).catch(() => undefined);
    }
    try {
      await fs.rmdir(dir);
      return;
    } catch (err) {
      const code = errnoOf(err);
      if (code === 'ENOENT') return;
      if (code !== 'EBUSY' || attempt >= 40) throw err;
      await sleep(50);
    }
  }
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
    case 'cgroup':
      return `cgroup ${entry.path}`;
  }
}

/**
 * The changes one run makes, undone in reverse order by `dispose()` whatever happened. Each
 * change is journaled before it is made and forgotten only once it has been undone.
 */
export class Teardown {
  private readonly stack: { entry: JournalEntry; handle: string }[] = [];

  constructor(readonly journal: Journal) {}

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
        await this.journal.undo(item.entry);
        await this.journal.forget(item.handle);
      } catch (err) {
        this.journal.release(item.handle);
        failures.push(`${describe(item.entry)}: ${messageOf(err)}`);
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
