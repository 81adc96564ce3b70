/**
 * The watchers people run as programs, fed by the same native writers as the raw reader:
 * `inotifywait -m` on the files (`-m -r` on the directory) and a subscription to a private
 * watchman server. Every record a program prints about a workload's file is one event delivered;
 * nothing it prints is kept, only counted.
 *
 * Overflows are what the program says of them: inotifywait prints `Q_OVERFLOW` where it passes the
 * kernel's overflow on (inotify-tools 3.22 drops it without a word, so none printed is null,
 * unknown); watchman recrawls after one and says so in a warning, "Recrawled this watch N
 * times", so the largest N it printed is the count (overflows while a recrawl was pending count once).
 */
import path from 'node:path';
import { FsbenchError } from '../../contract/errors.js';
import { InotifywaitEvent, type WatchmanResult } from '../../contract/watcher-programs.js';
import { processesUsage } from '../../host/process-usage.js';
import { debianPackage, startProgram, type ProgramExit } from '../../host/watcher-program.js';
import { startWatchman } from '../../host/watchman.js';
import { fileName, newDelivery, type Delivery, type Watcher } from './watchers.js';

export const PROGRAM_WATCHERS = ['inotifywait', 'watchman'] as const;
export type ProgramWatcher = (typeof PROGRAM_WATCHERS)[number];

export interface ProgramWatcherOptions {
  /** PATH to find the program on (default: this process's PATH). */
  readonly path?: string;
  /** Where watchman keeps its socket and log (default: the system's temporary directory). */
  readonly tmpDir?: string;
}

/** Events of one record or result, and the moment its output arrived. */
interface Delivered {
  readonly n: number;
  readonly atNs: bigint;
}

/**
 * A program's events are only counted, never kept: no bound on how many a storm may bring
 * (the semantics workload keeps each, and bounds them).
 */
const UNBOUNDED = Number.MAX_SAFE_INTEGER;

/** Counts into `d`; records whose output arrived in one read of the pipe are one batch. */
function counter(d: Delivery): (e: Delivered) => void {
  let batchAt = -1n;
  let batch = 0;
  return (e) => {
    if (e.atNs !== batchAt) {
      batchAt = e.atNs;
      batch = 0;
      d.batches += 1;
    }
    batch += e.n;
    d.events += e.n;
    if (batch > d.maxBatch) d.maxBatch = batch;
    d.lastEventAt = performance.now();
  };
}

/** inotifywait's `%e %w%f` record: a MODIFY of one of the workload's files is an event; Q_OVERFLOW an overflow. */
export function inotifywaitRecord(dir: string, record: string): 'event' | 'overflow' | null {
  const space = record.indexOf(' ');
  if (space <= 0) throw new Error('no event names before a space');
  const names = record.slice(0, space).split(',').map((w) => InotifywaitEvent.parse(w));
  if (names.includes('Q_OVERFLOW')) return 'overflow';
  const file = record.slice(space + 1);
  return names.includes('MODIFY') && path.dirname(file) === dir && path.basename(file).startsWith('file.') ? 'event' : null;
}

const RECRAWLED = /Recrawled this watch (\d+) times?/;

async function startInotifywait(dirGiven: string, watch: 'files' | 'dir', files: number, options: ProgramWatcherOptions, signal: AbortSignal): Promise<Watcher> {
  const dir = path.resolve(dirGiven);
  const delivery = newDelivery();
  const deliver = counter(delivery);
  let overflows = 0;
  const format = ['-e', 'modify', '--format', '%e %w%f%0', '--no-newline'];
  // The files by name on stdin, one a line: a long list would not fit a command line.
  const list = Array.from({ length: files }, (_, i) => path.join(dir, fileName(i)));
  if (watch === 'files' && dir.includes('\n')) throw new FsbenchError('TARGET_UNUSABLE', 'inotifywait reads the files to watch one a line: the target directory\'s path must not hold a newline');
  const program = await startProgram(
    {
      backend: 'inotifywait',
      file: 'inotifywait',
      args: watch === 'files' ? ['-m', ...format, '--fromfile', '-'] : ['-m', '-r', ...format, '--', dir],
      ...(watch === 'files' ? { stdin: `${list.join('\n')}\n` } : {}),
      remedy: debianPackage('inotify-tools'),
      separator: 0x00,
      maxRecordBytes: dir.length + 256,
      path: options.path,
      maxEvents: UNBOUNDED,
    },
    (record, atNs) => {
      const said = inotifywaitRecord(dir, record);
      if (said === 'overflow') overflows += 1;
      return said === 'event' ? [{ n: 1, atNs }] : [];
    },
    deliver,
    signal,
  );
  // Without -q it says so once every watch is in place.
  await program.stderrMatch(/^Watches established\.$/m);
  const processes = { pids: [program.pid], ended: () => program.ended(), stop: () => program.stop() };
  return programWatcher('inotifywait', delivery, () => (overflows > 0 ? overflows : null), processes);
}

interface Processes {
  readonly pids: readonly number[];
  ended(): boolean;
  stop(): Promise<ProgramExit>;
}

/** A program's processes as a Watcher: its usage read from /proc while it runs; one that ended before it was stopped fails the run. */
function programWatcher(backend: ProgramWatcher, delivery: Delivery, overflows: () => number | null, p: Processes): Watcher {
  return {
    delivery,
    overflows,
    usage: () => {
      const u = p.ended() ? null : processesUsage(p.pids);
      if (u === null) throw new FsbenchError('BACKEND_FAILED', `${backend} ended during the run`);
      return u;
    },
    close: async () => {
      const ended = p.ended();
      const exit = await p.stop();
      if (ended) throw new FsbenchError('BACKEND_FAILED', `${backend} ended during the run (${String(exit.exit)}): ${exit.stderrTail.trim().slice(-500) || 'no message'}`);
    },
  };
}

async function startWatchmanWatcher(dir: string, options: ProgramWatcherOptions, signal: AbortSignal): Promise<Watcher> {
  const delivery = newDelivery();
  const deliver = counter(delivery);
  let recrawls = 0;
  const onResult = (result: WatchmanResult, atNs: bigint): Delivered[] => {
    const n = RECRAWLED.exec(result.warning ?? '')?.[1];
    if (n !== undefined) recrawls = Math.max(recrawls, Number(n));
    const changed = (result.files ?? []).filter((f) => !f.name.includes('/') && f.name.startsWith('file.')).length;
    return changed > 0 ? [{ n: changed, atNs }] : [];
  };
  // No `since`: the subscription's clock is where it starts, and watchman 4.9 sends no result
  // before the first change after it.
  const query = { fields: ['name', 'exists', 'new', 'type'] };
  const running = await startWatchman(dir, { ...options, maxEvents: UNBOUNDED }, query, onResult, deliver, signal);
  return programWatcher('watchman', delivery, () => recrawls, running);
}

/** Starts `backend` on the workload's files (`watch: files`) or their directory. */
export function startProgramWatcher(
  backend: ProgramWatcher,
  dir: string,
  watch: 'files' | 'dir',
  files: number,
  signal: AbortSignal,
  options: ProgramWatcherOptions = {},
): Promise<Watcher> {
  return backend === 'inotifywait' ? startInotifywait(dir, watch, files, options, signal) : startWatchmanWatcher(dir, options, signal);
}
