/**
 * What the watcher programs people run print, as the semantics workload's adapters read it
 * (workloads/semantics/programs/): every word and field they may say, so that anything else is
 * refused rather than guessed at. Their output is untrusted input like any other.
 *
 * Pure (no node: imports).
 */
import { z } from 'zod';

/** Longest path a program may report (PATH_MAX); a record naming a longer one is refused. */
export const MAX_PROGRAM_PATH = 4096;

/** inotifywait's event names (inotify-tools 3.22, `%e`): all of them, whether or not the adapter asks for them. */
export const INOTIFYWAIT_EVENTS = [
  'ACCESS', 'MODIFY', 'ATTRIB', 'CLOSE_WRITE', 'CLOSE_NOWRITE', 'CLOSE', 'OPEN', 'MOVED_FROM', 'MOVED_TO', 'MOVE',
  'CREATE', 'DELETE', 'DELETE_SELF', 'MOVE_SELF', 'UNMOUNT', 'Q_OVERFLOW', 'IGNORED', 'ISDIR', 'ONESHOT',
] as const;
export const InotifywaitEvent = z.enum(INOTIFYWAIT_EVENTS);
export type InotifywaitEvent = z.infer<typeof InotifywaitEvent>;

/** fswatch's event flags (libfswatch 1.14, `%f`). */
export const FSWATCH_FLAGS = [
  'NoOp', 'PlatformSpecific', 'Created', 'Updated', 'Removed', 'Renamed', 'OwnerModified', 'AttributeModified',
  'MovedFrom', 'MovedTo', 'IsFile', 'IsDir', 'IsSymLink', 'Link', 'Overflow', 'CloseWrite',
] as const;
export const FswatchFlag = z.enum(FSWATCH_FLAGS);
export type FswatchFlag = z.infer<typeof FswatchFlag>;

const relativeName = z.string().min(1).max(MAX_PROGRAM_PATH);

/** One file of a watchman subscription result, with the fields the adapter asks for. */
const WatchmanFile = z.object({
  name: relativeName,
  exists: z.boolean(),
  new: z.boolean(),
  type: z.string().max(8),
});

/**
 * One line of `watchman -j --persistent --no-pretty` (watchman 4.9): the answer to `subscribe`,
 * then one unilateral result per settled batch of changes, or an error. Unknown fields (version,
 * clock, since) are watchman's bookkeeping and are stripped.
 */
export const WatchmanLine = z.union([
  z.object({ error: z.string().max(8192) }),
  z.object({ subscribe: z.string().max(256) }),
  z.object({
    subscription: z.string().max(256),
    unilateral: z.literal(true),
    is_fresh_instance: z.boolean().optional(),
    warning: z.string().max(8192).optional(),
    files: z.array(WatchmanFile).max(1_000_000).optional(),
  }),
]);
export type WatchmanLine = z.infer<typeof WatchmanLine>;

/** The answer to `watchman watch ROOT`. */
export const WatchmanWatchAnswer = z.union([
  z.object({ error: z.string().max(8192) }),
  z.object({ watch: z.string().max(MAX_PROGRAM_PATH), watcher: z.string().max(64).optional() }),
]);

/**
 * One line of watchdog_observer.py: `ready` once its Observer watches the root, then each change
 * watchdog's handler was given (`moved` carries both paths: watchdog pairs inotify's halves by
 * their cookie), or `failure` (watchdog not importable, the root not watchable).
 */
export const WatchdogLine = z.union([
  z.object({ ready: z.literal(true) }).strict(),
  z.object({ failure: z.enum(['no-watchdog', 'cannot-watch']), detail: z.string().max(4096) }).strict(),
  z
    .object({
      event: z.enum(['created', 'modified', 'deleted', 'moved']),
      dir: z.boolean(),
      path: z.string().min(1).max(MAX_PROGRAM_PATH),
      dest: z.string().min(1).max(MAX_PROGRAM_PATH).optional(),
    })
    .strict(),
]);
export type WatchdogLine = z.infer<typeof WatchdogLine>;
