/** Helpers for tests that run cells on this machine, for real. */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { expandMatrix, parseMatrix, type Cell } from '../../contract/matrix.js';
import type { MachineFingerprint } from '../../contract/fingerprint.js';
import type { RunResult } from '../../contract/result.js';
import { collectFingerprint } from '../../host/fingerprint.js';
import { Journal } from '../../host/journal.js';
import { runCell } from '../../runner/run-cell.js';
import { PACKAGE_ROOT } from '../../host/native.js';

export const CLI = path.join(PACKAGE_ROOT, 'dist', 'cli', 'fsbench.js');

/** What the compiled CLI is built from. */
const CLI_SOURCES = ['agent', 'coordinator', 'cli', 'contract', 'log', 'host', 'queue', 'runner', 'sandbox', 'settings', 'workloads', 'stats', 'report', 'compare', 'gate'];

function newestSource(dir: string): number {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) newest = Math.max(newest, newestSource(p));
    else if (e.name.endsWith('.ts')) newest = Math.max(newest, statSync(p).mtimeMs);
  }
  return newest;
}

/**
 * Compiles the CLI when it is missing or older than its sources, for tests that spawn it as a
 * user would (`npm test` compiles first, a lone `vitest run` may not have).
 */
export async function freshCli(): Promise<string> {
  const newest = Math.max(...CLI_SOURCES.map((d) => path.join(PACKAGE_ROOT, d)).filter(existsSync).map(newestSource));
  if (!existsSync(CLI) || statSync(CLI).mtimeMs < newest) {
    // Type errors elsewhere must not stop the emit these tests need; the exit code is not the point.
    await promisify(execFile)('npx', ['tsc', '-p', PACKAGE_ROOT], { cwd: PACKAGE_ROOT }).catch(() => undefined);
  }
  return CLI;
}

export function cellOf(workload: 'inotify' | 'metadata' | 'noop', params: Record<string, unknown>): Cell {
  const [cell] = expandMatrix(parseMatrix({ name: 't', workload, params }));
  if (!cell) throw new Error('no cell');
  return cell;
}

let fingerprint: MachineFingerprint | undefined;

export async function runOnce(cell: Cell, scratchDir: string, signal = new AbortController().signal): Promise<RunResult> {
  fingerprint ??= await collectFingerprint();
  const journal = await Journal.open(path.join(scratchDir, 'journal'));
  return runCell({ matrix: 't', cell, repetition: 0, fingerprint }, { scratchDir, journal, signal, log: () => undefined });
}

export function tempDir(prefix: string): { dir: string; remove: () => void } {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  return {
    dir,
    remove: () => {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export function sysctl(name: string): string {
  return readFileSync(`/proc/sys/fs/inotify/${name}`, 'utf8').trim();
}

/** MemAvailable of /proc/meminfo in bytes, read here without the code under test (its host budget sizes runs against it). */
export function memAvailable(): number {
  const kb = /^MemAvailable:\s+(\d+) kB$/m.exec(readFileSync('/proc/meminfo', 'utf8'))?.[1];
  if (kb === undefined) throw new Error('/proc/meminfo has no MemAvailable line');
  return Number(kb) * 1024;
}

export function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/mounts', 'utf8').split('\n').filter((l) => l.split(' ')[1]?.startsWith(dir));
}

/** The compiled CLI (`npm test` compiles before it runs vitest). */
export function spawnCli(args: string[], env: NodeJS.ProcessEnv = {}): ChildProcess {
  if (!existsSync(CLI)) execFileSync('npx', ['tsc', '-p', PACKAGE_ROOT], { stdio: 'inherit' });
  return spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
}

export async function waitFor(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const start = Date.now();
  while (!check()) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export function exited(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (d: string) => {
    stdout += d;
  });
  child.stderr?.setEncoding('utf8').on('data', (d: string) => {
    stderr += d;
  });
  return new Promise((resolve) => child.on('close', (code, signal) => {
    resolve({ code, signal, stdout, stderr });
  }));
}

/** Runs the compiled CLI to the end: its exit code and what it printed. */
export async function runCli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return exited(spawnCli(args, env));
}
