/**
 * Drives the native loop (native/metadata.c), one process per phase: its command line, its
 * process, and its output, which is parsed through a schema rather than trusted.
 */
import { z } from 'zod';
import { FsbenchError, type ErrorCode } from '../../contract/errors.js';
import { runNative } from '../../host/native.js';
import type { MetadataParams } from './params.js';

/** Every phase the native loop knows; `layout` is an unmeasured look at where XFS put things. */
export type NativePhase = 'create' | 'readByDir' | 'readInterleaved' | 'stat' | 'layout' | 'unlink';

const n = z.number().int().nonnegative();

export const PhaseOutput = z
  .object({
    phase: z.string(),
    files: n,
    dirs: n,
    bytes: n,
    ns: n,
    syncNs: n.optional(),
    minIno: n.optional(),
    maxIno: n.optional(),
    inodesAbove32Bits: n.optional(),
    inodeAgs: n.optional(),
    dataAgs: n.optional(),
    filesWithData: n.optional(),
    dataAwayFromInode: n.optional(),
  })
  .strict();
export type PhaseOutput = z.infer<typeof PhaseOutput>;

const PhaseError = z.object({ error: z.object({ code: z.string(), message: z.string(), done: n }) });

/** What the loop's errno names mean for the run. */
const CODES: Readonly<Record<string, ErrorCode>> = {
  ENOSPC: 'NO_SPACE',
  EDQUOT: 'NO_SPACE',
  CANCELLED: 'CANCELLED',
  USAGE: 'INTERNAL',
  // The run directory was swapped for a symlink, or for a directory someone else owns.
  TARGET_UNUSABLE: 'TARGET_UNUSABLE',
  ELOOP: 'TARGET_UNUSABLE',
};

/** XFS geometry the `layout` phase maps inode numbers and block addresses with. */
export interface LayoutGeometry {
  readonly agBlocks: number;
  readonly agCount: number;
  readonly agInoShift: number;
  readonly blockSize: number;
}

export function phaseArgv(phase: NativePhase, root: string, p: MetadataParams, layout?: LayoutGeometry): string[] {
  const argv = [phase, '--root', root, '--dirs', String(p.dirs), '--files', String(p.filesPerDir)];
  argv.push('--file-size', String(p.fileSize), '--fsync', p.fsync, '--parent', String(process.pid));
  if (layout) {
    argv.push('--ag-blocks', String(layout.agBlocks), '--ag-count', String(layout.agCount));
    argv.push('--ag-ino-shift', String(layout.agInoShift), '--block-size', String(layout.blockSize));
  }
  return argv;
}

/**
 * Runs one phase to completion. An abort sends SIGTERM, on which the loop stops between two
 * files and reports CANCELLED; SIGKILL follows if it is stuck in a long syscall.
 */
export async function runPhase(argv: readonly string[], signal: AbortSignal): Promise<PhaseOutput> {
  const exit = await runNative('metadata', argv, { signal, graceMs: 10_000 });
  const line = exit.last;
  const ok = PhaseOutput.safeParse(line);
  if (ok.success && exit.code === 0) return ok.data;
  const err = PhaseError.safeParse(line);
  if (err.success) {
    const { code, message, done } = err.data.error;
    const fsbench = CODES[code] ?? 'WORKLOAD_FAILED';
    throw new FsbenchError(fsbench, `${argv[0] ?? 'phase'} stopped after ${done} files: ${message}${fsbench === 'NO_SPACE' ? ' (raise fsSize or lower the file count or size)' : ''}`);
  }
  if (exit.aborted) throw new FsbenchError('CANCELLED', `the run was cancelled during ${argv[0] ?? 'a phase'}`);
  throw new FsbenchError(
    'WORKLOAD_FAILED',
    `the native metadata loop exited with ${exit.signal ?? `status ${String(exit.code)}`} without a result: ${exit.stderr.trim().slice(0, 500) || 'no message'}`,
  );
}
