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
 * This module owns that state; workloads go through `Teardown` (host/teardown.ts), never around
 * it. What an entry may hold is in journal-entry.ts, the roots in journal-roots.ts, how each kind
 * is undone in undo.ts.
 */
import { randomUUID } from 'node:crypto';
import { constants as fsConstants, promises as fs } from 'node:fs';
import path from 'node:path';
import { errnoOf, FsbenchError } from '../contract/errors.js';
import { HostfsRefusal } from './hostfs.js';
import { describe, entryPath, issues, JournalEntry, StoredEntry } from './journal-entry.js';
import { deepestRoot, parentRefusal, registeredRoots, registerRoots, strictlyInside, type RootKind } from './journal-roots.js';
import { readBootId } from './kernel.js';
import { OwnerLock, ownersHeld, reapOwnerLocks, takeRecoveryLock } from './owner-lock.js';
import { checkNoSymlinks, checkSafeDir, ensureSafeDir, JOURNAL_PURPOSE, SCRATCH_PURPOSE, writeOwnFile } from './safe-dir.js';
import { undoAt } from './undo.js';

/**
 * Written into a scratch directory when a journal is opened for it, saying what the directory is
 * for. Only a label: which directories entries may name is in ROOTS_DIR, inside the journal.
 */
export const SCRATCH_MARKER = '.fsbench-scratch';
/** Where refused entries are kept for a person to look at, never replayed. */
export const REFUSED_DIR = 'refused';

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
