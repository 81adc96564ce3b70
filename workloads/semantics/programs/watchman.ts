/**
 * watchman as a project runs it, with nothing global: a private server in the foreground (its
 * own socket, state, pid and log files in a temporary directory of its own, `--no-save-state`),
 * `watch` on the root, then one subscription read as JSON lines (`watchman -j --persistent
 * --no-pretty`). Stopping ends the client and the server and removes the directory.
 *
 * watchman says which paths changed, not how: a file that no longer exists is `deleted`, one it
 * had not seen is `created`, any other change (content or attributes) `modified`; a rename is
 * the old path deleted and the new one created, and the parent directory is reported too. A
 * result that starts over (`is_fresh_instance`) or warns of a recrawl means it lost track of
 * events: `overflow`.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { FsbenchError, messageOf } from '../../../contract/errors.js';
import type { ChangeKind, WatchEvent } from '../../../contract/workloads/semantics/events.js';
import { WatchmanLine, WatchmanWatchAnswer } from '../../../contract/workloads/semantics/program-output.js';
import type { RunningWatcher, WatcherAdapter, WatcherExit } from '../watcher.js';
import type { ProgramOptions } from './options.js';
import { READY_TIMEOUT_MS, debianPackage, startProgram, type RunningProgram } from './program.js';
import { pathInRoot, watchedRoot } from './reported-path.js';

const PKG = 'watchman';
const SUBSCRIPTION = 'fsbench';
/** A Unix socket's path holds at most 107 bytes (sun_path). */
const MAX_SOCKET_PATH = 107;
/** One subscription result lists every path of a settled batch: a storm's can be large. */
const MAX_LINE_BYTES = 256 * 1024 * 1024;

/** The events of one result line of the subscription, or a throw for an error or a line it does not know. */
export function parseWatchman(root: string, record: string, atNs: bigint, subscribed: () => void): WatchEvent[] {
  const line = WatchmanLine.parse(JSON.parse(record));
  if ('error' in line) throw new Error(`watchman: ${line.error}`);
  if ('subscribe' in line) {
    subscribed();
    return [];
  }
  if (line.subscription !== SUBSCRIPTION) throw new Error(`a result of another subscription, ${line.subscription}`);
  const lost = line.is_fresh_instance === true || /recrawl/i.test(line.warning ?? '');
  const events: WatchEvent[] = lost ? [{ kind: 'overflow', path: root, atNs }] : [];
  for (const file of line.files ?? []) {
    const kind: ChangeKind = !file.exists ? 'deleted' : file.new ? 'created' : 'modified';
    events.push({ kind, path: pathInRoot(root, path.join(root, file.name)), atNs });
  }
  return events;
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

export function watchmanAdapter(options: ProgramOptions = {}): WatcherAdapter {
  return {
    name: 'watchman',
    async start(rootGiven, onEvent, signal): Promise<RunningWatcher> {
      const root = watchedRoot(rootGiven);
      const dir = await mkdtemp(path.join(options.tmpDir ?? os.tmpdir(), 'fsbench-watchman-'));
      const sock = path.join(dir, 'sock');
      const started: RunningProgram[] = [];
      const stopAll = async (): Promise<WatcherExit> => {
        // The client first, so no result arrives from a server on its way out; then the server.
        const exits: WatcherExit[] = [];
        let failure: Error | undefined;
        for (const program of started.reverse()) {
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
        const spec = { backend: 'watchman', file: 'watchman', remedy: debianPackage(PKG), separator: 0x0a, maxRecordBytes: MAX_LINE_BYTES, path: options.path } as const;
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
        const query = { fields: ['name', 'exists', 'new', 'type'], empty_on_fresh_instance: true };
        const client = await startProgram(
          { ...spec, args: [...common, '--no-spawn', '-j', '--persistent'], stdin: JSON.stringify(['subscribe', root, SUBSCRIPTION, query]) },
          (record, atNs) => parseWatchman(root, record, atNs, subscribed),
          onEvent,
          signal,
        );
        started.push(client);
        await client.untilReady(subscribedNow, 'that its subscription runs');
      } catch (err) {
        await stopAll().catch(() => undefined);
        throw err;
      }
      return { stop: stopAll };
    },
  };
}
