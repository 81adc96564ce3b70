/**
 * The inotify throughput workload (seed 000): W writer threads modify F watched files while one
 * reader drains the inotify queue with a `bufferBytes` read() buffer. `backend: fanotify` puts a
 * fanotify group in inotify's place, fed by the same writers and read the same way.
 */
import { z } from 'zod';
import type { MetricDocs } from '../../metrics.js';
import { directoryOr, numberParam, type ParamSpecs, type ParamValue } from '../../params.js';
import { containerParams, containerSkipReason } from '../container.js';
import { RUN_OVERHEAD_MS, type WorkloadContract } from '../slice.js';

/**
 * `sizeof(struct inotify_event) + NAME_MAX + 1` on Linux: a read() buffer smaller than one
 * maximal event fails with EINVAL (inotify(7)).
 */
export const MIN_INOTIFY_BUFFER = 16 + 255 + 1;

/**
 * The largest FAN_REPORT_DFID_NAME record: 24 bytes of metadata, then one info record (header and
 * fsid 12, struct file_handle 8, up to MAX_HANDLE_SZ 128 handle bytes, a name of up to NAME_MAX
 * 255 bytes and its NUL), padded to 4. A read() buffer smaller than the next record fails with
 * EINVAL, and a mount or filesystem mark may queue any name (native/probe.c checks the same).
 */
export const MIN_FANOTIFY_DFID_BUFFER = 24 + Math.ceil((12 + 8 + 128 + 255 + 1) / 4) * 4;

export const INOTIFY_BACKENDS = ['inotify', 'fanotify', 'parcel', 'fswatch', 'chokidar', 'inotifywait', 'watchman'] as const;
/** The watchers run as programs of their own (Debian's inotify-tools and watchman), read and stopped by fsbench. */
const PROGRAM_BACKENDS: readonly ParamValue[] = ['inotifywait', 'watchman'];
export const FANOTIFY_MARKS = ['inode', 'dir', 'mount', 'filesystem'] as const;
export const FANOTIFY_REPORTS = ['dfid-name', 'fid'] as const;

export const inotifyParams = {
  backend: {
    kind: 'enum',
    values: INOTIFY_BACKENDS,
    default: 'inotify',
    doc:
      'Who watches: `inotify` is the native raw reader; `fanotify` the same reader on a fanotify group (see `mark`, ' +
      '`fanotifyReport`); `parcel` is @parcel/watcher subscribed to the directory; `fswatch` is Node\'s fs.watch; ' +
      '`chokidar` is chokidar 5 (over fs.watch) watching the directory or the files; `inotifywait` is the program ' +
      '(Debian\'s inotify-tools), `inotifywait -m -e modify` on the files, or `-m -r` on the directory with `watch: dir`; ' +
      '`watchman` is a subscription to a private watchman server (Debian\'s watchman) started for the run, watching the ' +
      'directory (`watch: dir` only). A program\'s every record about a workload\'s file is one event; one that is not ' +
      'installed fails the run naming its Debian package. All seven are fed by the same native writers.',
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
    doc:
      'The raw reader\'s read() buffer, for `inotify` and `fanotify`; the other backends ignore it. With ' +
      `\`fanotifyReport: dfid-name\` it must hold the largest record, ${MIN_FANOTIFY_DFID_BUFFER} B (smaller cells are skipped).`,
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
      'new instance) and restored afterwards; with `backend: fanotify` to /proc/sys/fs/fanotify/max_queued_events ' +
      'instead, which fanotify_init copies the same way. `system` leaves the machine\'s value alone; the result records ' +
      'it either way (fanotify\'s in the run\'s info, `fanotifyMaxQueuedEvents`).',
  },
  watch: {
    kind: 'enum',
    values: ['files', 'dir'],
    default: 'files',
    doc:
      '`files`: one watch per file; `dir`: one watch on the directory, whose events carry file names. Not for ' +
      '`backend: fanotify`, where `mark` says what is watched: a fanotify cell with `watch: dir` is skipped.',
  },
  mark: {
    kind: 'enum',
    values: FANOTIFY_MARKS,
    default: 'inode',
    doc:
      '`backend: fanotify` only: what the group marks. `inode`: each file (like inotify\'s `watch: files`); `dir`: ' +
      'the directory, with FAN_EVENT_ON_CHILD (like `watch: dir`); `mount`: the mount the directory is on ' +
      '(FAN_MARK_MOUNT); `filesystem`: its whole filesystem (FAN_MARK_FILESYSTEM). Mount and filesystem marks see ' +
      'every file there: events of files not the workload\'s are `foreignEvents`, never `events`.',
  },
  fanotifyReport: {
    kind: 'enum',
    values: FANOTIFY_REPORTS,
    default: 'dfid-name',
    doc:
      '`backend: fanotify` only: how events name their file. `dfid-name` (FAN_REPORT_DFID_NAME): the directory\'s ' +
      'file handle and the name; `fid` (FAN_REPORT_FID): the file\'s own handle. Either way each event is matched to ' +
      'the workload\'s files by file handle (name_to_handle_at at start).',
  },
  fanotifyUnlimitedQueue: {
    kind: 'boolean',
    default: false,
    doc:
      '`backend: fanotify` only: FAN_UNLIMITED_QUEUE, no queue limit at all (so no overflows, and `maxQueuedEvents` ' +
      'must stay `system`). Each queued event is kernel memory, so a host allows it only when FSBENCH_MAX_QUEUED_EVENTS ' +
      'is 2147483647.',
  },
  target: {
    kind: 'text',
    default: 'tmpfs',
    allowed: "'tmpfs' or a normalised absolute directory path",
    maxLength: 4096,
    check: directoryOr('tmpfs'),
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
      'writers stop and then empties the queue, which measures the read path alone (`inotify` and `fanotify` only).',
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
      'gives one write-to-event latency sample; 0 turns sampling off. `inotify` and `fanotify` only.',
  },
} as const satisfies ParamSpecs;

