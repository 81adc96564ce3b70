/**
 * What a watcher reported, in the one vocabulary the semantics workload matches against the
 * operations it made. Every backend's adapter, in-process or a program people run, turns its
 * watcher's own words into these; a watcher of the user's own writes them directly, one JSON
 * object per line (`WatcherLine`), so its output needs no adapter.
 *
 * Pure (no node: imports): the reports and the browser bundle read the kinds too.
 */
import { z } from 'zod';

/**
 * The kinds of change a watcher can say. `renamed` names the new path (and `from`, the old one,
 * where the watcher pairs them); `renamed-from` is the half of a rename that names only the old
 * path (inotify's IN_MOVED_FROM, chokidar's unlink of a moved file is `deleted`: that is what it
 * said). `overflow` is the kernel saying it dropped events (IN_Q_OVERFLOW, FAN_Q_OVERFLOW), so a
 * loss is told apart from the watcher's own. `unknown`: the watcher said something changed at the
 * path without saying what (Node's fs.watch `rename`, fswatch without flags).
 */
export const CHANGE_KINDS = ['created', 'modified', 'deleted', 'renamed', 'renamed-from', 'attrib', 'overflow', 'unknown'] as const;
export type ChangeKind = (typeof CHANGE_KINDS)[number];

/** Longest path a watcher may report: PATH_MAX. A longer one is refused, not matched. */
const MAX_PATH = 4096;

/**
 * One line of a watcher of the user's own (docs/semantics.md): `{"path": "/abs/path", "kind":
 * "created", "from": "/old/path", "time": 1733480000.123}`. `time` (seconds since the epoch, as
 * the watcher saw it) is kept for the record only: latency is measured from when the line
 * arrived, on one clock for every backend.
 */
export const WatcherLine = z
  .object({
    path: z.string().min(1).max(MAX_PATH),
    kind: z.enum(CHANGE_KINDS),
    from: z.string().min(1).max(MAX_PATH).optional(),
    time: z.number().optional(),
  })
  .strict();
export type WatcherLine = z.infer<typeof WatcherLine>;

/** A reported change as the workload holds it: the line, and when it arrived (process.hrtime.bigint(), CLOCK_MONOTONIC ns). */
export interface WatchEvent {
  readonly kind: ChangeKind;
  /** Absolute path; for `overflow`, the watched root. */
  readonly path: string;
  readonly from?: string;
  readonly atNs: bigint;
}
