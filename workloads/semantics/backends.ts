/**
 * Every backend's adapter, by the name the `backend` parameter takes
 * (contract/workloads/semantics/backends.ts): the record's type asks for one per name, so a
 * backend added to the list without its adapter does not compile. The programs people run add
 * theirs from ./programs/.
 */
import type { SemanticsBackend } from '../../contract/workloads/semantics/backends.js';
import { inotifyAdapter } from './inotify.js';
import { nodeAdapter } from './node-adapter.js';
import { PROGRAM_ADAPTERS } from './programs/index.js';
import type { WatcherAdapter } from './watcher.js';

const ADAPTERS: Readonly<Record<SemanticsBackend, WatcherAdapter>> = {
  inotify: inotifyAdapter,
  parcel: nodeAdapter('parcel'),
  chokidar: nodeAdapter('chokidar'),
  fswatch: nodeAdapter('fswatch'),
  ...PROGRAM_ADAPTERS,
};

export function adapterOf(backend: SemanticsBackend): WatcherAdapter {
  return ADAPTERS[backend];
}
