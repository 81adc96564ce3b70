/**
 * The watchers a host's operator lets its agent run: programs listed in a file on that host
 * (FSBENCH_WATCHERS), each under a name. A `semantics` job names one of them and never carries a
 * command line, so whoever can write a job (anyone with the Redis password, before signatures;
 * the coordinator, after) can only choose among programs root on that host chose; an unlisted
 * name is refused before anything starts (WATCHER_NOT_LISTED).
 *
 * The agent is root, so the list is held to the scratch directory's rules: the file and every
 * directory above it are root's (or this user's) and writable by nobody else, and no symlink is
 * followed to it. The program itself must be root's and writable by nobody else too: a program a
 * local user could replace would measure whatever that user likes. It runs as the uid and gid its
 * entry gives (nobody by default, never root).
 *
 * The file (JSON, docs/semantics.md):
 *
 *   { "watchers": [ { "name": "mywatch", "argv": ["/usr/local/bin/mywatch", "--json", "{root}"] } ] }
 *
 * `{root}` in an argument is the watched root; the program prints one WatcherLine
 * (contract/workloads/semantics/events.ts) per change on stdout.
 */
import { constants as fsConstants, promises as fs } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { FsbenchError, errnoOf, messageOf } from '../contract/errors.js';
import { WATCHER_NAME } from '../contract/watcher-name.js';
import { checkSafeDir } from './safe-dir.js';

/** The list is a few lines; anything larger is not one. */
const MAX_FILE_BYTES = 64 * 1024;
/** The argument that stands for the watched root. */
export const ROOT_PLACEHOLDER = '{root}';
/** nobody:nogroup on Debian, what the program runs as unless its entry says otherwise. */
const NOBODY = 65534;
const S_ISVTX = 0o1000;

const Id = z.number().int().min(1, 'must not be 0: a listed watcher never runs as root').max(2 ** 32 - 2);

const ListedWatcher = z
  .object({
    name: z.string().regex(WATCHER_NAME, 'must be 1 to 32 of a-z, 0-9 and -, starting with a letter'),
    argv: z
      .array(z.string().min(1).max(4096).refine((a) => !a.includes('\0'), 'must not hold a NUL byte'))
      .min(1)
      .max(64)
      .refine(([program]) => program !== undefined && path.isAbsolute(program) && path.normalize(program) === program, 'must start with the program as a normalised absolute path'),
    uid: Id.default(NOBODY),
    gid: Id.default(NOBODY),
  })
  .strict();
export type ListedWatcher = z.infer<typeof ListedWatcher>;

const WatcherListFile = z
  .object({ watchers: z.array(ListedWatcher).max(64) })
  .strict()
  .refine((f) => new Set(f.watchers.map((w) => w.name)).size === f.watchers.length, 'watcher names must be unique');

export interface WatcherList {
  /** The file the list came from, for messages; null when FSBENCH_WATCHERS is not set. */
  readonly file: string | null;
  readonly watchers: readonly ListedWatcher[];
}

const PURPOSE = { what: 'the directory of the watcher list', setting: 'FSBENCH_WATCHERS' };

function invalid(file: string, why: string): FsbenchError {
  return new FsbenchError('CONFIG_INVALID', `the watcher list ${file} (FSBENCH_WATCHERS) ${why}`);
}

/** Why a file (the list, or a listed program) could be changed by someone other than root or this user, or undefined. */
function unsafeFile(st: { uid: number; mode: number }): string | undefined {
  const me = process.geteuid?.() ?? 0;
  if (st.uid !== 0 && st.uid !== me) return `is owned by uid ${st.uid}, not by root`;
  if ((st.mode & 0o022) !== 0) return `is writable by ${(st.mode & 0o002) !== 0 ? 'others' : 'its group'} (mode ${(st.mode & 0o7777).toString(8).padStart(4, '0')})`;
  return undefined;
}

/**
 * Reads and checks the list at `file` (FSBENCH_WATCHERS); an empty list when `file` is undefined.
 * Throws CONFIG_INVALID naming the file, what is wrong and the fix: a list that cannot be trusted
 * or read is an operator's mistake to say at once, never a silently empty list.
 */
