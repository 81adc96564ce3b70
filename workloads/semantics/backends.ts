/**
 * Every backend's adapter, by the name the `backend` parameter takes
 * (contract/workloads/semantics/backends.ts): the record's type asks for one per name, so a
 * backend added to the list without its adapter does not compile. The programs people run add
 * theirs from ./programs/. `user` has none of its own: its program is the host's listed watcher
 * the cell names, so its adapter is made per run from that entry.
 */
import { USER_BACKEND, type SemanticsBackend } from '../../contract/workloads/semantics/backends.js';
import { listedWatcher, type ListedWatcher, type WatcherList } from '../../host/watcher-list.js';
import { fanotifyAdapter } from './fanotify.js';
import { inotifyAdapter } from './inotify.js';
import { nodeAdapter } from './node-adapter.js';
import { PROGRAM_ADAPTERS, userListedAdapter } from './programs/index.js';
import type { WatcherAdapter } from './watcher.js';

const ADAPTERS: Readonly<Record<Exclude<SemanticsBackend, typeof USER_BACKEND>, WatcherAdapter>> = {
  inotify: inotifyAdapter,
  fanotify: fanotifyAdapter,
  parcel: nodeAdapter('parcel'),
  chokidar: nodeAdapter('chokidar'),
  fswatch: nodeAdapter('fswatch'),
  ...PROGRAM_ADAPTERS,
};

/** The backend's adapter, and for `user` the host's listed watcher it runs (WATCHER_NOT_LISTED when the host has no such name). */
export function adapterOf(backend: SemanticsBackend, watcher: string, list: WatcherList | undefined): { adapter: WatcherAdapter; listed?: ListedWatcher } {
  if (backend !== USER_BACKEND) return { adapter: ADAPTERS[backend] };
  const listed = listedWatcher(list ?? { file: null, watchers: [] }, watcher);
  return { adapter: userListedAdapter(listed), listed };
}
