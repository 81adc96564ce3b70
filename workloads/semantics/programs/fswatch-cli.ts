/**
 * fswatch, the program (not Node's recursive fs.watch, which the watches workload calls
 * `fswatch`): `fswatch -r` with its Linux inotify monitor chosen outright (`-m inotify_monitor`,
 * not the poll monitor it could fall back to), its default latency (1 s: it hands events on in
 * batches, so a second of each event's latency is fswatch's own), and `--allow-overflow`, so a
 * queue overflow is reported rather than ending the program.
 *
 * Each event is printed as `FLAGS PATH` ended by NUL (`-0 --format '%f %p'`, flags joined by
 * commas): flag names hold no space and paths no NUL. Only the change flags are asked for, so
 * the directory reads of its own walk (PlatformSpecific) are not reported. fswatch's inotify
 * monitor does not pair a rename's halves: MovedFrom is `renamed-from`, MovedTo is `renamed`.
 */
import type { ChangeKind, WatchEvent } from '../../../contract/workloads/semantics/events.js';
import { FswatchFlag } from '../../../contract/workloads/semantics/program-output.js';
import type { WatcherAdapter } from '../watcher.js';
import type { ProgramOptions } from './options.js';
import { parseWordRecord, wordRecordAdapter } from './word-record.js';

const ASKED: readonly FswatchFlag[] = ['Created', 'Updated', 'Removed', 'Renamed', 'OwnerModified', 'AttributeModified', 'MovedFrom', 'MovedTo', 'Overflow'];

/** The first flag that says a change, in this order: MovedTo comes with Created, MovedFrom with Removed. */
const KINDS: readonly (readonly [FswatchFlag, ChangeKind])[] = [
  ['Overflow', 'overflow'],
  ['MovedFrom', 'renamed-from'],
  ['MovedTo', 'renamed'],
  ['Renamed', 'renamed'],
  ['Created', 'created'],
  ['Removed', 'deleted'],
  ['Updated', 'modified'],
  ['AttributeModified', 'attrib'],
  ['OwnerModified', 'attrib'],
];

/** One record, `Created,MovedTo /root/a/f2`, as the events it says (none or one). */
export function parseFswatch(root: string, record: string, atNs: bigint): WatchEvent[] {
  return parseWordRecord(FswatchFlag, KINDS, root, record, atNs);
}

export function fswatchCliAdapter(options: ProgramOptions = {}): WatcherAdapter {
  return wordRecordAdapter(
    {
      backend: 'fswatch-cli',
      file: 'fswatch',
      pkg: 'fswatch',
      args: (root) => [
        '-r', '-m', 'inotify_monitor', '--allow-overflow', '-0', '--format', '%f %p', '--event-flag-separator=,',
        ...ASKED.map((flag) => `--event=${flag}`), '--', root,
      ],
      words: FswatchFlag,
      kinds: KINDS,
    },
    options,
  );
}
