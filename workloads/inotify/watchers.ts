/**
 * The watcher libraries users actually ship, watching the same native writers as the raw
 * reader: @parcel/watcher (batches and coalesces by design), Node's fs.watch (libuv drops
 * IN_Q_OVERFLOW silently) and chokidar (over fs.watch, at most one `change` per file per 50 ms).
 * What they deliver is counted; what they hide is reported as hidden.
 */
import { watch as fsWatch, type FSWatcher } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import parcel from '@parcel/watcher';
import chokidar from 'chokidar';
import { messageOf } from '../../contract/errors.js';
import type { ProcessUsage } from '../../host/process-usage.js';

export interface Delivery {
  events: number;
  /** Callback invocations: @parcel/watcher's batches, fs.watch's single events; a program's reads of its output that carried events. */
  batches: number;
  maxBatch: number;
  /** Errors the library reported (for @parcel/watcher this is where an overflow would show). */
  errors: string[];
  lastEventAt: number;
}

/** A watcher the native writers feed, in this process (a library) or in processes of its own (a program). */
export interface Watcher {
  readonly delivery: Delivery;
  /** Overflows it passed on, or null where it cannot pass them on. */
  overflows(): number | null;
  /** What the watcher has used so far: this process for a library, the program's processes for a program. */
  usage(): ProcessUsage;
  close(): Promise<void>;
}

/** The name of the workload's file `i` (the probe's naming). */
export function fileName(i: number): string {
  return `file.${String(i).padStart(5, '0')}`;
}

export function newDelivery(): Delivery {
  return { events: 0, batches: 0, maxBatch: 0, errors: [], lastEventAt: performance.now() };
}

/** This process's usage: a library watcher's callbacks run in it. */
function ownUsage(): ProcessUsage {
  const u = process.resourceUsage();
  return {
    userMs: u.userCPUTime / 1000,
    sysMs: u.systemCPUTime / 1000,
    voluntaryCtxSwitches: u.voluntaryContextSwitches,
    involuntaryCtxSwitches: u.involuntaryContextSwitches,
    peakRssBytes: u.maxRSS * 1024,
  };
}

function count(d: Delivery, n: number): void {
  d.events += n;
  d.batches += 1;
  if (n > d.maxBatch) d.maxBatch = n;
  d.lastEventAt = performance.now();
}

export async function startWatcher(
  backend: 'parcel' | 'fswatch' | 'chokidar',
  dir: string,
  watch: 'files' | 'dir',
  files: number,
): Promise<Watcher> {
  const delivery = newDelivery();
  const library = { delivery, overflows: () => null, usage: ownUsage };
  if (backend === 'parcel') {
    // inotify by name: left to choose, @parcel/watcher takes watchman wherever it is installed.
    const sub = await parcel.subscribe(
      dir,
      (err, events) => {
        if (err) delivery.errors.push(err.message);
        const n = events.filter((e) => path.basename(e.path).startsWith('file.')).length;
        if (n > 0) count(delivery, n);
      },
      { backend: 'inotify' },
    );
    return { ...library, close: () => sub.unsubscribe() };
  }
  if (backend === 'chokidar') {
    // Its defaults, as an application gets them: no polling, no initial scan events.
    const paths = watch === 'dir' ? [dir] : Array.from({ length: files }, (_, i) => path.join(dir, fileName(i)));
    const w = chokidar.watch(paths, { ignoreInitial: true, depth: 0 });
    w.on('change', (p) => {
      if (path.basename(p).startsWith('file.')) count(delivery, 1);
    });
    w.on('error', (err) => delivery.errors.push(messageOf(err)));
    await new Promise<void>((resolve) => w.once('ready', () => {
      resolve();
    }));
    return { ...library, close: () => w.close() };
  }
  const watchers: FSWatcher[] = [];
  const onError = (err: Error) => delivery.errors.push(err.message);
  if (watch === 'dir') {
    const w = fsWatch(dir, (_type, name) => {
      if (name?.startsWith('file.')) count(delivery, 1);
    });
    w.on('error', onError);
    watchers.push(w);
  } else {
    for (let i = 0; i < files; i++) {
      const w = fsWatch(path.join(dir, fileName(i)), () => {
        count(delivery, 1);
      });
      w.on('error', onError);
      watchers.push(w);
    }
  }
  return {
    ...library,
    close: () => {
      for (const w of watchers) w.close();
      return Promise.resolve();
    },
  };
}

/**
 * Waits until no event has arrived for `quietMs` (the libraries deliver late: @parcel/watcher
 * waits up to 500 ms to batch), or `timeoutMs` has passed. Returns whether it timed out.
 */
export async function waitQuiet(d: Delivery, quietMs: number, timeoutMs: number, signal: AbortSignal): Promise<boolean> {
  const start = performance.now();
  while (!signal.aborted) {
    const now = performance.now();
    if (now - Math.max(d.lastEventAt, start) >= quietMs) return false;
    if (now - start >= timeoutMs) return true;
    await sleep(25);
  }
  return false;
}
