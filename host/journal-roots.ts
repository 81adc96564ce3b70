/**
 * The roots of the host journal (host/journal.ts): the scratch directories and allowed targets
 * registered in the journal directory, the only places an entry's path may lie in, and the checks
 * that an entry's path lies inside one, reached without a symlink.
 */
import { createHash } from 'node:crypto';
import { constants as fsConstants, promises as fs } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { NormalPath } from './journal-entry.js';
import { writeOwnFile } from './safe-dir.js';

/**
 * The registry of roots, inside the journal directory: each Journal.open registers its scratch
 * directory and allowed targets there, so that agents sharing the journal (each with its own
 * scratch directory) undo each other's entries, and nothing outside a registered root.
 */
export const ROOTS_DIR = 'roots';

/** What a root is: a scratch directory (held to the ownership rules) or an allowed target. */
export type RootKind = 'scratch' | 'target';
const RegisteredRoot = z.object({ root: NormalPath, kind: z.enum(['scratch', 'target']) }).strict();

/** Whether `p` lies strictly inside `root` (never `root` itself). */
export function strictlyInside(p: string, root: string): boolean {
  return p.startsWith(`${root}/`);
}

/** The root among `roots` that `p` lies strictly inside, the deepest one when they nest. */
export function deepestRoot(p: string, roots: Iterable<string>): string | undefined {
  let best: string | undefined;
  for (const r of roots) if (strictlyInside(p, r) && (best === undefined || r.length > best.length)) best = r;
  return best;
}

/**
 * Why the directories from `root` down to `p`'s parent are not all there as real directories
 * (a missing one, a symlink), or undefined when they are. The removal itself never follows a
 * symlink either; this only refuses such an entry with a reason instead of acting on it.
 */
export async function parentRefusal(p: string, root: string): Promise<string | undefined> {
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

/** Registers `roots` in the journal directory, one file each (made by root or this user only). */
export async function registerRoots(journalDir: string, roots: ReadonlyMap<string, RootKind>): Promise<void> {
  const dir = path.join(journalDir, ROOTS_DIR);
  await fs.mkdir(dir, { mode: 0o700 }).catch((err: unknown) => {
    if (!(err instanceof Error && 'code' in err && err.code === 'EEXIST')) throw err;
  });
  for (const [root, kind] of roots) await writeOwnFile(dir, registrationName(root, kind), `${JSON.stringify({ root, kind })}\n`);
}

/** Every root registered in the journal directory (unreadable or malformed registrations are skipped). */
export async function registeredRoots(journalDir: string): Promise<Map<string, RootKind>> {
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
