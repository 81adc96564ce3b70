/**
 * What the watcher programs more than one workload runs print (inotifywait, watchman): every word
 * and field they may say, so that anything else is refused rather than guessed at. Their output
 * is untrusted input like any other. The semantics workload's own (fswatch, watchdog) are in its
 * slice, which re-exports these.
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

const relativeName = z.string().min(1).max(MAX_PROGRAM_PATH);

/** One file of a watchman subscription result, with the fields the adapters ask for. */
const WatchmanFile = z.object({
  name: relativeName,
  exists: z.boolean(),
  new: z.boolean(),
  type: z.string().max(8),
});

/** A subscription's result: one per settled batch of changes. */
export const WatchmanResult = z.object({
  subscription: z.string().max(256),
  unilateral: z.literal(true),
  is_fresh_instance: z.boolean().optional(),
  warning: z.string().max(8192).optional(),
  files: z.array(WatchmanFile).max(1_000_000).optional(),
});
export type WatchmanResult = z.infer<typeof WatchmanResult>;

/**
 * One line of `watchman -j --persistent --no-pretty` (watchman 4.9): the answer to `subscribe`,
 * then one unilateral result per settled batch of changes, or an error. Unknown fields (version,
 * clock, since) are watchman's bookkeeping and are stripped.
 */
export const WatchmanLine = z.union([z.object({ error: z.string().max(8192) }), z.object({ subscribe: z.string().max(256) }), WatchmanResult]);
export type WatchmanLine = z.infer<typeof WatchmanLine>;

/** The answer to `watchman watch ROOT`. */
export const WatchmanWatchAnswer = z.union([
  z.object({ error: z.string().max(8192) }),
  z.object({ watch: z.string().max(MAX_PROGRAM_PATH), watcher: z.string().max(64).optional() }),
]);