/** The native reader reads these; the others are Node libraries in the fsbench process, or programs. */
function nativeReader(backend: ParamValue | undefined): boolean {
  return backend === undefined || backend === 'inotify' || backend === 'fanotify';
}

/**
 * Combinations that cannot be measured meaningfully become `skipped` runs with this reason.
 * Parameters absent from a cell have their defaults.
 */
export function inotifySkipReason(p: Readonly<Record<string, ParamValue>>): string | undefined {
  const fanotify = p['backend'] === 'fanotify';
  if (p['backend'] === 'parcel' && p['watch'] === 'files') {
    return '@parcel/watcher only watches directories: use watch: dir with backend: parcel';
  }
  if (p['backend'] === 'watchman' && p['watch'] !== 'dir') {
    return 'watchman only watches directories: use watch: dir with backend: watchman';
  }
  if (!nativeReader(p['backend']) && p['mode'] === 'drain') {
    return 'drain mode measures the raw read path and exists only for backend: inotify and backend: fanotify';
  }
  const niced = p['readerNice'] !== undefined && p['readerNice'] !== 0;
  if (!nativeReader(p['backend']) && (niced || p['pin'] === true)) {
    return PROGRAM_BACKENDS.includes(p['backend'] ?? 'inotify')
      ? 'readerNice and pin apply to the native reader thread; a program backend reads in processes of its own, which run as the system schedules them'
      : 'readerNice and pin apply to the native reader thread; with a Node backend the watcher is the fsbench process itself';
  }
  if (!fanotify) {
    const fanotifyOnly = [
      ['mark', p['mark'], 'inode'],
      ['fanotifyReport', p['fanotifyReport'], 'dfid-name'],
      ['fanotifyUnlimitedQueue', p['fanotifyUnlimitedQueue'], false],
    ] as const;
    for (const [name, value, def] of fanotifyOnly) {
      if (value !== undefined && value !== def) return `${name} configures the fanotify group and applies only to backend: fanotify`;
    }
    return undefined;
  }
  if (p['watch'] === 'dir') {
    return 'with backend: fanotify, mark chooses what is watched (mark: dir is the directory watch); leave watch at files';
  }
  if (p['fanotifyUnlimitedQueue'] === true && p['maxQueuedEvents'] !== undefined && p['maxQueuedEvents'] !== 'system') {
    return 'fanotifyUnlimitedQueue removes the queue limit, so maxQueuedEvents has nothing to set: leave it at system';
  }
  const buffer = p['bufferBytes'];
  if ((p['fanotifyReport'] ?? 'dfid-name') === 'dfid-name' && typeof buffer === 'number' && buffer < MIN_FANOTIFY_DFID_BUFFER) {
    return (
      `bufferBytes ${buffer} is smaller than ${MIN_FANOTIFY_DFID_BUFFER} B, the largest FAN_REPORT_DFID_NAME record ` +
      '(metadata, a 128-byte file handle and a NAME_MAX name): read() fails with EINVAL on such a record; use a larger ' +
      'buffer or fanotifyReport: fid'
    );
  }
  return undefined;
}

