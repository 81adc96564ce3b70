/**
 * One watcher program run as a child (the semantics workload's adapters, the throughput
 * workload's program backends): started from an argv (never a shell), its stdout cut into
 * records at a separator byte and handed on with the moment they arrived, its stderr's end kept
 * for the report, and stopped with SIGTERM, then SIGKILL after a bound, until it is gone.
 *
 * What a program prints is untrusted: a record longer than the adapter allows, one that is not
 * UTF-8, one its parser refuses, or more events than a run may hold, stops the program, and
 * `stop()` then rejects with BACKEND_FAILED saying which, instead of a run judged on half its output.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { FsbenchError, messageOf } from '../contract/errors.js';

/** Most events one run may report unless its spec says otherwise; a watcher that says more is stopped and its run failed. */
export const MAX_EVENTS_PER_RUN = 1_000_000;
/** How long a program has to end after SIGTERM before it is killed. */
export const STOP_GRACE_MS = 3_000;
/** How long a program has to say it watches the root (inotifywait's walk, watchman's crawl). */
export const READY_TIMEOUT_MS = 60_000;
const STDERR_TAIL_BYTES = 4096;

export interface ProgramSpec {
  /** The backend's name, for messages. */
  readonly backend: string;
  readonly file: string;
  readonly args: readonly string[];
  /** What installs `file`, said when it is missing: the Debian package that installs it, by name. */
  readonly remedy: string;
  /** The byte that ends a record: NUL for programs printing paths, newline for JSON lines. */
  readonly separator: 0x00 | 0x0a;
  readonly maxRecordBytes: number;
  /** PATH to find the program on (default: this process's). */
  readonly path?: string | undefined;
  /** Written to the program's stdin, which is then closed. */
  readonly stdin?: string;
  /** The user and group it runs as (default: this process's). */
  readonly uid?: number;
  readonly gid?: number;
  /** Most events it may report before it is stopped and its run failed (default MAX_EVENTS_PER_RUN, for a workload that keeps each). */
  readonly maxEvents?: number;
}

/** How a program ended: its exit code or signal, and the end of its stderr. */
export interface ProgramExit {
  readonly exit: number | string | null;
  readonly stderrTail: string;
}

/** A record's parser: the events it says (none for a program's own bookkeeping); it throws on a record it refuses. */
export type RecordParser<E> = (record: string, atNs: bigint) => readonly E[];

export interface RunningProgram {
  readonly pid: number;
  /** Resolves when stderr has matched `re`; rejects when the program ends, fails, or `ms` pass first. */
  stderrMatch(re: RegExp, ms?: number): Promise<void>;
  /**
   * Resolves with `ready`; when the program ends or fails first, the run is cancelled, or `ms`
   * pass (the start's bound), stops the program and rejects saying which.
   */
  untilReady(ready: Promise<void>, what: string, ms?: number): Promise<void>;
  /** Refuses the rest of the output: the program is stopped and stop() rejects with `reason`. */
  fail(reason: string): void;
  /** Whether it has ended, stopped or not. */
  ended(): boolean;
  stop(): Promise<ProgramExit>;
}

/** The remedy for a program one Debian package installs. */
export function debianPackage(pkg: string): string {
  return `install the Debian package ${pkg}`;
}

