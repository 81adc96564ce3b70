/**
 * What the semantics workload asks of a watcher, whichever it is: start watching a root
 * recursively, report each change as a WatchEvent (contract/workloads/semantics/events.ts) the
 * moment it arrives, and stop. In-process backends (raw inotify, fanotify, @parcel/watcher,
 * chokidar, Node's fs.watch) and the programs people run (inotifywait, fswatch, watchman,
 * watchdog, a watcher of the user's own) each have one adapter behind this interface.
 *
 * Readiness is the workload's business, not the adapter's: once `start` resolves, the workload
 * writes marker files into the root until the watcher reports one, so every backend is judged
 * from the same moment and no adapter trusts a program's own "ready" line alone.
 */
import type { WatchEvent } from '../../contract/workloads/semantics/events.js';

export interface WatcherExit {
  /** The program's exit code or signal, null for an in-process backend. */
  readonly exit: number | string | null;
  /** The end of what it wrote to stderr (at most a few KiB), for a run that failed. */
  readonly stderrTail: string;
  /** Creations the watcher reported from listing a new directory rather than from the kernel (fsbench's inotify reader), when it says. */
  readonly synthesized?: number;
}

export interface RunningWatcher {
  /** Stops the watcher and waits until it is gone: no event is delivered after this resolves. */
  stop(): Promise<WatcherExit>;
}

export interface WatcherAdapter {
  /** The backend's name as the `backend` parameter spells it. */
  readonly name: string;
  /** Whether it passes the kernel's overflow on as an `overflow` event; without, the run's `overflows` is null (unknown). */
  readonly reportsOverflow?: boolean;
  /**
   * Starts watching `root` and everything under it; resolves once the watcher runs (a program
   * started and, where it says so, its watches established). Rejects with an FsbenchError when
   * it cannot start: a missing program names its Debian package (`PROGRAM_MISSING`-style code
   * from the catalog). `signal` aborts the start and stops the watcher.
   */
  start(root: string, onEvent: (event: WatchEvent) => void, signal: AbortSignal): Promise<RunningWatcher>;
}
