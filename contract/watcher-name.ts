/**
 * The name of a watcher of a host operator's own, as the host's list (FSBENCH_WATCHERS,
 * host/watcher-list.ts) and a cell's `watcher` parameter spell it: a job carries this name and
 * never a command line, so it is short, lower case, and nothing a shell or a path could read.
 */
export const WATCHER_NAME = /^[a-z][a-z0-9-]{0,31}$/;
