/**
 * watchman as a project runs it, with nothing global: a private server in the foreground (its
 * own socket, state, pid and log files in a temporary directory of its own, `--no-save-state`),
 * `watch` on the root, then one subscription read as JSON lines (`watchman -j --persistent
 * --no-pretty`). Stopping ends the client and the server and removes the directory. What a
 * subscription's results mean is the caller's business (the semantics workload's kinds of
 * change, the throughput workload's counts).
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { FsbenchError, messageOf } from '../contract/errors.js';
import { WatchmanLine, WatchmanWatchAnswer, type WatchmanResult } from '../contract/watcher-programs.js';
import { READY_TIMEOUT_MS, debianPackage, startProgram, type ProgramExit, type RunningProgram } from './watcher-program.js';

const PKG = 'watchman';
const SUBSCRIPTION = 'fsbench';
/** A Unix socket's path holds at most 107 bytes (sun_path). */
const MAX_SOCKET_PATH = 107;
/** One subscription result lists every path of a settled batch: a storm's can be large. */
const MAX_LINE_BYTES = 256 * 1024 * 1024;

export interface WatchmanOptions {
  /** PATH to find watchman on (default: this process's PATH). */
  readonly path?: string | undefined;
  /** Where the server's socket, state and log live while it runs (default: the system's temporary directory). */
  readonly tmpDir?: string | undefined;
  /** Most events the subscription may report (startProgram's default unless told). */
  readonly maxEvents?: number;
}

export interface RunningWatchman {
  /** The server's and the client's process ids: the server reads the kernel's events. */
  readonly pids: readonly number[];
  /** Whether the server or the client has ended. */
  ended(): boolean;
  stop(): Promise<ProgramExit>;
}

/** A subscription line's result, or null for the answer to `subscribe`; a throw for an error or a line it does not know. */
export function watchmanResult(record: string, subscribed: () => void): WatchmanResult | null {
  const line = WatchmanLine.parse(JSON.parse(record));
  if ('error' in line) throw new Error(`watchman: ${line.error}`);
  if ('subscribe' in line) {
    subscribed();
    return null;
  }
  if (line.subscription !== SUBSCRIPTION) throw new Error(`a result of another subscription, ${line.subscription}`);
  return line;
}

function run(file: string, args: readonly string[], env: NodeJS.ProcessEnv, signal: AbortSignal): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { env, signal, timeout: READY_TIMEOUT_MS, maxBuffer: 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new FsbenchError('BACKEND_FAILED', `watchman ${args.at(-2) ?? ''} failed: ${(stderr || messageOf(err)).trim().slice(0, 500)}`));
      else resolve(stdout);
    });
  });
}

/** Resolves once the server's socket exists (the server's exit or the start's bound end the wait first). */
async function socketListening(sock: string): Promise<void> {
  while (!existsSync(sock)) await sleep(20);
}

/**
 * Starts a private server watching `root` and subscribes to it with `query`; each result goes
 * through `events`, whose answers go to `onEvent`. Resolves once the subscription runs; a
 * missing program rejects with TARGET_UNUSABLE naming the Debian package.
 */
export async function startWatchman<E>(
  root: string,
  options: WatchmanOptions,
  query: Readonly<Record<string, unknown>>,
  events: (result: WatchmanResult, atNs: bigint) => readonly E[],
  onEvent: (event: E) => void,
  signal: AbortSignal,
): Promise<RunningWatchman> {
  const dir = await mkdtemp(path.join(options.tmpDir ?? os.tmpdir(), 'fsbench-watchman-'));
  const sock = path.join(dir, 'sock');
  const started: RunningProgram[] = [];
  const stopAll = async (): Promise<ProgramExit> => {
    // The client first, so no result arrives from a server on its way out; then the server.
    const exits: ProgramExit[] = [];
    let failure: Error | undefined;
    for (const program of [...started].reverse()) {
      try {
        exits.push(await program.stop());
      } catch (err) {
        failure ??= err instanceof Error ? err : new Error(String(err));
      }
    }
    await rm(dir, { recursive: true, force: true });
    if (failure !== undefined) throw failure;
    return { exit: exits.at(-1)?.exit ?? null, stderrTail: exits.map((e) => e.stderrTail).join('').slice(-4096) };
  };
  try {
    if (sock.length > MAX_SOCKET_PATH) throw new FsbenchError('CONFIG_INVALID', `watchman's socket ${sock} is longer than a Unix socket's path may be: use a shorter temporary directory`);
    const common = [`--sockname=${sock}`, '--no-pretty'];
    const spec = {
      backend: 'watchman',
      file: 'watchman',
      remedy: debianPackage(PKG),
      separator: 0x0a,
      maxRecordBytes: MAX_LINE_BYTES,
      path: options.path,
      ...(options.maxEvents === undefined ? {} : { maxEvents: options.maxEvents }),
    } as const;
    const server = await startProgram(
      { ...spec, args: [...common, '--foreground', '--no-save-state', `--logfile=${path.join(dir, 'log')}`, `--statefile=${path.join(dir, 'state')}`, `--pidfile=${path.join(dir, 'pid')}`] },
      // The server's own stdout says no change; the subscription does.
      () => [],
      onEvent,
      signal,
    );
    started.push(server);
    await server.untilReady(socketListening(sock), 'that its socket listens');
    const env = options.path === undefined ? process.env : { ...process.env, PATH: options.path };
    const answer = WatchmanWatchAnswer.parse(JSON.parse(await run('watchman', [...common, '--no-spawn', 'watch', root], env, signal)));
    if ('error' in answer) throw new FsbenchError('BACKEND_FAILED', `watchman cannot watch ${root}: ${answer.error}`);
    let subscribed: () => void = () => undefined;
    const subscribedNow = new Promise<void>((resolve) => {
      subscribed = resolve;
    });
    const client = await startProgram(
      { ...spec, args: [...common, '--no-spawn', '-j', '--persistent'], stdin: JSON.stringify(['subscribe', root, SUBSCRIPTION, query]) },
      (record, atNs) => {
        const result = watchmanResult(record, subscribed);
        return result === null ? [] : events(result, atNs);
      },
      onEvent,
      signal,
    );
    started.push(client);
    await client.untilReady(subscribedNow, 'that its subscription runs');
  } catch (err) {
    await stopAll().catch(() => undefined);
    throw err;
  }
  return { pids: started.map((p) => p.pid), ended: () => started.some((p) => p.ended()), stop: stopAll };
}
