/**
 * watchman as a project runs it, with nothing global: a private server (host/watchman.ts) with
 * one subscription on the root.
 *
 * watchman says which paths changed, not how: a file that no longer exists is `deleted`, one it
 * had not seen is `created`, any other change (content or attributes) `modified`; a rename is
 * the old path deleted and the new one created, and the parent directory is reported too. A
 * result that starts over (`is_fresh_instance`) or warns of a recrawl means it lost track of
 * events: `overflow`.
 */
import path from 'node:path';
import type { WatchmanResult } from '../../../contract/watcher-programs.js';
import type { ChangeKind, WatchEvent } from '../../../contract/workloads/semantics/events.js';
import { startWatchman, watchmanResult } from '../../../host/watchman.js';
import type { RunningWatcher, WatcherAdapter } from '../watcher.js';
import type { ProgramOptions } from './options.js';
import { pathInRoot, watchedRoot } from './reported-path.js';

function watchmanEvents(root: string, line: WatchmanResult, atNs: bigint): WatchEvent[] {
  const lost = line.is_fresh_instance === true || /recrawl/i.test(line.warning ?? '');
  const events: WatchEvent[] = lost ? [{ kind: 'overflow', path: root, atNs }] : [];
  for (const file of line.files ?? []) {
    const kind: ChangeKind = !file.exists ? 'deleted' : file.new ? 'created' : 'modified';
    events.push({ kind, path: pathInRoot(root, path.join(root, file.name)), atNs });
  }
  return events;
}

/** The events of one result line of the subscription, or a throw for an error or a line it does not know. */
export function parseWatchman(root: string, record: string, atNs: bigint, subscribed: () => void): WatchEvent[] {
  const line = watchmanResult(record, subscribed);
  return line === null ? [] : watchmanEvents(root, line, atNs);
}

export function watchmanAdapter(options: ProgramOptions = {}): WatcherAdapter {
  return {
    name: 'watchman',
    async start(rootGiven, onEvent, signal): Promise<RunningWatcher> {
      const root = watchedRoot(rootGiven);
      const query = { fields: ['name', 'exists', 'new', 'type'], empty_on_fresh_instance: true };
      const running = await startWatchman(root, options, query, (line, atNs) => watchmanEvents(root, line, atNs), onEvent, signal);
      return { stop: () => running.stop() };
    },
  };
}
