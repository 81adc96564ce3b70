/**
 * The Node watcher child: one process per run, so its RSS and its kernel charges are the
 * library's alone. It joins the run's memory cgroup first, reads the accounting, sets up the
 * library on the tree, writes marker files into the last, deepest directory until the library
 * reports one (Node's recursive fs.watch walks the tree asynchronously after returning, so a
 * marker made too early is missed: a new one follows every 100 ms), waits until its inotify
 * watch count stops growing, reads the accounting again, closes the library and reports once
 * over IPC. The parent going away closes IPC, and the child exits.
 *
 * Run by workloads/watches/node-backend.ts as `node node-watcher.js CONFIG_JSON`.
 */
import { watch as fsWatch, writeFileSync, type FSWatcher } from 'node:fs';
import { open, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import parcel from '@parcel/watcher';
import chokidar from 'chokidar';
import { messageOf } from '../../contract/errors.js';
import { readCounter } from './accounting.js';
import { ChildConfig, type ChildResult } from './node-protocol.js';

/** inotify watches this process holds: one `inotify wd:` line per watch in each inotify fd's fdinfo. */
async function countWatches(): Promise<number> {
  let n = 0;
  for (const fd of await readdir('/proc/self/fd')) {
    const text = await readFile(`/proc/self/fdinfo/${fd}`, 'utf8').catch(() => '');
    if (!text.includes('inotify wd:')) continue;
    for (const line of text.split('\n')) if (line.startsWith('inotify wd:')) n++;
  }
  return n;
}

async function rss(): Promise<number> {
  return (await readCounter('/proc/self/status', 'VmRSS')) ?? 0;
}

/** Markers tried, 100 ms apart, before the child reports that no event came. */
const MAX_MARKERS = 50;

const isLimit = (msg: string) => /ENOSPC|No space left|file watchers|inotify watch limit/i.test(msg);

interface Watching {
  close(): Promise<void>;
}

async function main(): Promise<void> {
  const config = ChildConfig.parse(JSON.parse(process.argv[2] ?? 'null'));
  process.on('disconnect', () => process.exit(1));
  if (config.cgroup !== null) writeFileSync(path.join(config.cgroup, 'cgroup.procs'), `${process.pid}\n`);
  const memcg = () => (config.memcgFile === null ? Promise.resolve(null) : readCounter(config.memcgFile, config.memcgKey));
  const markerDir = path.join(config.root, config.markerDir);
  const prefix = `fsbench-marker-${process.pid}-`;
  const errors: string[] = [];
  // Written by the libraries' callbacks, so an object: its fields are not narrowed across awaits.
  const state: { limitError: string | null; firstEventAt: number | null } = { limitError: null, firstEventAt: null };
  const seen = (p: string) => {
    if (state.firstEventAt === null && path.basename(p).startsWith(prefix) && path.dirname(path.resolve(config.root, p)) === markerDir) {
      state.firstEventAt = performance.now();
    }
  };
  const onError = (err: unknown) => {
    const msg = messageOf(err);
    if (isLimit(msg)) state.limitError ??= msg;
    else if (errors.length < 20) errors.push(msg.slice(0, 2000));
  };

  const beforeMemcg = await memcg();
  const beforeSUnreclaim = await readCounter('/proc/meminfo', 'SUnreclaim');
  const beforeRss = await rss();
  const t0 = performance.now();
  let watching: Watching | null = null;
  try {
    if (config.backend === 'parcel') {
      // inotify by name: left to choose, @parcel/watcher takes watchman wherever it is installed
      // (the agent image carries it), and this would measure a watchman server instead.
      const sub = await parcel.subscribe(
        config.root,
        (err, events) => {
          if (err) onError(err);
          for (const e of events) seen(e.path);
        },
        { backend: 'inotify' },
      );
      watching = { close: () => sub.unsubscribe() };
    } else if (config.backend === 'chokidar') {
      // Its defaults, as an application gets them, without the initial scan's `add` events.
      const w = chokidar.watch(config.root, { ignoreInitial: true });
      w.on('add', seen);
      w.on('error', onError);
      await new Promise<void>((resolve) => w.once('ready', () => {
        resolve();
      }));
      watching = { close: () => w.close() };
    } else {
      const w: FSWatcher = fsWatch(config.root, { recursive: true }, (_type, name) => {
        if (name !== null) seen(name);
      });
      w.on('error', onError);
      watching = {
        close: () => {
          w.close();
          return Promise.resolve();
        },
      };
    }
  } catch (err) {
    onError(err);
    if (state.limitError === null) throw err;
  }
  let setupEnd = performance.now();

  let markers = 0;
  // Functions, not fields: the callbacks change them while this awaits.
  const arrived = () => state.firstEventAt !== null;
  const limited = () => state.limitError !== null;
  if (!limited()) {
    // Setup has returned: a watcher that has the marker's directory reports within a few
    // markers. One that never does is short of watches without saying so (Node's recursive
    // fs.watch swallows ENOSPC): the parent judges that from the watch count, so give up after
    // MAX_MARKERS rather than fill the tree's filesystem with markers.
    const deadline = t0 + config.timeoutMs;
    while (!arrived() && !limited() && markers < MAX_MARKERS && performance.now() < deadline) {
      const h = await open(path.join(markerDir, `${prefix}${markers++}`), 'wx');
      await h.close();
      const wait = performance.now() + 100;
      while (!arrived() && performance.now() < wait) await sleep(2);
    }
  }
  // Node's recursive fs.watch may still be walking: setup ends when its watch count stops growing.
  let watches = await countWatches();
  if (config.backend === 'fswatch') {
    let stable = 0;
    while (stable < 3) {
      await sleep(100);
      const now = await countWatches();
      if (now !== watches) {
        watches = now;
        setupEnd = performance.now();
        stable = 0;
      } else stable++;
    }
  }
  const afterMemcg = await memcg();
  const afterSUnreclaim = await readCounter('/proc/meminfo', 'SUnreclaim');
  const afterRss = await rss();
  const t1 = performance.now();
  await watching?.close();
  const teardownNs = (performance.now() - t1) * 1e6;
  const result: ChildResult = {
    watches,
    limitError: state.limitError,
    setupNs: (setupEnd - t0) * 1e6,
    firstEventNs: state.firstEventAt === null ? null : (state.firstEventAt - t0) * 1e6,
    teardownNs,
    markers,
    beforeMemcg,
    afterMemcg,
    beforeSUnreclaim,
    afterSUnreclaim,
    beforeRss,
    afterRss,
    errors,
  };
  process.send?.({ result });
}

main().then(
  () => {
    process.disconnect();
  },
  (err: unknown) => {
    process.send?.({ failure: messageOf(err).slice(0, 4000) }, () => process.exit(3));
  },
);
