/**
 * The Node libraries' backends (`parcel`, `chokidar`, `fswatch`): each runs in a child process of
 * its own (node-watcher.ts), so its CPU and memory are not the writer's, and its lines are read
 * as they come, parsed with the protocol's schemas. The child never outlives the run: SIGTERM
 * on stop, SIGKILL when it does not go, and it exits when this process's IPC channel closes.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { FsbenchError } from '../../contract/errors.js';
import { PACKAGE_ROOT } from '../../host/native.js';
import { ChildLine, type NodeBackend } from './node-protocol.js';
import type { WatcherAdapter, WatcherExit } from './watcher.js';

/** How long the child may take to close its library after SIGTERM. */
const STOP_GRACE_MS = 10_000;
/** How long a library may take to say it watches (chokidar stats every entry first). */
const START_TIMEOUT_MS = 120_000;

/** The compiled child: beside this module when running from dist/, under dist/ when the sources run (tests). */
function childScript(): string {
  const here = fileURLToPath(import.meta.url);
  const beside = path.join(path.dirname(here), 'node-watcher.js');
  if (here.endsWith('.js') && existsSync(beside)) return beside;
  const built = path.join(PACKAGE_ROOT, 'dist', 'workloads', 'semantics', 'node-watcher.js');
  if (!existsSync(built)) throw new FsbenchError('NATIVE_PROBE_MISSING', `the Node watcher ${built} is missing: run 'npm run build'`);
  return built;
}

export function nodeAdapter(backend: NodeBackend): WatcherAdapter {
  return {
    name: backend,
    async start(root, onEvent, signal) {
      const child = spawn(process.execPath, [childScript(), JSON.stringify({ backend, root })], { stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
      let stderr = '';
      child.stderr?.setEncoding('utf8').on('data', (d: string) => {
        stderr = (stderr + d).slice(-4096);
      });
      const state: { failure: string | null; ready: boolean; done: boolean; errors: string[] } = { failure: null, ready: false, done: false, errors: [] };
      let markReady: () => void = () => undefined;
      const ready = new Promise<void>((resolve) => {
        markReady = resolve;
      });
      const closed = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
        child.on('close', (code, sig) => {
          resolve({ code, signal: sig });
        });
        child.on('error', (err) => {
          state.failure ??= err.message;
          resolve({ code: null, signal: null });
        });
      });
      const lines = createInterface({ input: child.stdout ?? process.stdin });
      lines.on('line', (text) => {
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        const line = ChildLine.safeParse(json);
        if (!line.success) {
          state.failure ??= `${backend} printed an unexpected line: ${text.slice(0, 200)}`;
          return;
        }
        const l = line.data;
        if ('k' in l) onEvent({ kind: l.k, path: l.p, ...(l.f === undefined ? {} : { from: l.f }), atNs: BigInt(l.t) });
        else if ('ready' in l) {
          state.ready = true;
          markReady();
        } else if ('done' in l) Object.assign(state, { done: true, errors: l.errors });
        else state.failure ??= l.failure;
      });
      const kill = () => child.kill('SIGKILL');
      signal.addEventListener('abort', kill, { once: true });
      const timer = setTimeout(kill, START_TIMEOUT_MS);
      const first = await Promise.race([ready.then(() => 'ready' as const), closed.then(() => 'closed' as const)]);
      clearTimeout(timer);
      if (first === 'closed') {
        signal.removeEventListener('abort', kill);
        if (signal.aborted) throw new FsbenchError('CANCELLED', `the run was cancelled while ${backend} started`);
        throw new FsbenchError('BACKEND_FAILED', `${backend} stopped before it watched ${root}: ${state.failure ?? (stderr.trim().slice(-500) || 'no message')}`);
      }
      return {
        async stop(): Promise<WatcherExit> {
          child.kill('SIGTERM');
          const stopping = { killed: false };
          const grace = setTimeout(() => {
            stopping.killed = true;
            kill();
          }, STOP_GRACE_MS);
          const exit = await closed;
          clearTimeout(grace);
          signal.removeEventListener('abort', kill);
          if (state.failure !== null || !state.done) {
            const how = stopping.killed
              ? `it did not stop within ${STOP_GRACE_MS / 1000} s of being asked (still busy with its events) and was killed`
              : `it exited with ${String(exit.signal ?? exit.code)} before closing`;
            throw new FsbenchError('BACKEND_FAILED', `${backend} failed: ${state.failure ?? `${how}: ${stderr.trim().slice(-500) || 'no message'}`}`);
          }
          return { exit: exit.signal ?? exit.code, stderrTail: [stderr, ...state.errors].join('\n').slice(-4096) };
        },
      };
    },
  };
}
