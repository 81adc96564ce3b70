/**
 * fsbench's own readers, native/semantics.c in its inotify or fanotify mode, started through
 * host/native.ts and read line by line. Both print the same lines, parsed here with schemas, never
 * trusted; each event is stamped by the reader when its read() returned. What differs is how a
 * reader's error line becomes an error (`errorOf`) and whether it lists new directories
 * (`synthesized`, the inotify reader's only).
 */
import { z } from 'zod';
import { CHANGE_KINDS } from '../../contract/workloads/semantics/events.js';
import { FsbenchError, messageOf } from '../../contract/errors.js';
import { runNative, type NativeExit } from '../../host/native.js';
import type { RunningWatcher, WatcherAdapter } from './watcher.js';

const n = z.number().int().nonnegative();
const path = z.string().min(1).max(4096);

const ReaderLine = z.union([
  z.object({ k: z.enum(CHANGE_KINDS), p: path, f: path.optional(), t: n, s: z.literal(1).optional() }).strict(),
  z.object({ ready: z.literal(true), watches: n }).strict(),
  z.object({ done: z.literal(true), watches: n, overflows: n, synthesized: n.optional(), events: n }).strict(),
  z.object({ error: z.object({ code: z.string().max(64), message: z.string().max(2048), done: n.optional() }) }),
]);

/** How long the reader may take to print its last line after SIGTERM. */
const GRACE_MS = 10_000;

export interface NativeReader {
  readonly mode: 'inotify' | 'fanotify';
  /** The error the reader's error line stands for, on the tree at `root`. */
  readonly errorOf: (root: string, code: string, message: string) => FsbenchError;
}

export function nativeReaderAdapter(reader: NativeReader): WatcherAdapter {
  const name = `the ${reader.mode} reader`;
  return {
    name: reader.mode,
    reportsOverflow: true,
    async start(root, onEvent, signal) {
      const stop = new AbortController();
      const abort = () => {
        stop.abort();
      };
      signal.addEventListener('abort', abort, { once: true });
      const counts: { synthesized?: number; done: boolean } = { done: false };
      // An object: its field is written by callbacks, so it is not narrowed across awaits.
      const failed: { error: FsbenchError | null } = { error: null };
      let markReady: () => void = () => undefined;
      const ready = new Promise<void>((resolve) => {
        markReady = resolve;
      });
      const exit: Promise<NativeExit> = runNative('semantics', [reader.mode, '--root', root, '--parent', String(process.pid)], {
        signal: stop.signal,
        graceMs: GRACE_MS,
        onMessage: (m) => {
          const line = ReaderLine.safeParse(m);
          if (!line.success) throw new FsbenchError('PROBE_OUTPUT_INVALID', `${name} printed an unexpected line: ${line.error.message.slice(0, 300)}`);
          const l = line.data;
          if ('k' in l) onEvent({ kind: l.k, path: l.p, ...(l.f === undefined ? {} : { from: l.f }), atNs: BigInt(l.t) });
          else if ('ready' in l) markReady();
          else if ('done' in l) Object.assign(counts, { done: true, ...(l.synthesized === undefined ? {} : { synthesized: l.synthesized }) });
          else failed.error = reader.errorOf(root, l.error.code, l.error.message);
          return undefined;
        },
      });
      const ended = exit.then(
        (e) => e,
        (err: unknown) => {
          failed.error ??= new FsbenchError('BACKEND_FAILED', `${name} failed: ${messageOf(err)}`);
          return null;
        },
      );
      const first = await Promise.race([ready.then(() => 'ready' as const), ended.then(() => 'ended' as const)]);
      if (first === 'ended') {
        signal.removeEventListener('abort', abort);
        if (signal.aborted) throw new FsbenchError('CANCELLED', `the run was cancelled while ${name} started`);
        throw failed.error ?? new FsbenchError('BACKEND_FAILED', `${name} stopped before it watched ${root}, with no message`);
      }
      const running: RunningWatcher = {
        async stop() {
          stop.abort();
          const e = await ended;
          signal.removeEventListener('abort', abort);
          if (failed.error !== null) throw failed.error;
          if (!counts.done) throw new FsbenchError('BACKEND_FAILED', `${name} exited with ${String(e?.signal ?? e?.code)} without its counts`);
          return {
            exit: e?.signal ?? e?.code ?? null,
            stderrTail: e?.stderr.slice(-4096) ?? '',
            ...(counts.synthesized === undefined ? {} : { synthesized: counts.synthesized }),
          };
        },
      };
      return running;
    },
  };
}
