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

export const JournalEntry = z.discriminatedUnion('kind', [
  /** A /proc/sys value to write back. */
  z.object({ kind: z.literal('sysctl'), path: z.string().startsWith('/proc/sys/'), original: z.string() }).strict(),
  /** A mount point to unmount. */
  z.object({ kind: z.literal('mount'), target: z.string().startsWith('/') }).strict(),
  /** A loop device to detach. */
  z.object({ kind: z.literal('loop'), device: z.string().regex(/^\/dev\/loop\d+$/) }).strict(),
  /** A file or directory tree to delete. */
  z.object({ kind: z.literal('path'), path: z.string().startsWith('/') }).strict(),
]);
export type JournalEntry = z.infer<typeof JournalEntry>;

const StoredEntry = z.object({ pid: z.number().int(), bootId: z.string(), entry: JournalEntry }).strict();

/** The kernel's boot id: journal entries from another boot describe changes that are gone. */
export async function currentBootId(): Promise<string> {
  return (await readBootId()) ?? 'unknown';
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

export class Journal {
  private constructor(
    readonly dir: string,
    private readonly bootId: string,
  ) {}

  /** Opens (creating if needed) the journal directory. */
  static async open(dir: string): Promise<Journal> {
    await fs.mkdir(dir, { recursive: true });
    return new Journal(dir, await currentBootId());
  }

  /** Writes an entry down durably and returns its handle. */
  async record(entry: JournalEntry): Promise<string> {
    const file = path.join(this.dir, `${Date.now()}-${process.pid}-${randomUUID().slice(0, 8)}.json`);
    const handle = await fs.open(file, fsConstants.O_CREAT | fsConstants.O_WRONLY | fsConstants.O_EXCL);
    try {
      await handle.writeFile(JSON.stringify({ pid: process.pid, bootId: this.bootId, entry }));
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
   * Undoes the entries left by processes that are gone (or by an earlier boot, whose mounts and
   * limits are gone anyway), newest first. Returns a line per entry for the log.
   */
  async recover(options: RecoverOptions = {}): Promise<string[]> {
    const names = (await fs.readdir(this.dir)).filter((n) => n.endsWith('.json')).sort().reverse();
    const done: string[] = [];
    for (const name of names) {
      const file = path.join(this.dir, name);
      let stored: z.infer<typeof StoredEntry>;
      try {
        stored = StoredEntry.parse(JSON.parse(await fs.readFile(file, 'utf8')));
      } catch {
        // A torn write from a crash in the middle of record(): nothing was changed after it.
        await fs.rm(file, { force: true });
        continue;
      }
      const sameBoot = stored.bootId === this.bootId;
      const ownerGone = options.ownersGone === true || stored.pid === process.pid || !processAlive(stored.pid);
      if (sameBoot && !ownerGone) continue;
      const wanted = options.kinds?.includes(stored.entry.kind) ?? true;
      if (sameBoot && wanted) await undo(stored.entry);
      await fs.rm(file, { force: true });
      if (wanted) done.push(`${sameBoot ? 'undid' : 'dropped (earlier boot)'} ${describe(stored.entry)}`);
    }
    return done;
  }
}

export interface RecoverOptions {
  /**
   * The writers are known to be gone (for example a removed container, whose pids belong to
   * another namespace): do not ask whether their pids are alive.
   */
  readonly ownersGone?: boolean;
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
