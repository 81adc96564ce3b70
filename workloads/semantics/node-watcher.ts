/**
 * The Node watcher child of the semantics workload: one library (@parcel/watcher, chokidar or
 * Node's recursive fs.watch) watching the root, each event printed at once as a JSON line in
 * the vocabulary of contract/workloads/semantics/events.ts, stamped with process.hrtime.bigint()
 * (CLOCK_MONOTONIC, the writer's clock) when the library called back. SIGTERM closes the library
 * and ends with a `done` line; the parent going away (IPC closed) ends it at once.
 *
 * Run by workloads/semantics/node-adapter.ts as `node node-watcher.js CONFIG_JSON`.
 */
import { watch as fsWatch } from 'node:fs';
import path from 'node:path';
import parcel from '@parcel/watcher';
import chokidar from 'chokidar';
import { messageOf } from '../../contract/errors.js';
import type { ChangeKind } from '../../contract/workloads/semantics/events.js';
import { ChildConfig, type ChildLine } from './node-protocol.js';

// Pipes are written synchronously on Linux: a line is out before the callback returns.
const print = (line: ChildLine) => process.stdout.write(`${JSON.stringify(line)}\n`);
const report = (k: ChangeKind, p: string) => {
  print({ k, p, t: String(process.hrtime.bigint()) });
};

const PARCEL: Readonly<Record<'create' | 'update' | 'delete', ChangeKind>> = { create: 'created', update: 'modified', delete: 'deleted' };

async function main(): Promise<void> {
  const config = ChildConfig.parse(JSON.parse(process.argv[2] ?? 'null'));
  process.on('disconnect', () => process.exit(1));
  const errors: string[] = [];
  const onError = (err: unknown) => {
    if (errors.length < 20) errors.push(messageOf(err).slice(0, 2000));
  };
  let close: () => Promise<void>;
  if (config.backend === 'parcel') {
    // inotify by name: left to choose, @parcel/watcher takes watchman wherever it is installed
    // (the agent image carries it), and `parcel` would then measure a watchman server.
    const sub = await parcel.subscribe(
      config.root,
      (err, events) => {
        if (err) onError(err);
        for (const e of events) report(PARCEL[e.type], e.path);
      },
      { backend: 'inotify' },
    );
    close = () => sub.unsubscribe();
  } else if (config.backend === 'chokidar') {
    // Its defaults, as an application gets them, without the initial scan's `add` events.
    const w = chokidar.watch(config.root, { ignoreInitial: true });
    w.on('add', (p) => {
      report('created', p);
    });
    w.on('addDir', (p) => {
      report('created', p);
    });
    w.on('change', (p) => {
      report('modified', p);
    });
    w.on('unlink', (p) => {
      report('deleted', p);
    });
    w.on('unlinkDir', (p) => {
      report('deleted', p);
    });
    w.on('error', onError);
    await new Promise<void>((resolve) => w.once('ready', () => {
      resolve();
    }));
    close = () => w.close();
  } else {
    // `rename` says only that a name appeared or went: `unknown`, as the watcher said.
    const w = fsWatch(config.root, { recursive: true }, (type, name) => {
      if (name !== null) report(type === 'change' ? 'modified' : 'unknown', path.join(config.root, name));
    });
    w.on('error', onError);
    close = () => {
      w.close();
      return Promise.resolve();
    };
  }
  process.once('SIGTERM', () => {
    close().then(
      () => {
        print({ done: true, errors });
        process.exit(0);
      },
      (err: unknown) => {
        print({ failure: `closing ${config.backend}: ${messageOf(err)}` });
        process.exit(3);
      },
    );
  });
  print({ ready: true });
}

main().catch((err: unknown) => {
  print({ failure: messageOf(err).slice(0, 4000) });
  process.exit(3);
});
