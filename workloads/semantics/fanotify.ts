/**
 * The `fanotify` backend: native/semantics.c in its fanotify mode (native/semantics-fanotify.h),
 * one FAN_MARK_FILESYSTEM mark with FAN_REPORT_DFID_NAME_TARGET on the tree's filesystem, read
 * line by line. It prints the inotify reader's lines, parsed here with schemas, never trusted;
 * each event is stamped by the reader when its read() returned.
 *
 * Its failures to start are told apart: no CAP_SYS_ADMIN is PRIVILEGE_MISSING (the run needs
 * root), a kernel or filesystem that refuses the group or the mark (no file handles, no fsid)
 * skips the run naming the filesystem, as the inotify workload's fanotify cells do, since the
 * machine cannot measure the cell at all.
 */
import { z } from 'zod';
import { CHANGE_KINDS } from '../../contract/workloads/semantics/events.js';
import { FsbenchError, messageOf, type ErrorCode } from '../../contract/errors.js';
import { filesystemType } from '../../host/kernel.js';
import { runNative, type NativeExit } from '../../host/native.js';
import { WorkloadSkipped } from '../workload.js';
import type { RunningWatcher, WatcherAdapter } from './watcher.js';

const n = z.number().int().nonnegative();
const path = z.string().min(1).max(4096);

const ReaderLine = z.union([
  z.object({ k: z.enum(CHANGE_KINDS), p: path, f: path.optional(), t: n }).strict(),
  z.object({ ready: z.literal(true), watches: n }).strict(),
  z.object({ done: z.literal(true), watches: n, overflows: n, events: n }).strict(),
  z.object({ error: z.object({ code: z.string().max(64), message: z.string().max(2048), done: n.optional() }) }),
]);

/** How long the reader may take to print its last line after SIGTERM. */
const GRACE_MS = 10_000;

/** The reader's error codes that are fsbench's own; any other is the backend failing. */
const READER_CODES: Readonly<Record<string, ErrorCode>> = {
  PRIVILEGE_MISSING: 'PRIVILEGE_MISSING',
  LIMIT_REACHED: 'LIMIT_REACHED',
};

/** The error for the reader's error line: UNSUPPORTED (the kernel refused) skips the run. */
function readerError(root: string, code: string, message: string): FsbenchError {
  if (code === 'UNSUPPORTED') {
    return new WorkloadSkipped(`fanotify cannot watch ${root} on this ${filesystemType(root) ?? 'unknown'} filesystem with a filesystem mark reporting file handles: ${message}`);
  }
  const known = READER_CODES[code];
  return new FsbenchError(known ?? 'BACKEND_FAILED', known === undefined ? `the fanotify reader failed: ${code}: ${message}` : message);
}

export const fanotifyAdapter: WatcherAdapter = {
  name: 'fanotify',
  reportsOverflow: true,
  async start(root, onEvent, signal) {
    const stop = new AbortController();
    const abort = () => {
      stop.abort();
    };
    signal.addEventListener('abort', abort, { once: true });
    const counts = { done: false };
    // An object: its field is written by callbacks, so it is not narrowed across awaits.
    const failed: { error: FsbenchError | null } = { error: null };
    let markReady: () => void = () => undefined;
    const ready = new Promise<void>((resolve) => {
      markReady = resolve;
    });
    const exit: Promise<NativeExit> = runNative('semantics', ['fanotify', '--root', root, '--parent', String(process.pid)], {
      signal: stop.signal,
      graceMs: GRACE_MS,
      onMessage: (m) => {
        const line = ReaderLine.safeParse(m);
        if (!line.success) throw new FsbenchError('PROBE_OUTPUT_INVALID', `the fanotify reader printed an unexpected line: ${line.error.message.slice(0, 300)}`);
        const l = line.data;
        if ('k' in l) onEvent({ kind: l.k, path: l.p, ...(l.f === undefined ? {} : { from: l.f }), atNs: BigInt(l.t) });
        else if ('ready' in l) markReady();
        else if ('done' in l) counts.done = true;
        else failed.error = readerError(root, l.error.code, l.error.message);
        return undefined;
      },
    });
    const ended = exit.then(
      (e) => e,
      (err: unknown) => {
        failed.error ??= new FsbenchError('BACKEND_FAILED', `the fanotify reader failed: ${messageOf(err)}`);
        return null;
      },
    );
    const first = await Promise.race([ready.then(() => 'ready' as const), ended.then(() => 'ended' as const)]);
    if (first === 'ended') {
      signal.removeEventListener('abort', abort);
      if (signal.aborted) throw new FsbenchError('CANCELLED', 'the run was cancelled while the fanotify reader started');
      throw failed.error ?? new FsbenchError('BACKEND_FAILED', `the fanotify reader stopped before it watched ${root}, with no message`);
    }
    const running: RunningWatcher = {
      async stop() {
        stop.abort();
        const e = await ended;
        signal.removeEventListener('abort', abort);
        if (failed.error !== null) throw failed.error;
        if (!counts.done) throw new FsbenchError('BACKEND_FAILED', `the fanotify reader exited with ${String(e?.signal ?? e?.code)} without its counts`);
        // No `synthesized`: a filesystem mark has no new directory to list, so the metric is null.
        return { exit: e?.signal ?? e?.code ?? null, stderrTail: e?.stderr.slice(-4096) ?? '' };
      },
    };
    return running;
  },
};
