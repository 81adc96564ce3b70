/**
 * Drives the native loop (native/metadata.c), one process per phase: its command line, its
 * process, and its output, which is parsed through a schema rather than trusted.
 */
import { spawn } from 'node:child_process';
import { z } from 'zod';
import { FsbenchError, type ErrorCode } from '../../contract/errors.js';
import { nativeProgram } from '../../host/native.js';
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

function parseLine(line: string): unknown {
  try {
    return JSON.parse(line) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * Runs one phase to completion. An abort sends SIGTERM, on which the loop stops between two
 * files and reports CANCELLED; SIGKILL follows if it is stuck in a long syscall.
 */
export async function runPhase(argv: readonly string[], signal: AbortSignal): Promise<PhaseOutput> {
  const child = spawn(nativeProgram('metadata'), argv, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    if (stdout.length < 65536) stdout += d;
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    if (stderr.length < 8192) stderr += d;
  });
  let killTimer: NodeJS.Timeout | undefined;
  const stop = () => {
    child.kill('SIGTERM');
    killTimer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  };
  if (signal.aborted) stop();
  else signal.addEventListener('abort', stop, { once: true });
  const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, sig) => {
      resolve({ code, signal: sig });
    });
  }).finally(() => {
    signal.removeEventListener('abort', stop);
    clearTimeout(killTimer);
  });

  const line = parseLine(stdout.trim().split('\n').at(-1) ?? '');
  const ok = PhaseOutput.safeParse(line);
  if (ok.success && exit.code === 0) return ok.data;
  const err = PhaseError.safeParse(line);
  if (err.success) {
    const { code, message, done } = err.data.error;
    const fsbench = CODES[code] ?? 'WORKLOAD_FAILED';
    throw new FsbenchError(fsbench, `${argv[0] ?? 'phase'} stopped after ${done} files: ${message}${fsbench === 'NO_SPACE' ? ' (raise fsSize or lower the file count or size)' : ''}`);
  }
  if (signal.aborted) throw new FsbenchError('CANCELLED', `the run was cancelled during ${argv[0] ?? 'a phase'}`);
  throw new FsbenchError(
    'WORKLOAD_FAILED',
    `the native metadata loop exited with ${exit.signal ?? `status ${String(exit.code)}`} without a result: ${(stderr || stdout).trim().slice(0, 500)}`,
  );
}
