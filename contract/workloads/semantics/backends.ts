/**
 * The watchers the semantics workload can run, by the names the `backend` parameter takes: the
 * one list, so that the parameter, its docs and the host side's adapter registry
 * (workloads/semantics/backends.ts, whose type requires an adapter for every name) cannot drift.
 * The names the watches workload also has (`inotify`, `parcel`, `chokidar`, `fswatch`) mean the
 * same watcher there and here.
 *
 * Pure (no node: imports): the contract and the browser bundle read it.
 */

/**
 * Watchers fsbench runs itself: the native recursive inotify reader, the native fanotify reader
 * (one filesystem mark), and the Node libraries in a child process.
 */
export const IN_PROCESS_BACKENDS = ['inotify', 'fanotify', 'parcel', 'chokidar', 'fswatch'] as const;

/**
 * The programs people run, each through its adapter in workloads/semantics/programs/: a name
 * added here needs its adapter there, or the host side does not compile. `fswatch-cli` is the
 * fswatch program; `fswatch` is Node's recursive fs.watch, as in the watches workload.
 */
export const PROGRAM_BACKENDS = ['inotifywait', 'fswatch-cli', 'watchman', 'watchdog'] as const;

/**
 * `user`: a watcher of the host operator's own, named by the `watcher` parameter from the host's
 * list (FSBENCH_WATCHERS, host/watcher-list.ts); a job names it and never carries a command line.
 */
export const USER_BACKEND = 'user';

export const SEMANTICS_BACKENDS = [...IN_PROCESS_BACKENDS, ...PROGRAM_BACKENDS, USER_BACKEND] as const;
export type SemanticsBackend = (typeof SEMANTICS_BACKENDS)[number];
