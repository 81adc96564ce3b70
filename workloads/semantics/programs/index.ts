/**
 * The watchers people run as programs, each behind the semantics workload's WatcherAdapter:
 * `PROGRAM_ADAPTERS` by backend name, and the runner of a watcher of the user's own.
 * `fswatch-cli` is the fswatch program; the watches workload's `fswatch` is Node's recursive fs.watch.
 */
import type { WatcherAdapter } from '../watcher.js';
import { fswatchCliAdapter } from './fswatch-cli.js';
import { inotifywaitAdapter } from './inotifywait.js';
import type { ProgramOptions } from './options.js';
import { watchdogAdapter } from './watchdog.js';
import { watchmanAdapter } from './watchman.js';

export const PROGRAM_BACKENDS = ['inotifywait', 'fswatch-cli', 'watchman', 'watchdog'] as const;
export type ProgramBackend = (typeof PROGRAM_BACKENDS)[number];

/** Each program's adapter, made with `options` (where to find programs and keep state). */
export function programAdapters(options: ProgramOptions = {}): Readonly<Record<ProgramBackend, WatcherAdapter>> {
  return {
    inotifywait: inotifywaitAdapter(options),
    'fswatch-cli': fswatchCliAdapter(options),
    watchman: watchmanAdapter(options),
    watchdog: watchdogAdapter(options),
  };
}

export const PROGRAM_ADAPTERS = programAdapters();

export type { ProgramOptions } from './options.js';
export { MAX_EVENTS_PER_RUN, STOP_GRACE_MS } from '../../../host/watcher-program.js';
export { userListedAdapter, type UserWatcher } from './user-listed.js';
