/**
 * A listed watcher runs as its own uid and gid, never root, while the run's tree is root's and
 * private (mode 0700). It needs to read the tree, nothing more: the run directory goes to the
 * watcher's group with mode 0750 (the script's entries inside are made with the usual 0755/0644),
 * and every directory above it must let that user through, or the run stops saying which one.
 * Other local users still cannot enter it.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { FsbenchError } from '../../contract/errors.js';

interface Ids {
  readonly name: string;
  readonly uid: number;
  readonly gid: number;
}

function searchable(st: { uid: number; gid: number; mode: number }, ids: Ids): boolean {
  if (st.uid === ids.uid) return (st.mode & 0o100) !== 0;
  if (st.gid === ids.gid) return (st.mode & 0o010) !== 0;
  return (st.mode & 0o001) !== 0;
}

/** Lets the listed watcher `ids` read the tree under `runDir`: TARGET_UNUSABLE naming the directory above that it cannot pass. */
export async function openTreeTo(runDir: string, ids: Ids): Promise<void> {
  for (let p = path.dirname(runDir); ; p = path.dirname(p)) {
    const st = await fs.stat(p);
    if (!searchable(st, ids)) {
      const mode = (st.mode & 0o7777).toString(8).padStart(4, '0');
      throw new FsbenchError(
        'TARGET_UNUSABLE',
        `the watcher ${ids.name} runs as uid ${ids.uid}, gid ${ids.gid}, which cannot pass ${p} (mode ${mode}) to reach the tree: ` +
          `use a scratch directory that user can reach (chmod o+x ${p}), or list the watcher with a uid or gid that can`,
      );
    }
    if (p === '/') break;
  }
  await fs.chown(runDir, 0, ids.gid);
  await fs.chmod(runDir, 0o750);
}
