/**
 * A watcher of the user's own: a program run from its argv (no shell), printing one WatcherLine
 * JSON object per line (contract/workloads/semantics/events.ts), so its output needs no adapter
 * of its own. Which programs a host may run, and under which user, is the agent's list
 * (`user-listed` backends); this is the runner and line reader such an entry is started with.
 */
import { FsbenchError } from '../../../contract/errors.js';
import { WatcherLine, type WatchEvent } from '../../../contract/workloads/semantics/events.js';
import type { RunningWatcher, WatcherAdapter } from '../watcher.js';
import type { ProgramOptions } from './options.js';
import { startProgram } from '../../../host/watcher-program.js';
import { pathInRoot, watchedRoot } from './reported-path.js';

/** A line holds a path, a kind, an old path and a time: a few PATH_MAX and some JSON. */
const MAX_LINE_BYTES = 16 * 1024;

/** An entry of the host's list (host/watcher-list.ts's ListedWatcher has this shape). */
export interface UserWatcher {
  /** Its name in the host's list, for messages. */
  readonly name: string;
  /** The program and its arguments; `{root}` in an argument is replaced by the watched root. */
  readonly argv: readonly string[];
  /** The user and group it runs as; the host's list never lets that be root. */
  readonly uid?: number;
  readonly gid?: number;
}

export function parseWatcherLine(root: string, record: string, atNs: bigint): WatchEvent[] {
  const line = WatcherLine.parse(JSON.parse(record));
  const from = line.from === undefined ? {} : { from: pathInRoot(root, line.from) };
  return [{ kind: line.kind, path: line.kind === 'overflow' ? root : pathInRoot(root, line.path), ...from, atNs }];
}

export function userListedAdapter(watcher: UserWatcher, options: ProgramOptions = {}): WatcherAdapter {
  return {
    name: 'user-listed',
    async start(rootGiven, onEvent, signal): Promise<RunningWatcher> {
      const root = watchedRoot(rootGiven);
      const [file, ...args] = watcher.argv;
      if (file === undefined) throw new FsbenchError('CONFIG_INVALID', `the watcher ${watcher.name} has an empty argv`);
      const program = await startProgram(
        {
          backend: `user-listed ${watcher.name}`,
          file,
          args: args.map((a) => a.replaceAll('{root}', root)),
          remedy: `install it, or correct ${watcher.name}'s argv in this host's list of watchers`,
          separator: 0x0a,
          maxRecordBytes: MAX_LINE_BYTES,
          path: options.path,
          uid: watcher.uid,
          gid: watcher.gid,
        },
        (record, atNs) => parseWatcherLine(root, record, atNs),
        onEvent,
        signal,
      );
      return { stop: () => program.stop() };
    },
  };
}
