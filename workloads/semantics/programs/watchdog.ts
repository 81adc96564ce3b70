/**
 * Python's watchdog (python3-watchdog) as its users run it: an Observer scheduled recursively on
 * the root with a handler, here watchdog_observer.py printing each event as a JSON line. Its
 * `moved` events carry both paths (watchdog pairs inotify's halves by their cookie): `renamed`
 * with `from`. It runs under Debian's /usr/bin/python3, the interpreter the package installs
 * for; another python3 on PATH (pyenv, a venv) does not see Debian's packages.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { FsbenchError } from '../../../contract/errors.js';
import type { WatchEvent } from '../../../contract/workloads/semantics/events.js';
import { MAX_PROGRAM_PATH, WatchdogLine } from '../../../contract/workloads/semantics/program-output.js';
import { PACKAGE_ROOT } from '../../../host/native.js';
import type { RunningWatcher, WatcherAdapter } from '../watcher.js';
import type { ProgramOptions } from './options.js';
import { debianPackage, startProgram } from '../../../host/watcher-program.js';
import { pathInRoot, watchedRoot } from './reported-path.js';

const PKG = 'python3-watchdog';

/** The script ships as source in the package (package.json `files`) and in the image (`COPY . .`). */
export const OBSERVER_SCRIPT = path.join(PACKAGE_ROOT, 'workloads', 'semantics', 'programs', 'watchdog_observer.py');

export function watchdogAdapter(options: ProgramOptions = {}): WatcherAdapter {
  return {
    name: 'watchdog',
    async start(rootGiven, onEvent, signal): Promise<RunningWatcher> {
      const root = watchedRoot(rootGiven);
      if (!existsSync(OBSERVER_SCRIPT)) throw new FsbenchError('NATIVE_PROBE_MISSING', `${OBSERVER_SCRIPT} is missing: reinstall fsbench`);
      let ready: () => void = () => undefined;
      const readyNow = new Promise<void>((resolve) => {
        ready = resolve;
      });
      const said: { missing?: string } = {};
      const parse = (record: string, atNs: bigint): WatchEvent[] => {
        const line = WatchdogLine.parse(JSON.parse(record));
        if ('ready' in line) ready();
        else if ('failure' in line) {
          if (line.failure === 'no-watchdog') said.missing = line.detail;
          throw new Error(`${line.failure}: ${line.detail}`);
        } else if (line.event === 'moved') {
          if (line.dest === undefined) throw new Error('a move without its destination');
          return [{ kind: 'renamed', path: pathInRoot(root, line.dest), from: pathInRoot(root, line.path), atNs }];
        } else {
          return [{ kind: line.event, path: pathInRoot(root, line.path), atNs }];
        }
        return [];
      };
      const python = options.python ?? '/usr/bin/python3';
      const program = await startProgram(
        { backend: 'watchdog', file: python, args: ['-u', OBSERVER_SCRIPT, root], remedy: debianPackage(PKG), separator: 0x0a, maxRecordBytes: 3 * MAX_PROGRAM_PATH, path: options.path },
        parse,
        onEvent,
        signal,
      );
      try {
        await program.untilReady(readyNow, 'that its Observer watches the root');
      } catch (err) {
        if (said.missing !== undefined) {
          throw new FsbenchError('TARGET_UNUSABLE', `${python} cannot import watchdog (${said.missing}): ${debianPackage(PKG)} to run backend: watchdog`);
        }
        throw err;
      }
      return { stop: () => program.stop() };
    },
  };
}
