/**
 * Removing and unmounting what a run made, without following a symlink anywhere, through the
 * native helper (native/hostfs.c): Node has no openat2, and its fs.rm resolves paths from / at
 * every step, so a directory swapped for a symlink between two steps would be followed.
 */
import path from 'node:path';
import { z } from 'zod';
import { FsbenchError } from '../contract/errors.js';
import { runNative } from './native.js';

const HostfsError = z.object({ error: z.object({ code: z.string(), message: z.string() }).strict() }).strict();
export type HostfsError = z.infer<typeof HostfsError>['error'];

/** What the helper refused because a path would have crossed a symlink or a mount: not an I/O failure. */
export class HostfsRefusal extends Error {
  override readonly name = 'HostfsRefusal';
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Runs `hostfs ...args` and parses its one line with `schema`. A refusal (SYMLINK, MOUNTED,
 * BUSY) is a HostfsRefusal; anything else that went wrong an FsbenchError.
 */
export async function runHostfs<T extends z.ZodType>(args: readonly string[], schema: T): Promise<z.output<T>> {
  const exit = await runNative('hostfs', args, { timeoutMs: 120_000 });
  const ok = schema.safeParse(exit.last);
  if (exit.code === 0 && ok.success) return ok.data;
  const failed = HostfsError.safeParse(exit.last);
  if (failed.success) {
    const { code, message } = failed.data.error;
    throw code === 'FAILED' || code === 'USAGE' ? new FsbenchError('INTERNAL', `hostfs ${args[0] ?? ''}: ${message}`) : new HostfsRefusal(code, message);
  }
  const said = exit.timedOut ? 'nothing within 120 s' : `something unexpected (${exit.signal ?? `exit code ${String(exit.code)}`}): ${exit.stderr.trim().slice(0, 500) || 'no message'}`;
  throw new FsbenchError('INTERNAL', `hostfs ${args.join(' ')} said ${said}`);
}

/** `p` relative to `root`, which it must lie strictly inside (lexically: both are normalised). */
export function beneath(root: string, p: string): string {
  const rel = path.relative(root, p);
  if (rel === '' || rel.startsWith('..') || path.isAbsolute(rel)) throw new FsbenchError('INTERNAL', `${p} is not inside ${root}`);
  return rel;
}

const Removed = z.object({ ok: z.literal(true), removed: z.number().int().nonnegative() }).strict();
const Unmounted = z.object({ ok: z.literal(true), unmounted: z.union([z.literal(0), z.literal(1)]) }).strict();

/**
 * Removes `p` (a file, or a directory and all it holds) inside `root`: nothing on the way from /
 * may be a symlink (HostfsRefusal SYMLINK), a symlink inside the tree is unlinked itself, and a
 * mount point inside it is not crossed (HostfsRefusal MOUNTED). Gone already: nothing to do.
 */
export async function removeBeneath(root: string, p: string): Promise<number> {
  return (await runHostfs(['remove', root, beneath(root, p)], Removed)).removed;
}

/** Unmounts `p` inside `root` (UMOUNT_NOFOLLOW, the parent opened without symlinks); true when something was unmounted. */
export async function unmountBeneath(root: string, p: string, detach = false): Promise<boolean> {
  return (await runHostfs(['umount', root, beneath(root, p), ...(detach ? ['--detach'] : [])], Unmounted)).unmounted === 1;
}
