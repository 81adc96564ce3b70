/**
 * Drives native/watches.c: its command lines, and its output parsed through schemas rather than
 * trusted. Its error codes become the run's: a kernel refusing fanotify's mark makes the run
 * `skipped`, a cancelled one CANCELLED.
 */
import { z } from 'zod';
import { FsbenchError, type ErrorCode } from '../../contract/errors.js';
import { runNative } from '../../host/native.js';
import { WorkloadSkipped } from '../workload.js';

const n = z.number().int().nonnegative();
const counter = z.number().int().nullable();

export const BuildOutput = z.object({ op: z.literal('build'), dirs: n, files: n, depth: n, ns: n, markerDir: z.string().max(4096) }).strict();
export type BuildOutput = z.infer<typeof BuildOutput>;

/** What the native watcher measured: the memory figures are raw readings, before and after setup. */
export const WatchOutput = z
  .object({
    op: z.enum(['inotify', 'fanotify']),
    watches: n,
    limitErrno: z.enum(['ENOSPC', 'ENOMEM']).nullable(),
    setupNs: n,
    firstEventNs: n.nullable(),
    teardownNs: n,
    peakRss: n,
    foreignEvents: n.optional(),
    beforeMemcg: counter,
    beforeSUnreclaim: counter,
    beforeRss: n,
    afterMemcg: counter,
    afterSUnreclaim: counter,
    afterRss: n,
  })
  .strict();
export type WatchOutput = z.infer<typeof WatchOutput>;

const NativeError = z.object({ error: z.object({ code: z.string().max(64), message: z.string().max(2048), done: n }) });

const CODES: Readonly<Record<string, ErrorCode>> = {
  CANCELLED: 'CANCELLED',
  ENOSPC: 'NO_SPACE',
  EDQUOT: 'NO_SPACE',
  EMFILE: 'LIMIT_REACHED',
  ELOOP: 'TARGET_UNUSABLE',
  TARGET_UNUSABLE: 'TARGET_UNUSABLE',
  NO_EVENT: 'BACKEND_FAILED',
  USAGE: 'INTERNAL',
};

/** Runs one operation to completion and returns its last line; throws with the program's own words otherwise. */
export async function runWatchesNative(op: 'build' | 'inotify' | 'fanotify', argv: readonly string[], signal: AbortSignal): Promise<unknown> {
  const exit = await runNative('watches', [op, ...argv, '--parent', String(process.pid)], { signal, graceMs: 10_000 });
  const err = NativeError.safeParse(exit.last);
  if (exit.code === 0 && !err.success && exit.last !== undefined) return exit.last;
  if (err.success) {
    const { code, message } = err.data.error;
    if (code === 'REFUSED') throw new WorkloadSkipped(`${message}: this host cannot measure it`);
    const mapped = CODES[code] ?? 'WORKLOAD_FAILED';
    throw new FsbenchError(mapped, `watches ${op}: ${message}${mapped === 'NO_SPACE' ? ' (lower dirs or filesPerDir)' : ''}`);
  }
  if (exit.aborted) throw new FsbenchError('CANCELLED', `the run was cancelled during ${op}`);
  throw new FsbenchError(
    'WORKLOAD_FAILED',
    `the native watches program (${op}) exited with ${exit.signal ?? `status ${String(exit.code)}`} without a result: ${exit.stderr.trim().slice(0, 500) || 'no message'}`,
  );
}
