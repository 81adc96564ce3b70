/**
 * A path a watcher program reported, checked before it is matched: absolute, at most PATH_MAX,
 * and inside the watched root, since a recursive watch of the root cannot truthfully name
 * anything else.
 */
import path from 'node:path';
import { MAX_PROGRAM_PATH } from '../../../contract/workloads/semantics/program-output.js';

/** `reported` without a trailing slash (inotifywait ends a directory's own path with one), or a throw saying why not. */
export function pathInRoot(root: string, reported: string): string {
  const p = reported.length > 1 && reported.endsWith('/') ? reported.slice(0, -1) : reported;
  if (p.length > MAX_PROGRAM_PATH) throw new Error(`a path of ${p.length} characters, longer than PATH_MAX`);
  if (!path.isAbsolute(p) || path.normalize(p) !== p) throw new Error('a path that is not absolute and normal');
  if (p !== root && !p.startsWith(root.endsWith('/') ? root : `${root}/`)) throw new Error(`a path outside the watched root ${root}`);
  return p;
}

/** The root as the programs are given it and name it back: absolute, normal, no trailing slash. */
export function watchedRoot(root: string): string {
  return path.resolve(root);
}
