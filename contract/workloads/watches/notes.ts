/**
 * The watches workload's notes as the report asks for them (WorkloadContract.notes): its rules
 * (watchesNotes, beside its metrics in index.ts) per cell, and how each kind reads summarised
 * over several cells.
 */
import { noteMedian, type WorkloadNotes } from '../../notes.js';
import { watchesNotes } from './index.js';

export const watchesNoteRules: WorkloadNotes = {
  cell: (c) => watchesNotes(c.params, (metric) => noteMedian(c, metric)),
  gist: {
    'watch-limit': (r) =>
      `the tree hit fs.inotify.max_user_watches with ENOSPC, the "System limit for number of file watchers reached" users see${r ? `; fs.inotify.max_user_watches = ${r} would have sufficed` : ''}.`,
    'host-wide-accounting': () =>
      "kernel memory per watch is a delta of /proc/meminfo SUnreclaim, shared by the whole host (no memory cgroup could be made): other processes' allocations mix in, so small trees read noisy.",
  },
  figures: {},
};
