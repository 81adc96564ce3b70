/**
 * Directories only root (or the user fsbench runs as) controls. fsbench runs as root: whatever it
 * creates, writes or removes in a directory another local user can change, that user can steer
 * (a symlink swapped in, a journal entry planted, a marker pointed at /etc/shadow). So the scratch
 * and journal directories are checked before anything is done in them, and refused unless every
 * directory on their paths is one the user could not have changed:
 *
 * - no component is a symlink (its target can be changed by whoever owns the directory holding it);
 * - every component is owned by root or by this process's effective uid, and the directory
 *   itself by the effective uid;
 * - none is writable by group or others, except an ancestor owned by root with the sticky bit
 *   (/tmp, /var/tmp): there others may create entries but cannot rename or remove ours, so a
 *   directory we own inside stays ours.
 *
 * The paths checked once stay safe afterwards for the same reason: nobody else can change them.
 */
import { constants as fsConstants, promises as fs, type Stats } from 'node:fs';
import path from 'node:path';
import { FsbenchError, messageOf, errnoOf } from '../contract/errors.js';

/** What a directory is for, to name it and its setting in a refusal. */
export interface DirPurpose {
  /** `the scratch directory` */
  readonly what: string;
  /** The setting that chooses it: `FSBENCH_SCRATCH`. */
  readonly setting: string;
}

export const SCRATCH_PURPOSE: DirPurpose = { what: 'the scratch directory', setting: 'FSBENCH_SCRATCH' };
export const JOURNAL_PURPOSE: DirPurpose = { what: 'the journal directory', setting: 'FSBENCH_JOURNAL_DIR' };

const S_ISVTX = 0o1000;

function euid(): number {
  return process.geteuid?.() ?? 0;
}

function who(uid: number): string {
  return uid === 0 ? 'root' : `uid ${uid}`;
}



/** The absolute, normalised form of `dir`, or a refusal. */
function normalised(dir: string, purpose: DirPurpose): string {
  if (!path.isAbsolute(dir)) throw new FsbenchError('CONFIG_INVALID', `${purpose.what} ${dir} must be an absolute path (${purpose.setting})`);
  const p = path.resolve(dir);
  if (p === '/') throw new FsbenchError('DIRECTORY_UNSAFE', `${purpose.what} must not be / (${purpose.setting}): choose a directory of its own, such as /var/lib/fsbench`);
  return p;
}

/** Every directory from / down to `p` itself. */
function components(p: string): string[] {
  const parts = p.split('/').filter((x) => x !== '');
  return ['/', ...parts.map((_, i) => `/${parts.slice(0, i + 1).join('/')}`)];
}

interface Flaw {
  readonly why: string;
  /** The command (or choice) that removes the flaw; the error adds "or choose another <setting>". */
  readonly fix: string;
}

/**
 * What about the directory `q` (met on the way to `target`) lets someone else steer `target`,
 * and how to fix it, or undefined when nothing does. `own`: `q` is `target` itself.
 */
function flawOf(q: string, st: Stats, own: boolean, purpose: DirPurpose): Flaw | undefined {
  const me = euid();
  if (st.isSymbolicLink()) return { why: `${q} is a symlink`, fix: `give ${purpose.setting} the real path, with no symlink on the way` };
  if (!st.isDirectory()) return { why: `${q} is not a directory`, fix: `give ${purpose.setting} a directory` };
  const chown = me === 0 ? `chown root:root ${q} && chmod ${own ? '0700' : 'go-w'} ${q}` : `use a directory of your own (${who(me)})`;
  if (own && st.uid !== me) return { why: `${q} is owned by ${who(st.uid)}, not by ${who(me)}, who runs fsbench`, fix: chown };
  if (st.uid !== 0 && st.uid !== me) return { why: `${q} is owned by ${who(st.uid)}, not by root${me === 0 ? '' : ` or ${who(me)}`}`, fix: chown };
  if ((st.mode & 0o022) !== 0) {
    const mode = (st.mode & 0o7777).toString(8).padStart(4, '0');
    const by = (st.mode & 0o002) !== 0 ? 'others' : 'its group';
    if (own) return { why: `${q} is writable by ${by} (mode ${mode})`, fix: `chmod 0700 ${q}` };
    // Others may add entries to a sticky root-owned directory, but not rename or remove ours.
    const sticky = (st.mode & S_ISVTX) !== 0 && st.uid === 0;
    if (!sticky) return { why: `${q} is writable by ${by} (mode ${mode}) and is not a root-owned sticky directory like /tmp`, fix: `chmod go-w ${q}${st.uid === 0 ? ` (or chmod +t ${q})` : ''}` };
  }
  return undefined;
}

function unsafe(target: string, flaw: Flaw, purpose: DirPurpose): FsbenchError {
  return new FsbenchError(
    'DIRECTORY_UNSAFE',
    `${purpose.what} ${target} is not safe: ${flaw.why}, so another local user could steer what fsbench writes and removes there. ` +
      `Fix: ${flaw.fix}, or choose another ${purpose.setting}`,
  );
}

async function lstatOrNull(p: string): Promise<Stats | null> {
  try {
    return await fs.lstat(p);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return null;
    throw err;
  }
}

