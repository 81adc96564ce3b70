/** Where the native measurement programs built by `native/build.mjs` live. */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { FsbenchError } from '../contract/errors.js';

/** The repository (or installed package) root: the nearest ancestor holding `native/build.mjs`. */
function packageRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(path.join(dir, 'native', 'build.mjs'))) return dir;
    const parent = path.dirname(dir);
    if (parent === dir) return process.cwd();
    dir = parent;
  }
}

const root = packageRoot();

/** Path of a native program, or NATIVE_PROBE_MISSING saying how to build it. */
export function nativeProgram(name: string): string {
  const file = path.join(root, 'native', 'build', name);
  if (!existsSync(file)) {
    throw new FsbenchError(
      'NATIVE_PROBE_MISSING',
      `the native program ${file} is missing: run 'npm install' or 'npm run build' (needs a C compiler)`,
    );
  }
  return file;
}

export const PACKAGE_ROOT = root;

/** How one run of a native program ended: its last JSON line and how it exited. */
export interface NativeExit {
  /** The last line of stdout parsed as JSON (undefined if it was not JSON), for the caller's schemas. */
  readonly last: unknown;
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** The program's stderr, at most 8 KiB: its own words for an error message. */
  readonly stderr: string;
  /** The run was stopped by `signal` (cancellation) or by `timeoutMs`. */
  readonly aborted: boolean;
  readonly timedOut: boolean;
}

export interface NativeOptions {
  /** Aborting stops the program (SIGTERM, then SIGKILL after `graceMs`). */
  readonly signal?: AbortSignal;
  /**
   * How long a stopped program may take to report and exit after SIGTERM; 0 (the default) sends
   * SIGKILL at once, for a program that has nothing to report when cancelled.
   */
  readonly graceMs?: number;
  /** Stops the program like an abort after this long; no limit by default. */
  readonly timeoutMs?: number;
  /**
   * Each line the program prints, parsed as JSON, as it arrives; a string returned is written to
   * its stdin and stdin closed (the probe's "ready" / "go" handshake). A throw stops the program
   * and is rethrown once it has exited. Without it, stdin is closed at once.
   */
  readonly onMessage?: (message: unknown) => Promise<string | undefined> | string | undefined;
}

function jsonOf(line: string): unknown {
  try {
    return JSON.parse(line) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * Runs one of the native programs to completion: the one place that spawns them, bounds what
 * is kept of their output, stops them on cancellation or timeout and never leaves one behind.
 * What the output means (success, a refusal, which error code) is the caller's schema's word.
 * (`hostfs hold` and `hostfs serial`, which live as long as their lock, are the programs not run this way.)
 */
export async function runNative(name: string, argv: readonly string[], o: NativeOptions = {}): Promise<NativeExit> {
  const child = spawn(nativeProgram(name), argv, { stdio: ['pipe', 'pipe', 'pipe'] });
  if (o.onMessage === undefined) child.stdin.end();
  child.stdin.on('error', () => undefined); // a program that exits without reading its stdin
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    if (stderr.length < 8192) stderr += d;
  });
  let aborted = false;
  let timedOut = false;
  let killTimer: NodeJS.Timeout | undefined;
  const stop = () => {
    aborted = true;
    const grace = o.graceMs ?? 0;
    if (grace <= 0) {
      child.kill('SIGKILL');
      return;
    }
    child.kill('SIGTERM');
    killTimer ??= setTimeout(() => child.kill('SIGKILL'), grace);
  };
  const timeout =
    o.timeoutMs === undefined
      ? undefined
      : setTimeout(() => {
          timedOut = true;
          stop();
        }, o.timeoutMs);
  if (o.signal?.aborted === true) stop();
  else o.signal?.addEventListener('abort', stop, { once: true });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => {
      resolve({ code, signal });
    });
  });
  let last: unknown;
  let failure: { err: unknown } | undefined;
  try {
    for await (const line of createInterface({ input: child.stdout })) {
      if (line.trim() === '') continue;
      // Only a bounded line is kept: a runaway program cannot fill this process's memory.
      last = line.length <= 1024 * 1024 ? jsonOf(line) : undefined;
      if (o.onMessage === undefined || failure !== undefined) continue;
      try {
        const reply = await o.onMessage(last);
        if (reply !== undefined) child.stdin.end(reply);
      } catch (err) {
        failure = { err };
        stop();
      }
    }
    const exit = await exited;
    if (failure !== undefined) throw failure.err;
    return { last, ...exit, stderr, aborted, timedOut };
  } finally {
    o.signal?.removeEventListener('abort', stop);
    clearTimeout(timeout);
    clearTimeout(killTimer);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}