export async function loadWatcherList(file: string | undefined): Promise<WatcherList> {
  if (file === undefined) return { file: null, watchers: [] };
  if (!path.isAbsolute(file) || path.normalize(file) !== file) throw invalid(file, 'must be a normalised absolute path');
  const dirFlaw = await checkSafeDir(path.dirname(file), PURPOSE);
  if (dirFlaw !== undefined) throw invalid(file, `is in a directory another local user could change (${dirFlaw}): keep it in a directory of root's, such as /etc/fsbench`);
  let text: string;
  try {
    // O_NOFOLLOW: a symlink in the list's place is refused, never read through.
    const handle = await fs.open(file, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK);
    try {
      const st = await handle.stat();
      if (!st.isFile()) throw invalid(file, 'is not a regular file');
      const flaw = unsafeFile(st);
      if (flaw !== undefined) throw invalid(file, `${flaw}: \`chown root:root ${file} && chmod 0644 ${file}\``);
      if (st.size > MAX_FILE_BYTES) throw invalid(file, `is ${st.size} bytes, more than the ${MAX_FILE_BYTES} a list may be`);
      text = await handle.readFile('utf8');
    } finally {
      await handle.close();
    }
  } catch (err) {
    if (err instanceof FsbenchError) throw err;
    const errno = errnoOf(err);
    if (errno === 'ELOOP') throw invalid(file, 'is a symlink: give the real path');
    if (errno === 'ENOENT') throw invalid(file, 'does not exist: create it, or unset FSBENCH_WATCHERS');
    throw invalid(file, `cannot be read: ${messageOf(err)}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw invalid(file, `is not JSON: ${messageOf(err)}`);
  }
  const parsed = WatcherListFile.safeParse(json);
  if (!parsed.success) {
    throw invalid(file, `is not a watcher list: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(file)'}: ${i.message}`).join('; ')}`);
  }
  for (const w of parsed.data.watchers) await checkProgram(file, w);
  return { file, watchers: parsed.data.watchers };
}

/** Refuses a listed program that is missing, not executable, or could be replaced by another local user. */
async function checkProgram(file: string, w: ListedWatcher): Promise<void> {
  const [program = ''] = w.argv;
  let real: string;
  try {
    // Debian's alternatives are symlinks: what runs is the file they lead to, so that is what is checked.
    real = await fs.realpath(program);
    await fs.access(real, fsConstants.X_OK);
  } catch (err) {
    throw invalid(file, `lists ${w.name} as ${program}, which cannot be run (${messageOf(err)}): install it, or fix its path`);
  }
  for (let p = real; ; p = path.dirname(p)) {
    const st = await fs.stat(p);
    // Others may add entries to a root-owned sticky directory (/tmp), but not replace ours.
    const sticky = p !== real && st.uid === 0 && (st.mode & S_ISVTX) !== 0;
    const flaw = sticky ? undefined : unsafeFile(st);
    if (flaw !== undefined) throw invalid(file, `lists ${w.name} as ${program}, but ${p} ${flaw}: another local user could replace what runs; \`chown root:root\` it and \`chmod go-w\` it`);
    if (p === '/') break;
  }
}

/** The listed watcher `name`, or WATCHER_NOT_LISTED naming what this host lists. */
export function listedWatcher(list: WatcherList, name: string): ListedWatcher {
  const w = list.watchers.find((x) => x.name === name);
  if (w !== undefined) return w;
  const names = list.watchers.map((x) => x.name);
  const where = list.file === null ? 'this host lists no watchers (FSBENCH_WATCHERS is not set)' : `${list.file} (FSBENCH_WATCHERS) lists ${names.length === 0 ? 'none' : names.join(', ')}`;
  throw new FsbenchError('WATCHER_NOT_LISTED', `no watcher called ${name} may run on this host: ${where}. Its operator adds one there; a job names a watcher, never a program`);
}

/** The listed watcher's command line for watching `root`: `{root}` replaced in each argument. */
export function watcherArgv(w: ListedWatcher, root: string): string[] {
  return w.argv.map((a) => a.split(ROOT_PLACEHOLDER).join(root));
}