/**
 * Makes sure `dir` exists and only root (or this user) can change it or any directory on its
 * path, creating missing directories with mode 0700. Throws DIRECTORY_UNSAFE naming the
 * directory, what is wrong and the fix. Returns the normalised path, free of symlinks.
 */
export async function ensureSafeDir(dir: string, purpose: DirPurpose): Promise<string> {
  const target = normalised(dir, purpose);
  for (const q of components(target)) {
    let st = await lstatOrNull(q);
    if (st === null) {
      try {
        await fs.mkdir(q, { mode: 0o700 });
      } catch (err) {
        // Someone made it first (checked below like any other), or we may not.
        if (errnoOf(err) !== 'EEXIST') throw new FsbenchError('DIRECTORY_UNSAFE', `cannot create ${q} for ${purpose.what} ${target}: ${messageOf(err)}; create it (mode 0700) or choose another ${purpose.setting}`);
      }
      // Checked again, not assumed: another process may have made it between the lstat and the mkdir.
      st = await lstatOrNull(q);
      if (st === null) throw new FsbenchError('DIRECTORY_UNSAFE', `${q} vanished while ${purpose.what} ${target} was being created`);
    }
    const flaw = flawOf(q, st, q === target, purpose);
    if (flaw !== undefined) throw unsafe(target, flaw, purpose);
  }
  return target;
}

/** Why an existing `dir` is not safe by the rules above (missing counts), or undefined when it is. Creates nothing. */
export async function checkSafeDir(dir: string, purpose: DirPurpose): Promise<string | undefined> {
  try {
    const target = normalised(dir, purpose);
    for (const q of components(target)) {
      const st = await lstatOrNull(q);
      if (st === null) return `${q} does not exist`;
      const flaw = flawOf(q, st, q === target, purpose);
      if (flaw !== undefined) return flaw.why;
    }
    return undefined;
  } catch (err) {
    return messageOf(err);
  }
}

/** Why `dir` is not reached without symlinks as an existing directory, or undefined when it is. */
export async function checkNoSymlinks(dir: string): Promise<string | undefined> {
  if (!path.isAbsolute(dir) || path.resolve(dir) !== dir) return `${dir} is not a normalised absolute path`;
  for (const q of components(dir)) {
    const st = await lstatOrNull(q).catch(() => null);
    if (st === null) return `${q} does not exist`;
    if (st.isSymbolicLink()) return `${q} is a symlink`;
    if (!st.isDirectory()) return `${q} is not a directory`;
  }
  return undefined;
}

/**
 * Creates `dir/name` holding `text`, never through a symlink (O_NOFOLLOW|O_EXCL). An existing
 * file is accepted as it is only when it is a regular file of this user: a symlink planted in its
 * place (to /etc/shadow, say) is refused, never written through.
 */
export async function writeOwnFile(dir: string, name: string, text: string, mode = 0o600): Promise<void> {
  const file = path.join(dir, name);
  try {
    const handle = await fs.open(file, fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_NOFOLLOW | fsConstants.O_WRONLY, mode);
    try {
      await handle.writeFile(text);
      await handle.sync();
    } finally {
      await handle.close();
    }
    return;
  } catch (err) {
    if (errnoOf(err) !== 'EEXIST') throw err;
  }
  const st = await fs.lstat(file);
  if (!st.isFile() || st.uid !== euid()) {
    throw new FsbenchError(
      'DIRECTORY_UNSAFE',
      `${file} exists and is ${st.isSymbolicLink() ? 'a symlink' : st.isFile() ? `a file of ${who(st.uid)}` : 'not a regular file'}, not a file fsbench made: refusing to use it; remove it`,
    );
  }
}

/**
 * Resolves a cell's `target` path (symlinks followed) and refuses it outside `roots` (the scratch
 * directory and FSBENCH_ALLOWED_TARGETS). The resolved path is what the run must then use: the
 * one that was checked. A missing directory is TARGET_UNUSABLE, so the answer says what is wrong.
 */
export async function resolveAllowedTarget(target: string, roots: readonly string[]): Promise<string> {
  if (!path.isAbsolute(target) || path.normalize(target) !== target || target.split('/').includes('..')) {
    throw new FsbenchError('TARGET_NOT_ALLOWED', `target ${target} is not a normalised absolute path`);
  }
  let real: string;
  try {
    real = await fs.realpath(target);
    if (!(await fs.stat(real)).isDirectory()) throw new Error('not a directory');
  } catch (err) {
    throw new FsbenchError('TARGET_UNUSABLE', `target ${target} is not an existing directory (${messageOf(err)})`);
  }
  for (const root of roots) {
    const realRoot = await fs.realpath(root).catch(() => path.resolve(root));
    if (real === realRoot || real.startsWith(`${realRoot}/`)) return real;
  }
  throw new FsbenchError(
    'TARGET_NOT_ALLOWED',
    `target ${target}${real === target ? '' : ` (${real})`} is outside the directories this host allows runs in (${roots.join(', ')}): ` +
      'use a directory under one of them, or add its root to FSBENCH_ALLOWED_TARGETS on the host',
  );
}
