/**
 * The inotify throughput workload (seed 000): W writer threads modify F watched files while one
 * reader drains the inotify queue with a `bufferBytes` read() buffer.
 */
import { z } from 'zod';
import type { ParamSpecs, ParamValue } from '../params.js';

/**
 * `sizeof(struct inotify_event) + NAME_MAX + 1` on Linux: a read() buffer smaller than one
 * maximal event fails with EINVAL (inotify(7)).
 */
export const MIN_INOTIFY_BUFFER = 16 + 255 + 1;

export const INOTIFY_BACKENDS = ['inotify', 'parcel', 'fswatch'] as const;

export const inotifyParams = {
  backend: {
    kind: 'enum',
    values: INOTIFY_BACKENDS,
    default: 'inotify',
    doc:
      'Who watches: `inotify` is the native raw reader; `parcel` is @parcel/watcher subscribed to the directory; ' +
      '`fswatch` is Node\'s fs.watch. All three are fed by the same native writers.',
  },
  writers: {
    kind: 'integer',
    min: 1,
    max: 1024,
    default: 8,
    doc: 'Writer threads. Files are assigned to writers round-robin; with more writers than files, writers share files.',
  },
  files: {
    kind: 'integer',
    min: 1,
    max: 65536,
    default: 128,
    doc: 'Watched files the writers modify (named `file.NNNNN` in the target directory).',
  },
  bufferBytes: {
    kind: 'size',
    min: MIN_INOTIFY_BUFFER,
    max: 64 * 1024 ** 2,
    default: '64KiB',
    minReason:
      `is smaller than ${MIN_INOTIFY_BUFFER} B, the smallest read() buffer the kernel accepts for inotify ` +
      '(sizeof(struct inotify_event) + NAME_MAX + 1); a smaller buffer fails with EINVAL',
    doc: 'The raw reader\'s read() buffer. Only the `inotify` backend has one; the others ignore it.',
  },
  duration: {
    kind: 'duration',
    min: 100,
    max: 600_000,
    default: '3s',
    doc: 'How long the writers write. The reader then drains what is queued (see `drainTimeout`).',
  },
  writeBytes: {
    kind: 'size',
    min: 1,
    max: 1024 ** 2,
    default: '1B',
    doc: 'Bytes per write, always at offset 0, so the files never grow.',
  },
  maxQueuedEvents: {
    kind: 'integer',
    min: 16,
    max: 2 ** 31 - 1,
    keywords: ['system'],
    default: 'system',
    doc:
      'Written to /proc/sys/fs/inotify/max_queued_events before the watcher starts (the kernel copies it into each ' +
      'new instance) and restored afterwards. `system` leaves the machine\'s value alone; the result records it either way.',
  },
  watch: {
    kind: 'enum',
    values: ['files', 'dir'],
    default: 'files',
    doc: '`files`: one watch per file; `dir`: one watch on the directory, whose events carry file names.',
  },
  target: {
    kind: 'text',
    default: 'tmpfs',
    allowed: "'tmpfs' or an absolute directory path",
    maxLength: 4096,
    check: (v: ParamValue) =>
      v === 'tmpfs' || (typeof v === 'string' && v.startsWith('/'))
        ? undefined
        : "must be 'tmpfs' or an absolute directory path",
    doc:
      'Where the files live. `tmpfs` mounts a private tmpfs under the scratch directory for the run and removes it ' +
      'afterwards (needs CAP_SYS_ADMIN); a path uses an existing directory, in which the run makes and removes its own subdirectory.',
  },
  pin: {
    kind: 'boolean',
    default: false,
    doc: 'Pin the reader to CPU 0 and the writers to the other CPUs, so they never compete for one core. Needs at least 2 CPUs.',
  },
  readerNice: {
    kind: 'integer',
    min: -20,
    max: 19,
    default: 0,
    doc: 'Nice value of the reader thread alone. Negative values need CAP_SYS_NICE.',
  },
  mode: {
    kind: 'enum',
    values: ['concurrent', 'drain'],
    default: 'concurrent',
    doc:
      '`concurrent`: the reader drains while the writers write, as in the seed; `drain`: the reader waits until the ' +
      'writers stop and then empties the queue, which measures the read path alone (raw `inotify` backend only).',
  },
  drainTimeout: {
    kind: 'duration',
    min: 100,
    max: 300_000,
    default: '10s',
    doc: 'Upper bound on the drain after the writers stop; a run that hits it says so (`drainTimedOut` = 1).',
  },
  latencySampling: {
    kind: 'integer',
    min: 0,
    max: 1_000_000,
    default: 256,
    doc:
      'Every Nth write of each writer is followed by a timestamped write to that writer\'s marker file, whose event ' +
      'gives one write-to-event latency sample; 0 turns sampling off. Raw `inotify` backend only.',
  },
} as const satisfies ParamSpecs;

/** Combinations that cannot be measured meaningfully become `skipped` runs with this reason. */
export function inotifySkipReason(p: Readonly<Record<string, ParamValue>>): string | undefined {
  if (p['backend'] === 'parcel' && p['watch'] === 'files') {
    return '@parcel/watcher only watches directories: use watch: dir with backend: parcel';
  }
  if (p['backend'] !== 'inotify' && p['mode'] === 'drain') {
    return 'drain mode measures the raw read path and exists only for backend: inotify';
  }
  if (p['backend'] !== 'inotify' && (p['readerNice'] !== 0 || p['pin'] === true)) {
    return 'readerNice and pin apply to the native reader thread; with a Node backend the watcher is the fsbench process itself';
  }
  return undefined;
}

const count = z.number().int().nonnegative();
const rate = z.number().nonnegative();
/** null where a backend cannot observe the quantity (for example overflows hidden by fs.watch). */
const observed = <T extends z.ZodType>(t: T) => t.nullable();

/** Metric names are stable: the coordinator, compare and dashboard read them by name. */
export const InotifyMetrics = z
  .object({
    writes: count,
    writesPerSec: rate,
    events: count,
    eventsPerSec: rate,
    overflows: observed(count),
    reads: count,
    bytesRead: observed(count),
    meanEventsPerRead: rate,
    maxEventsPerRead: count,
    coalescedFraction: z.number(),
    writesPerEvent: observed(rate),
    elapsedMs: rate,
    writeMs: rate,
    drainMs: rate,
    drainTimedOut: z.union([z.literal(0), z.literal(1)]),
    readerUserMs: rate,
    readerSysMs: rate,
    readerCpuFraction: rate,
    readerVoluntaryCtxSwitches: count,
    readerInvoluntaryCtxSwitches: count,
    writersUserMs: rate,
    writersSysMs: rate,
    latencySamples: count,
    latencyP50Us: observed(rate),
    latencyP90Us: observed(rate),
    latencyP99Us: observed(rate),
    latencyMaxUs: observed(rate),
    peakRssBytes: count,
  })
  .strict();
export type InotifyMetrics = z.infer<typeof InotifyMetrics>;

/** The metrics a summary table shows first, in order. */
export const INOTIFY_HEADLINE_METRICS = ['eventsPerSec', 'events', 'writes', 'overflows', 'coalescedFraction', 'readerCpuFraction', 'latencyP99Us'] as const;
