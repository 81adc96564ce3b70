/**
 * Drives the native probe (native/probe.c): its command line, its process, and its output,
 * which is parsed through `ProbeOutput` rather than trusted.
 */
import { z } from 'zod';
import { FsbenchError, type ErrorCode } from '../../contract/errors.js';
import { runNative } from '../../host/native.js';
import { WorkloadSkipped } from '../workload.js';

const n = z.number().int().nonnegative();
const ns = n.nullable();

export const ProbeOutput = z.object({
  writes: n,
  markerWrites: n,
  records: n,
  events: n,
  markerEvents: n,
  overflows: n,
  reads: n,
  bytesRead: n,
  maxRecordsPerRead: n,
  writeNs: n,
  elapsedNs: n,
  drainNs: n,
  drainTimedOut: z.union([z.literal(0), z.literal(1)]),
  /** fanotify: FAN_MODIFY records of files that are not the workload's (0 for inotify). */
  foreignEvents: n,
  /** fanotify: FIONREAD samples taken, and the most events they found queued (null without samples). */
  queueSamples: n,
  maxQueueDepth: ns,
  firstEventNs: ns,
  lastEventNs: ns,
  reader: z.object({ userNs: n, sysNs: n, voluntaryCtxSwitches: n, involuntaryCtxSwitches: n }).strict(),
  writers: z.object({ userNs: n, sysNs: n }).strict(),
  latency: z.object({
    samples: n,
    p50Ns: ns,
    p90Ns: ns,
    p99Ns: ns,
    maxNs: ns,
    buckets: z.array(z.tuple([n, n, z.number().int().positive()])),
  }),
  maxRssBytes: n,
  pinned: z.boolean(),
  readerNice: z.number().int().nullable(),
  readerCpu: z.number().int().nullable(),
}).strict();
export type ProbeOutput = z.infer<typeof ProbeOutput>;

const ProbeError = z.object({ error: z.object({ code: z.string(), message: z.string() }) });
const Ready = z.object({ ready: z.literal(true) });

/**
 * The kernel or the filesystem refused the fanotify group or a mark the cell asks for (EINVAL,
 * EOPNOTSUPP, EXDEV, ENODEV ...): this machine cannot measure the cell, which is not a fault of
 * the run. `skipReason` is the kernel's answer (the call and its errno), for a runner that
 * reports such a run as `skipped` rather than `failed`.
 */
/** The kernel refused a mark or a mode (fanotify on overlayfs, say): a skipped run. */
export class KernelRefusal extends WorkloadSkipped {}

const PROBE_CODES: Readonly<Record<string, ErrorCode>> = {
  PRIVILEGE_MISSING: 'PRIVILEGE_MISSING',
  TARGET_UNUSABLE: 'TARGET_UNUSABLE',
  LIMIT_REACHED: 'LIMIT_REACHED',
  PIN_UNAVAILABLE: 'PROBE_FAILED',
};

export interface ProbeArgs {
  readonly dir: string;
  readonly files: number;
  readonly writers: number;
  readonly durationMs: number;
  readonly writeBytes: number;
  readonly bufferBytes: number;
  readonly watch: 'files' | 'dir';
  readonly mode: 'concurrent' | 'drain';
  /** `full`: the measuring reader; `bare`: a minimal read loop (overhead benchmark); `none`: writers only. */
  readonly reader: 'full' | 'bare' | 'none';
  readonly pin: boolean;
  readonly readerNice: number;
  readonly drainTimeoutMs: number;
  readonly sampleEvery: number;
  /** Absent: inotify. The fanotify options go only with `backend: 'fanotify'`. */
  readonly backend?: 'inotify' | 'fanotify';
  readonly mark?: 'inode' | 'dir' | 'mount' | 'filesystem';
  readonly fanotifyReport?: 'dfid-name' | 'fid';
  readonly unlimitedQueue?: boolean;
}

export function probeArgv(a: ProbeArgs): string[] {
  return [
    'inotify',
    ...['--dir', a.dir, '--files', String(a.files), '--writers', String(a.writers)],
    ...['--duration-ms', String(a.durationMs), '--write-bytes', String(a.writeBytes)],
    ...['--buffer-bytes', String(a.bufferBytes), '--watch', a.watch, '--mode', a.mode, '--reader', a.reader],
    ...['--pin', a.pin ? '1' : '0', '--reader-nice', String(a.readerNice)],
    ...['--drain-timeout-ms', String(a.drainTimeoutMs), '--sample-every', String(a.sampleEvery)],
    ...(a.backend === 'fanotify'
      ? [
          ...['--backend', 'fanotify', '--mark', a.mark ?? 'inode', '--report', a.fanotifyReport ?? 'dfid-name'],
          ...['--unlimited-queue', a.unlimitedQueue === true ? '1' : '0'],
        ]
      : []),
  ];
}

export interface ProbeHooks {
  readonly signal: AbortSignal;
  /**
   * With `reader: none` the probe creates its files, says it is ready, and waits: `onReady` sets
   * the watcher up, and the writers start when it resolves.
   */
  readonly onReady?: () => Promise<void>;
}

/** Runs the probe to completion; a kill on abort makes it throw CANCELLED. */
export async function runProbe(args: ProbeArgs, hooks: ProbeHooks): Promise<ProbeOutput> {
  const exit = await runNative('probe', probeArgv(args), {
    signal: hooks.signal,
    onMessage: async (message) => {
      if (!Ready.safeParse(message).success) return undefined;
      await hooks.onReady?.();
      return 'go\n';
    },
  });
  if (exit.aborted) throw new FsbenchError('CANCELLED', 'the run was cancelled');
  const error = ProbeError.safeParse(exit.last);
  if (error.success) {
    if (error.data.error.code === 'UNSUPPORTED') throw new KernelRefusal(error.data.error.message);
    throw new FsbenchError(PROBE_CODES[error.data.error.code] ?? 'PROBE_FAILED', error.data.error.message);
  }
  if (exit.code !== 0) {
    throw new FsbenchError('PROBE_FAILED', `the native probe ended with ${exit.signal ?? `exit code ${String(exit.code)}`}: ${exit.stderr.trim() || 'no message'}`);
  }
  const out = ProbeOutput.safeParse(exit.last);
  if (!out.success) {
    throw new FsbenchError('PROBE_OUTPUT_INVALID', `the native probe printed unexpected output: ${z.prettifyError(out.error)}`);
  }
  return out.data;
}
