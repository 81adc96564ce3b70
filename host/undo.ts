/**
 * How each kind of journal entry is undone (host/journal.ts): a sysctl written back, a mount
 * unmounted and a path removed inside their root without following a symlink (host/hostfs.ts),
 * a loop device detached, a cgroup emptied and removed. Each is idempotent: undoing what is
 * already gone succeeds.
 */
import { execFile } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { errnoOf, FsbenchError } from '../contract/errors.js';
import { HostfsRefusal, removeBeneath, unmountBeneath } from './hostfs.js';
import type { JournalEntry } from './journal-entry.js';
import { readMounts } from './kernel.js';

const exec = promisify(execFile);

async function sleep(ms: number): Promise<void> {
  await new Promise((r) => setTimeout(r, ms));
}

/** Undoes one change inside `root` (for paths and mounts). Idempotent: undoing what is already gone succeeds. */
export async function undoAt(entry: JournalEntry, root: string | undefined): Promise<void> {
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
