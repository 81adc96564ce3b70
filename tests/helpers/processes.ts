/**
 * The fsbench processes a test file starts from the compiled CLI (coordinators, agents) and the
 * temporary directories they use: each process is SIGKILLed and each directory removed after
 * every test, pass or fail, so a failing test leaves nothing running for the next.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach } from 'vitest';
import { CLI } from './local.js';

export interface Proc {
  readonly child: ChildProcess;
  /** Its stdout and stderr, as they came. */
  output: string;
  /** Resolves with the first match of `re` in the output; fails when the process ends or `ms` pass first. */
  waitFor(re: RegExp, ms?: number): Promise<RegExpMatchArray>;
  /** Resolves with the exit code and how long after `since` (default: the call) the process ended. */
  exited(since?: number): Promise<{ code: number | null; ms: number }>;
}

export interface CliProcesses {
  readonly fsbench: (args: string[], env: Record<string, string>) => Proc;
  /** A fresh directory under the system's temporary one, removed after the test. */
  readonly tempDir: (name: string) => Promise<string>;
}

/** Registers the clean-up (an afterEach) of the file that calls it; `waitMs` is waitFor's default. */
export function useCliProcesses(o: { readonly waitMs?: number } = {}): CliProcesses {
  const children: ChildProcess[] = [];
  const dirs: string[] = [];
  afterEach(async () => {
    for (const c of children.splice(0)) {
      if (c.exitCode === null && c.signalCode === null) {
        c.kill('SIGKILL');
        await new Promise((r) => c.once('exit', r));
      }
    }
    for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
  });
  return {
    fsbench: (args, env) => {
      const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
      children.push(child);
      const proc: Proc = {
        child,
        output: '',
        waitFor: async (re, ms = o.waitMs ?? 20_000) => {
          const end = Date.now() + ms;
          for (;;) {
            const m = re.exec(proc.output);
            if (m) return m;
            if (child.exitCode !== null || Date.now() > end) throw new Error(`no ${String(re)} in:\n${proc.output}`);
            await sleep(20);
          }
        },
        exited: (since = Date.now()) =>
          new Promise((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) resolve({ code: child.exitCode, ms: Date.now() - since });
            else
              child.once('exit', (code) => {
                resolve({ code, ms: Date.now() - since });
              });
          }),
      };
      const collect = (d: Buffer) => {
        proc.output += d.toString();
      };
      child.stderr.on('data', collect);
      child.stdout.on('data', collect);
      return proc;
    },
    tempDir: async (name) => {
      const d = await mkdtemp(path.join(os.tmpdir(), `fsbench-${name}-`));
      dirs.push(d);
      return d;
    },
  };
}
