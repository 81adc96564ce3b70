/**
 * fs.inotify.max_user_watches for a run (`maxUserWatches`), applied through the journal and
 * restored by the teardown, and what other watchers of this user hold of it, for the note that
 * names the value that would have sufficed.
 */
import { readdir, readFile, stat } from 'node:fs/promises';
import { FsbenchError } from '../../contract/errors.js';
import type { KnownSysctl } from '../../host/journal-entry.js';
import type { Teardown } from '../../host/teardown.js';
import { readSysctl, setSysctl } from '../../host/sysctl.js';

export const MAX_USER_WATCHES: KnownSysctl = '/proc/sys/fs/inotify/max_user_watches';
/** What `auto` leaves above the tree: other watchers of the same user (editors, agents) count against the limit too. */
export const AUTO_HEADROOM = 8192;

/** Sets the limit the cell asks for and returns the value in force, read back from the kernel. */
export async function applyMaxUserWatches(teardown: Teardown, wanted: number | 'auto' | 'system', expected: number): Promise<number> {
  const now = await readSysctl(MAX_USER_WATCHES);
  if (wanted === 'system') return now;
  const target = wanted === 'auto' ? Math.max(now, expected + AUTO_HEADROOM) : wanted;
  if (target !== now) await setSysctl(teardown, MAX_USER_WATCHES, target);
  const actual = await readSysctl(MAX_USER_WATCHES);
  if (actual !== target) {
    throw new FsbenchError('LIMIT_WRITE_FAILED', `fs.inotify.max_user_watches reads ${actual} after writing ${target}; refusing to measure under a different limit`);
  }
  return actual;
}

/**
 * inotify watches held by this user's processes that this process can see (one `inotify wd:`
 * line per watch in /proc/<pid>/fdinfo, as inotify-info counts them). Watchers in other pid
 * namespaces of the same user namespace count against the limit but are not visible here.
 */
export async function watchesHeldByUser(uid: number): Promise<number> {
  let total = 0;
  for (const pid of await readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const owner = await stat(`/proc/${pid}`).then((s) => s.uid, () => -1);
    if (owner !== uid) continue;
    const fds = await readdir(`/proc/${pid}/fdinfo`).catch(() => [] as string[]);
    for (const fd of fds) {
      const text = await readFile(`/proc/${pid}/fdinfo/${fd}`, 'utf8').catch(() => '');
      if (!text.includes('inotify wd:')) continue;
      for (const line of text.split('\n')) if (line.startsWith('inotify wd:')) total++;
    }
  }
  return total;
}
