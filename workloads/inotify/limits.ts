/**
 * The kernel's inotify (and, for `backend: fanotify`, fanotify) limits a cell runs under. They are
 * host-wide (per user namespace), so each change is journaled with its original value and
 * restored by the run's teardown, also after a crash (by the next start's journal recovery).
 */
import type { InotifyLimits } from '../../contract/fingerprint.js';
import { errnoOf, FsbenchError } from '../../contract/errors.js';
import { readInotifyLimits } from '../../host/fingerprint.js';
import type { KnownSysctl } from '../../host/journal-entry.js';
import type { Teardown } from '../../host/teardown.js';
import { readSysctl, setSysctl } from '../../host/sysctl.js';

const SYSCTL: Readonly<Record<keyof InotifyLimits, KnownSysctl>> = {
  maxQueuedEvents: '/proc/sys/fs/inotify/max_queued_events',
  maxUserWatches: '/proc/sys/fs/inotify/max_user_watches',
  maxUserInstances: '/proc/sys/fs/inotify/max_user_instances',
};

export interface LimitNeeds {
  /** An exact queue length, or undefined to leave the system's value. */
  readonly maxQueuedEvents: number | undefined;
  /** Watches the run adds; the limit is raised when it is lower (never lowered). */
  readonly watches: number;
  /** inotify instances the run adds. */
  readonly instances: number;
}

/** fanotify's queue length: copied into each new group by fanotify_init, like inotify's. */
const FANOTIFY_QUEUE: KnownSysctl = '/proc/sys/fs/fanotify/max_queued_events';

async function setLimit(teardown: Teardown, name: keyof InotifyLimits, value: number): Promise<void> {
  await setSysctl(teardown, SYSCTL[name], value);
}

/**
 * Applies what a run needs and returns the limits actually in force, read back from the
 * kernel. Raised user limits leave headroom, because other watchers of the same user count too.
 */
export async function applyLimits(teardown: Teardown, needs: LimitNeeds): Promise<InotifyLimits> {
  const now = await readInotifyLimits();
  if (needs.maxQueuedEvents !== undefined && now.maxQueuedEvents !== needs.maxQueuedEvents) {
    await setLimit(teardown, 'maxQueuedEvents', needs.maxQueuedEvents);
  }
  if (now.maxUserWatches < needs.watches + 8192) {
    await setLimit(teardown, 'maxUserWatches', needs.watches + 8192);
  }
  if (now.maxUserInstances < needs.instances + 16) {
    await setLimit(teardown, 'maxUserInstances', needs.instances + 128);
  }
  const actual = await readInotifyLimits();
  if (needs.maxQueuedEvents !== undefined && actual.maxQueuedEvents !== needs.maxQueuedEvents) {
    throw new FsbenchError(
      'LIMIT_WRITE_FAILED',
      `max_queued_events reads ${actual.maxQueuedEvents} after writing ${needs.maxQueuedEvents}; refusing to measure under a different limit`,
    );
  }
  return actual;
}

/**
 * Sets fs.fanotify.max_queued_events for a fanotify run (undefined: leaves it alone) and returns
 * the value in force, read back from the kernel. Without fanotify in the kernel the file is
 * missing: the probe's fanotify_init then says why, as a refusal.
 */
export async function applyFanotifyLimits(teardown: Teardown, maxQueuedEvents: number | undefined): Promise<number | null> {
  let now: number;
  try {
    now = await readSysctl(FANOTIFY_QUEUE);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return null;
    throw err;
  }
  if (maxQueuedEvents === undefined) return now;
  if (now !== maxQueuedEvents) await setSysctl(teardown, FANOTIFY_QUEUE, maxQueuedEvents);
  const actual = await readSysctl(FANOTIFY_QUEUE);
  if (actual !== maxQueuedEvents) {
    throw new FsbenchError(
      'LIMIT_WRITE_FAILED',
      `fs.fanotify.max_queued_events reads ${actual} after writing ${maxQueuedEvents}; refusing to measure under a different limit`,
    );
  }
  return actual;
}
