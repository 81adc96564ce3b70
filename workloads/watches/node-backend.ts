/**
 * Runs a Node watcher library in a child process of its own (node-watcher.ts): the library's
 * resident memory and kernel charges are then its own, not the agent's. The child reports once
 * over IPC; its message is parsed with a schema, and the child never outlives the run (killed on
 * cancellation and timeout, and it exits when the IPC channel closes).
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { FsbenchError } from '../../contract/errors.js';
import { PACKAGE_ROOT } from '../../host/native.js';
import { ChildMessage, type ChildConfig, type ChildResult } from './node-protocol.js';

/** The compiled child script: beside this module when running from dist/, under dist/ when the sources run (tests). */
function childScript(): string {
  const here = fileURLToPath(import.meta.url);
  const beside = path.join(path.dirname(here), 'node-watcher.js');
  if (here.endsWith('.js') && existsSync(beside)) return beside;
  const built = path.join(PACKAGE_ROOT, 'dist', 'workloads', 'watches', 'node-watcher.js');
  if (!existsSync(built)) throw new FsbenchError('NATIVE_PROBE_MISSING', `the Node watcher ${built} is missing: run 'npm run build'`);
  return built;
}

export async function runNodeWatcher(config: ChildConfig, signal: AbortSignal, timeoutMs: number): Promise<ChildResult> {
  const child = spawn(process.execPath, [childScript(), JSON.stringify(config)], { stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (d: string) => {
    if (stderr.length < 8192) stderr += d;
  });
  let message: unknown;
  child.on('message', (m) => {
    message ??= m;
  });
  const stopped = { byUs: false };
  // Read after the child exits: an abort may have come meanwhile.
  const cancelled = () => signal.aborted;
  const kill = () => {
    stopped.byUs = true;
    child.kill('SIGKILL');
  };
  const timer = setTimeout(kill, timeoutMs);
  if (signal.aborted) kill();
  else signal.addEventListener('abort', kill, { once: true });
  try {
    const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
      child.on('error', reject);
      child.on('close', (code, sig) => {
        resolve({ code, signal: sig });
      });
    });
    if (cancelled()) throw new FsbenchError('CANCELLED', `the run was cancelled while ${config.backend} was watching`);
    if (stopped.byUs) throw new FsbenchError('BACKEND_FAILED', `${config.backend} did not finish setting up and reporting within ${Math.round(timeoutMs / 1000)} s`);
    const parsed = ChildMessage.safeParse(message);
    if (!parsed.success) {
      throw new FsbenchError(
        'BACKEND_FAILED',
        `the ${config.backend} watcher exited with ${exit.signal ?? `status ${String(exit.code)}`} without a result: ${stderr.trim().slice(0, 500) || 'no message'}`,
      );
    }
    if ('failure' in parsed.data) throw new FsbenchError('BACKEND_FAILED', `${config.backend}: ${parsed.data.failure}`);
    return parsed.data.result;
  } finally {
    clearTimeout(timer);
    signal.removeEventListener('abort', kill);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}