const count = z.number().int().nonnegative();
const rate = z.number().nonnegative();
/** null where a backend cannot observe the quantity (for example overflows hidden by fs.watch). */
const observed = <T extends z.ZodType>(t: T) => t.nullable();
/** Metrics added after runs were stored: a stored run without them reads as "not observed". */
const added = <T extends z.ZodType>(t: T) => t.nullable().default(null);

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
    foreignEvents: added(count),
    maxQueueDepth: added(count),
  })
  .strict();
/**
 * What a run reports. The schema's input: metrics added after runs were stored (`added`) may be
 * left out, by older results and fixtures alike, and parse as null.
 */
export type InotifyMetrics = z.input<typeof InotifyMetrics>;

/** The metrics a summary table shows first, in order. */
export const INOTIFY_HEADLINE_METRICS = ['eventsPerSec', 'events', 'writes', 'overflows', 'coalescedFraction', 'readerCpuFraction', 'latencyP99Us'] as const;

/**
 * Throughput in events is the headline, but a reader that falls behind sees fewer events for
 * the same writes (the kernel merges identical unread events) without losing any: hence writes
 * beside events, and coalescing as the lower-is-better side of the same story.
 */
export const INOTIFY_METRIC_DOCS = {
  writes: { unit: 'writes', direction: 'higher', doc: 'Writes the writer threads completed during `duration`.' },
  writesPerSec: { unit: 'writes/s', direction: 'higher', doc: 'Writes per second of writing time.' },
  events: {
    unit: 'events',
    direction: 'higher',
    doc: 'IN_MODIFY (fanotify: FAN_MODIFY) events delivered for the workload\'s files (merged events count once).',
  },
  eventsPerSec: {
    unit: 'events/s',
    direction: 'higher',
    doc: 'Events per second from writer start to the end of the drain (`concurrent`), or over the drain alone (`drain`).',
  },
  overflows: {
    unit: 'overflows',
    direction: 'lower',
    doc:
      'IN_Q_OVERFLOW (fanotify: FAN_Q_OVERFLOW) records read: the kernel dropped events. n/a where a backend cannot see it: ' +
      'the Node libraries; inotifywait unless it printed Q_OVERFLOW (inotify-tools 3.22 drops the overflow without a word). ' +
      'watchman: the recrawls it reported ("Recrawled this watch N times"), one per overflow it noticed (overflows during a pending recrawl count once).',
  },
  reads: {
    unit: 'reads',
    direction: 'neither',
    doc: 'read() calls of the raw reader; callback batches for the Node backends; for a program, the reads of its output that carried events.',
  },
  bytesRead: { unit: 'bytes', direction: 'neither', doc: 'Bytes the read() calls returned (raw reader only).' },
  meanEventsPerRead: { unit: 'events/read', direction: 'neither', doc: 'Records per read(), on average: how full each read came back.' },
  maxEventsPerRead: { unit: 'events/read', direction: 'neither', doc: 'The most records a single read() returned.' },
  coalescedFraction: { unit: '1', direction: 'lower', doc: '1 - events/writes: the share of writes merged into an earlier unread event.' },
  writesPerEvent: {
    unit: 'writes/event',
    direction: 'lower',
    doc:
      'Writes per delivered event; 1 when the reader keeps up with every write. fanotify merges any queued identical ' +
      'event, not only the last one as inotify does: compare backends by this, not by raw event rates.',
  },
  elapsedMs: { unit: 'ms', direction: 'neither', doc: 'The whole run: writing plus draining.' },
  writeMs: { unit: 'ms', direction: 'neither', doc: 'How long the writers wrote (the `duration` asked for, as measured).' },
  drainMs: { unit: 'ms', direction: 'lower', doc: 'How long the reader took to empty the queue after the writers stopped.' },
  drainTimedOut: { unit: '1', direction: 'lower', doc: '1 when the queue was still not empty at `drainTimeout`.' },
  readerUserMs: { unit: 'ms', direction: 'neither', doc: 'The reader thread\'s user CPU time.' },
  readerSysMs: { unit: 'ms', direction: 'neither', doc: 'The reader thread\'s system CPU time.' },
  readerCpuFraction: {
    unit: '1',
    direction: 'neither',
    doc:
      "The reader's CPU time as a share of one CPU over the run: low while it fell behind (overflows, merged writes) means it was starved, not that it was efficient. " +
      "The Node backends: the fsbench process's; a program: its own processes' (watchman: the server's and the client's), in the kernel's 10 ms ticks.",
  },
  readerVoluntaryCtxSwitches: { unit: 'switches', direction: 'neither', doc: 'Times the reader blocked (waiting for events).' },
  readerInvoluntaryCtxSwitches: { unit: 'switches', direction: 'lower', doc: 'Times the reader was preempted, mostly by the writers.' },
  writersUserMs: { unit: 'ms', direction: 'neither', doc: 'The writer threads\' user CPU time, summed.' },
  writersSysMs: { unit: 'ms', direction: 'neither', doc: 'The writer threads\' system CPU time, summed.' },
  latencySamples: { unit: 'samples', direction: 'neither', doc: 'Write-to-event latency samples taken (raw reader only).' },
  latencyP50Us: { unit: 'us', direction: 'lower', doc: 'Median write-to-event latency.' },
  latencyP90Us: { unit: 'us', direction: 'lower', doc: '90th percentile of write-to-event latency.' },
  latencyP99Us: { unit: 'us', direction: 'lower', doc: '99th percentile of write-to-event latency.' },
  latencyMaxUs: { unit: 'us', direction: 'lower', doc: 'Largest write-to-event latency sampled.' },
  peakRssBytes: { unit: 'bytes', direction: 'lower', doc: 'Peak resident memory of the measuring process; for a program, of its own processes, summed.' },
  foreignEvents: {
    unit: 'events',
    direction: 'neither',
    doc:
      'fanotify only: FAN_MODIFY events of files that are not the workload\'s (a mount or filesystem mark sees the whole ' +
      'filesystem), read and discarded; they are not in `events`. n/a for the other backends.',
  },
  maxQueueDepth: {
    unit: 'events',
    direction: 'neither',
    doc:
      'fanotify only: the most events found queued (FIONREAD, sampled before a read at most every 10 ms, and before ' +
      'the first read of a drain): a lower bound on the deepest the queue got. n/a for the other backends.',
  },
} as const satisfies MetricDocs<InotifyMetrics>;

/** Every parameter of a cell, the container's included: what the workload's code parses a cell with. */
export const inotifySpecs = { ...inotifyParams, ...containerParams } as const satisfies ParamSpecs;

export const inotifyContract: WorkloadContract = {
  params: inotifySpecs,
  metrics: InotifyMetrics,
  metricDocs: INOTIFY_METRIC_DOCS,
  headline: INOTIFY_HEADLINE_METRICS,
  sweeps: [{ param: 'bufferBytes', metric: 'eventsPerSec' }],
  skipReason: (p) => containerSkipReason(p) ?? inotifySkipReason(p),
  exclusive: true,
  // The writers run for `duration`; the drain after them is usually short next to drainTimeout.
  estimateRunMs: (p) => RUN_OVERHEAD_MS + numberParam(p, 'duration') + numberParam(p, 'drainTimeout') / 10,
  // Every backend's writers are the probe's threads; inotify and fanotify read in it too.
  native: ['probe'],
  sandbox: { workDirParam: () => 'target' },
};
