/**
 * inotifywait (inotify-tools) as people run it to watch a tree: `inotifywait -m -r` on the root,
 * asked for the changes only (create, modify, attrib, moved_from, moved_to, delete: open, access
 * and close are not changes, and the *_SELF events repeat what the parent directory's watch says).
 *
 * Each event is printed as `EVENTS PATH` ended by NUL (`--format '%e %w%f%0' --no-newline`): the
 * event names never hold a space and a path never holds a NUL, so paths with spaces and newlines
 * arrive whole. What this cannot carry: a path that is not UTF-8 (refused, the run fails) and
 * inotify's rename cookie, which inotifywait never prints, so a rename arrives as its two halves,
 * MOVED_FROM (`renamed-from`, the old path) and MOVED_TO (`renamed`, the new path, no `from`):
 * pairing them by adjacency would be fsbench's guess, not what inotifywait said.
 */
import type { ChangeKind, WatchEvent } from '../../../contract/workloads/semantics/events.js';
import { InotifywaitEvent } from '../../../contract/workloads/semantics/program-output.js';
import type { WatcherAdapter } from '../watcher.js';
import type { ProgramOptions } from './options.js';
import { parseWordRecord, wordRecordAdapter } from './word-record.js';

const ASKED = ['create', 'modify', 'attrib', 'moved_from', 'moved_to', 'delete'] as const;

/** The first of an event's names that says a change, in this order (ISDIR and the like say none). */
const KINDS: readonly (readonly [InotifywaitEvent, ChangeKind])[] = [
  ['Q_OVERFLOW', 'overflow'],
  ['MOVED_FROM', 'renamed-from'],
  ['MOVED_TO', 'renamed'],
  ['CREATE', 'created'],
  ['DELETE', 'deleted'],
  ['MODIFY', 'modified'],
  ['ATTRIB', 'attrib'],
];

/** One record, `CREATE,ISDIR /root/a/d`, as the events it says (none or one). */
export function parseInotifywait(root: string, record: string, atNs: bigint): WatchEvent[] {
  return parseWordRecord(InotifywaitEvent, KINDS, root, record, atNs);
}

export function inotifywaitAdapter(options: ProgramOptions = {}): WatcherAdapter {
  return wordRecordAdapter(
    {
      backend: 'inotifywait',
      file: 'inotifywait',
      pkg: 'inotify-tools',
      args: (root) => ['-m', '-r', ...ASKED.flatMap((e) => ['-e', e]), '--format', '%e %w%f%0', '--no-newline', '--', root],
      words: InotifywaitEvent,
      kinds: KINDS,
      // Without -q it says so once every directory of the tree has its watch.
      readyOnStderr: /^Watches established\.$/m,
    },
    options,
  );
}