/** Starts `spec`; rejects with TARGET_UNUSABLE saying what installs the program when it is not installed. */
export async function startProgram<E>(
  spec: ProgramSpec,
  parse: RecordParser<E>,
  onEvent: (event: E) => void,
  signal: AbortSignal,
): Promise<RunningProgram> {
  if (signal.aborted) throw new FsbenchError('CANCELLED', `the run was cancelled before ${spec.backend} started`);
  const env = spec.path === undefined ? process.env : { ...process.env, PATH: spec.path };
  const ids = { ...(spec.uid === undefined ? {} : { uid: spec.uid }), ...(spec.gid === undefined ? {} : { gid: spec.gid }) };
  const child = spawn(spec.file, [...spec.args], { env, ...ids, stdio: [spec.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
  const pid = await spawned(child, spec);
  return new Program(child, pid, spec, parse, onEvent, signal);
}

function spawned(child: ChildProcess, spec: ProgramSpec): Promise<number> {
  return new Promise((resolve, reject) => {
    child.once('error', (err: NodeJS.ErrnoException) => {
      reject(
        err.code === 'ENOENT'
          ? new FsbenchError('TARGET_UNUSABLE', `${spec.file} is not installed: ${spec.remedy} to run backend: ${spec.backend}`)
          : new FsbenchError('BACKEND_FAILED', `${spec.backend}: cannot start ${spec.file}: ${err.message}`),
      );
    });
    child.once('spawn', () => {
      if (child.pid === undefined) reject(new FsbenchError('BACKEND_FAILED', `${spec.backend}: ${spec.file} started without a process id`));
      else resolve(child.pid);
    });
  });
}

class Program<E> implements RunningProgram {
  private stderr = '';
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private failure: string | null = null;
  private events = 0;
  private stopping = false;
  private readonly closed: Promise<ProgramExit>;
  private readonly decoder = new TextDecoder('utf-8', { fatal: true });

  constructor(
    private readonly child: ChildProcess,
    readonly pid: number,
    private readonly spec: ProgramSpec,
    private readonly parse: RecordParser<E>,
    private readonly onEvent: (event: E) => void,
    private readonly signal: AbortSignal,
  ) {
    this.closed = new Promise((resolve) => {
      child.once('close', (code, sig) => {
        resolve({ exit: sig ?? code, stderrTail: this.stderr });
      });
    });
    child.stdout?.on('data', (chunk: Buffer) => {
      this.take(chunk, process.hrtime.bigint());
    });
    child.stderr?.setEncoding('utf8').on('data', (d: string) => {
      this.stderr = (this.stderr + d).slice(-STDERR_TAIL_BYTES);
    });
    if (spec.stdin !== undefined) child.stdin?.end(spec.stdin);
    signal.addEventListener('abort', this.onAbort, { once: true });
  }

  private readonly onAbort = (): void => {
    void this.terminate();
  };

  /** Cuts a chunk into records; every record of one chunk arrived at the same moment. */
  private take(chunk: Buffer, atNs: bigint): void {
    let start = 0;
    for (;;) {
      if (this.failure !== null || this.stopping) return;
      const end = chunk.indexOf(this.spec.separator, start);
      const piece = chunk.subarray(start, end < 0 ? chunk.length : end);
      this.pendingBytes += piece.length;
      if (this.pendingBytes > this.spec.maxRecordBytes) {
        this.fail(`printed a record longer than ${this.spec.maxRecordBytes} bytes`);
        return;
      }
      this.pending.push(piece);
      if (end < 0) return;
      const record = Buffer.concat(this.pending);
      this.pending = [];
      this.pendingBytes = 0;
      start = end + 1;
      this.deliver(record, atNs);
    }
  }

  private deliver(record: Buffer, atNs: bigint): void {
    let text: string;
    try {
      text = this.decoder.decode(record);
    } catch {
      this.fail('printed a record that is not UTF-8 (a path that is not UTF-8 cannot be matched)');
      return;
    }
    let said: readonly E[];
    try {
      said = this.parse(text, atNs);
    } catch (err) {
      this.fail(`printed a record fsbench does not understand (${messageOf(err).slice(0, 300)}): ${JSON.stringify(text.slice(0, 200))}`);
      return;
    }
    for (const event of said) {
      this.events += 1;
      const max = this.spec.maxEvents ?? MAX_EVENTS_PER_RUN;
      if (this.events > max) {
        this.fail(`reported more than ${max} events in one run`);
        return;
      }
      this.onEvent(event);
    }
  }

  fail(reason: string): void {
    if (this.failure !== null) return;
    this.failure = reason;
    void this.terminate();
  }

  ended(): boolean {
    return this.child.exitCode !== null || this.child.signalCode !== null;
  }

  /** Why the start cannot go on, or null: the program failed, ended, or the run was cancelled. */
  private startProblem(): FsbenchError | null {
    if (this.signal.aborted) return new FsbenchError('CANCELLED', `the run was cancelled while ${this.spec.backend} started`);
    if (this.failure !== null) return new FsbenchError('BACKEND_FAILED', `${this.spec.backend} ${this.failure}`);
    return null;
  }

  async untilReady(ready: Promise<void>, what: string, ms = READY_TIMEOUT_MS): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    let poll: NodeJS.Timeout | undefined;
    const refused = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        reject(new FsbenchError('BACKEND_FAILED', `${this.spec.backend} did not say ${what} within ${Math.round(ms / 1000)} s`));
      }, ms);
      // A failure, an exit or an abort can come at any moment of the wait.
      poll = setInterval(() => {
        const problem = this.startProblem();
        if (problem) reject(problem);
        else if (this.ended()) {
          reject(
            new FsbenchError(
              'BACKEND_FAILED',
              `${this.spec.backend} ended (${String(this.child.signalCode ?? this.child.exitCode)}) before it said ${what}: ${this.stderr.trim().slice(-500) || 'no message'}`,
            ),
          );
        }
      }, 10);
    });
    try {
      await Promise.race([ready, refused]);
    } catch (err) {
      await this.terminate();
      throw err;
    } finally {
      clearTimeout(timer);
      clearInterval(poll);
    }
  }

  stderrMatch(re: RegExp, ms = READY_TIMEOUT_MS): Promise<void> {
    const seen = new Promise<void>((resolve) => {
      const look = () => {
        if (re.test(this.stderr)) {
          this.child.stderr?.off('data', look);
          resolve();
        }
      };
      this.child.stderr?.on('data', look);
      look();
    });
    return this.untilReady(seen, `${String(re)} on stderr`, ms);
  }

  private async terminate(): Promise<ProgramExit> {
    this.stopping = true;
    this.signal.removeEventListener('abort', this.onAbort);
    if (!this.ended()) {
      this.child.kill('SIGTERM');
      const killer = setTimeout(() => this.child.kill('SIGKILL'), STOP_GRACE_MS);
      try {
        await this.closed;
      } finally {
        clearTimeout(killer);
      }
    }
    return this.closed;
  }

  async stop(): Promise<ProgramExit> {
    const exit = await this.terminate();
    if (this.failure !== null) throw new FsbenchError('BACKEND_FAILED', `${this.spec.backend} ${this.failure}`);
    return exit;
  }
}
