/**
 * What the watcher programs people run print, as the semantics workload's adapters read it
 * (workloads/semantics/programs/): every word and field they may say, so that anything else is
 * refused rather than guessed at. Their output is untrusted input like any other. What the
 * throughput workload's programs print too (inotifywait, watchman) is in contract/watcher-programs.ts.
 *
 * Pure (no node: imports).
 */
import { z } from 'zod';

import { MAX_PROGRAM_PATH } from '../../watcher-programs.js';

export { INOTIFYWAIT_EVENTS, InotifywaitEvent, MAX_PROGRAM_PATH, WatchmanLine, WatchmanWatchAnswer } from '../../watcher-programs.js';

/** fswatch's event flags (libfswatch 1.14, `%f`). */
export const FSWATCH_FLAGS = [
  'NoOp', 'PlatformSpecific', 'Created', 'Updated', 'Removed', 'Renamed', 'OwnerModified', 'AttributeModified',
  'MovedFrom', 'MovedTo', 'IsFile', 'IsDir', 'IsSymLink', 'Link', 'Overflow', 'CloseWrite',
] as const;
export const FswatchFlag = z.enum(FSWATCH_FLAGS);
export type FswatchFlag = z.infer<typeof FswatchFlag>;

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
