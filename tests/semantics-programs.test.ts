/**
 * The watcher programs people run (inotifywait, fswatch, watchman, watchdog) and a watcher of the
 * user's own, each through its adapter (workloads/semantics/programs/) against the real program:
 * what each reports of each kind of change, what a missing program says, and that stopping
 * leaves no process and no file behind.
 *
 * The operations run one at a time, each followed by a fence file in the root that the test
 * waits to see reported: a program hands its events on in order, so what an operation caused is
 * what arrived after the previous fence and no later than its own. The file stays in the host
 * lane (tests/lanes.ts): the overflow test reads the host's fs.inotify.max_queued_events, which
 * the host lane's files change while they run.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { appendFile, chmod, mkdir, mkdtemp, open, readdir, rename, rm, unlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { FsbenchError } from '../contract/errors.js';
import type { WatchEvent } from '../contract/workloads/semantics/events.js';
import { parseFswatch } from '../workloads/semantics/programs/fswatch-cli.js';
import { PROGRAM_BACKENDS, programAdapters, userListedAdapter, type ProgramBackend } from '../workloads/semantics/programs/index.js';
import { parseInotifywait } from '../workloads/semantics/programs/inotifywait.js';
import type { RunningWatcher, WatcherAdapter } from '../workloads/semantics/watcher.js';

const dirs: string[] = [];
async function tempDir(name: string): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), `fsbench-programs-${name}-`));
  dirs.push(dir);
  return dir;
}
const running: RunningWatcher[] = [];
afterEach(async () => {
  for (const w of running.splice(0)) await w.stop().catch(() => undefined);
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

/** This process's children now: pid and command name, from /proc. */
function children(): { pid: number; comm: string }[] {
  const found: { pid: number; comm: string }[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // ended between the listing and the read
    }
    const close = stat.lastIndexOf(')');
    const ppid = Number(stat.slice(close + 2).split(' ')[1]);
    if (ppid === process.pid) found.push({ pid: Number(entry), comm: stat.slice(stat.indexOf('(') + 1, close) });
  }
  return found;
}

async function until<T>(what: string, get: () => T | undefined, ms = 30_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = get();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

interface Watching {
  readonly root: string;
  readonly events: WatchEvent[];
  readonly watcher: RunningWatcher;
  /** Writes fence files into the root until one is reported; resolves with when it arrived. */
  fence(): Promise<bigint>;
}

async function watch(adapter: WatcherAdapter, options: { root?: string } = {}): Promise<Watching> {
  const root = options.root ?? (await tempDir('root'));
  await mkdir(path.join(root, 'a'), { recursive: true });
  await mkdir(path.join(root, 'b'), { recursive: true });
  const events: WatchEvent[] = [];
  const watcher = await adapter.start(root, (e) => events.push(e), new AbortController().signal);
  running.push(watcher);
  let n = 0;
  const fence = async (): Promise<bigint> => {
    // Several tries: a program that says nothing when its watches are in place (fswatch) may
    // miss the first ones, as the workload's markers expect.
    for (let tries = 0; tries < 30; tries++) {
      const name = path.join(root, `fence-${n++}`);
      await writeFile(name, '');
      const end = Date.now() + 3_000;
      while (Date.now() < end) {
        const seen = events.find((e) => e.path === name);
        if (seen) return seen.atNs;
        await sleep(10);
      }
    }
    throw new Error('no fence file was reported');
  };
  return { root, events, watcher, fence };
}

/** The operations of the script, each on the tree the previous ones left. */
const OPERATIONS: readonly (readonly [string, (root: string) => Promise<void>])[] = [
  ['create', async (r) => (await open(path.join(r, 'a/f1'), 'wx')).close()],
  ['append', (r) => appendFile(path.join(r, 'a/f1'), 'x')],
  ['chmod', (r) => chmod(path.join(r, 'a/f1'), 0o600)],
  ['rename within a dir', (r) => rename(path.join(r, 'a/f1'), path.join(r, 'a/f2'))],
  ['rename across dirs', (r) => rename(path.join(r, 'a/f2'), path.join(r, 'b/f3'))],
  ['delete', (r) => unlink(path.join(r, 'b/f3'))],
  ['mkdir', (r) => mkdir(path.join(r, 'a/d'))],
  // After the directory was reported (the fence before it): a watcher that adds watches for
  // new directories has had its chance; whether it wins the race of a file made at once is not
  // this script's question.
  ['write a file in the new dir', (r) => writeFile(path.join(r, 'a/d/g'), 'z')],
];
type Reports = Record<string, string[]>;

/**
 * Runs the script; per operation, what was reported (`kind path`, relative to the root), sorted
 * (watchman lists one batch's paths in no set order). The root's own changes are left out: the
 * fences make them.
 */
async function reports(adapter: WatcherAdapter): Promise<Reports> {
  const w = await watch(adapter);
  let last = await w.fence();
  const said: Reports = {};
  for (const [name, operation] of OPERATIONS) {
    await operation(w.root);
    const at = await w.fence();
    said[name] = w.events
      .filter((e) => e.atNs > last && e.atNs <= at && !/\/fence-\d+$/.test(e.path) && e.path !== w.root)
      .map((e) => `${e.kind} ${path.relative(w.root, e.path) || '.'}${e.from === undefined ? '' : ` from ${path.relative(w.root, e.from)}`}`)
      .sort();
    last = at;
  }
  expect(Object.keys(said)).toHaveLength(OPERATIONS.length);
  return said;
}

describe('what each program reports of each kind of change', () => {
  const adapters = programAdapters();

  it('inotifywait reports each change once with its own kind, a rename as MOVED_FROM + MOVED_TO left unpaired (renamed-from, then renamed without from)', async () => {
    expect(await reports(adapters.inotifywait)).toEqual({
      create: ['created a/f1'],
      append: ['modified a/f1'],
      chmod: ['attrib a/f1'],
      'rename within a dir': ['renamed a/f2', 'renamed-from a/f1'],
      'rename across dirs': ['renamed b/f3', 'renamed-from a/f2'],
      delete: ['deleted b/f3'],
      mkdir: ['created a/d'],
      'write a file in the new dir': ['created a/d/g', 'modified a/d/g'],
    });
  });

  it('fswatch-cli reports a write as Updated twice (MODIFY, CLOSE_WRITE), a new file as Created + Updated, a rename unpaired (MovedFrom, MovedTo)', async () => {
    const said = await reports(adapters['fswatch-cli']);
    // A file written just after a new directory was reported is missed or not depending on
    // whether fswatch's next latency tick (1 s) has added the directory's watch yet: a race this
    // script does not judge. Measured here: missed when written at once, reported 3 s later.
    expect(said).toHaveProperty(['write a file in the new dir']);
    delete said['write a file in the new dir'];
    expect(said).toEqual({
      create: ['created a/f1', 'modified a/f1'],
      append: ['modified a/f1', 'modified a/f1'],
      chmod: ['attrib a/f1'],
      'rename within a dir': ['renamed a/f2', 'renamed-from a/f1'],
      'rename across dirs': ['renamed b/f3', 'renamed-from a/f2'],
      delete: ['deleted b/f3'],
      mkdir: ['created a/d'],
    });
  });

  it('watchman reports paths, not kinds: a chmod and an append are both modified, a rename is the old path deleted and the new one created, and the parent directory changes with its entries', async () => {
    expect(await reports(adapters.watchman)).toEqual({
      create: ['created a/f1', 'modified a'],
      append: ['modified a/f1'],
      chmod: ['modified a/f1'],
      'rename within a dir': ['created a/f2', 'deleted a/f1', 'modified a'],
      'rename across dirs': ['created b/f3', 'deleted a/f2', 'modified b'],
      delete: ['deleted b/f3'],
      mkdir: ['created a/d'],
      'write a file in the new dir': ['created a/d/g', 'modified a/d'],
    });
  });

  it('watchdog pairs a rename (renamed with from), reports a chmod as modified, and a parent directory modified with each create, close-after-write, rename and delete in it', async () => {
    expect(await reports(adapters.watchdog)).toEqual({
      create: ['created a/f1', 'modified a', 'modified a'],
      append: ['modified a', 'modified a/f1'],
      chmod: ['modified a/f1'],
      'rename within a dir': ['modified a', 'renamed a/f2 from a/f1'],
      'rename across dirs': ['modified a', 'modified b', 'renamed b/f3 from a/f2'],
      delete: ['deleted b/f3', 'modified b'],
      mkdir: ['created a/d', 'modified a'],
      'write a file in the new dir': ['created a/d/g', 'modified a/d', 'modified a/d', 'modified a/d/g'],
    });
  });
});

describe('a queue overflow', () => {
  it('inotifywait drops the kernel\'s IN_Q_OVERFLOW silently: of more creates than max_queued_events made while it was stopped, it reports exactly max_queued_events and no overflow', async () => {
    const max = Number(readFileSync('/proc/sys/fs/inotify/max_queued_events', 'utf8'));
    expect(max).toBeGreaterThan(0);
    const w = await watch(programAdapters().inotifywait);
    await w.fence();
    const program = children().filter((c) => c.comm === 'inotifywait');
    expect(program).toHaveLength(1);
    const pid = program[0]?.pid ?? 0;
    // Stopped, it reads nothing: the kernel's queue fills and overflows.
    process.kill(pid, 'SIGSTOP');
    const made = max + 500;
    try {
      for (let i = 0; i < made; i++) await (await open(path.join(w.root, `a/n${i}`), 'wx')).close();
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    await w.fence();
    const created = w.events.filter((e) => e.kind === 'created' && /\/a\/n\d+$/.test(e.path));
    expect(created).toHaveLength(max);
    expect(w.events.filter((e) => e.kind === 'overflow')).toEqual([]);
  });
});

describe('a missing program', () => {
  it('fails the start naming the Debian package, for each program not on PATH', async () => {
    const empty = await tempDir('path');
    const adapters = programAdapters({ path: empty, python: path.join(empty, 'python3') });
    const packages: Record<ProgramBackend, string> = { inotifywait: 'inotify-tools', 'fswatch-cli': 'fswatch', watchman: 'watchman', watchdog: 'python3-watchdog' };
    const refusals: string[] = [];
    for (const backend of PROGRAM_BACKENDS) {
      const err: unknown = await adapters[backend].start(await tempDir('root'), () => undefined, new AbortController().signal).then(
        () => new Error(`${backend} started`),
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(FsbenchError);
      expect(err).toMatchObject({ code: 'TARGET_UNUSABLE', message: expect.stringContaining(`Debian package ${packages[backend]}`) as unknown });
      refusals.push(backend);
    }
    expect(refusals).toHaveLength(4);
  });

  it('watchdog under a python3 that cannot import watchdog fails naming python3-watchdog', async () => {
    // Debian's own interpreter without its site directories: a real python3 without the module,
    // as a pyenv or venv interpreter is.
    const bin = await tempDir('python');
    const python = path.join(bin, 'python3');
    await writeFile(python, '#!/bin/sh\nexec /usr/bin/python3 -S "$@"\n', { mode: 0o755 });
    const err: unknown = await programAdapters({ python })
      .watchdog.start(await tempDir('root'), () => undefined, new AbortController().signal)
      .then(() => new Error('watchdog started'), (e: unknown) => e);
    expect(err).toMatchObject({ code: 'TARGET_UNUSABLE', message: expect.stringMatching(/cannot import watchdog .*Debian package python3-watchdog/) as unknown });
  });
});

describe('stopping', () => {
  for (const backend of PROGRAM_BACKENDS) {
    it(`${backend}: stop ends every process it started and leaves no file in its temporary directory`, async () => {
      const state = await tempDir('state');
      const before = new Set(children().map((c) => c.pid));
      const w = await watch(programAdapters({ tmpDir: state })[backend]);
      await w.fence();
      const started = children().filter((c) => !before.has(c.pid));
      // watchman is a server and a subscribing client; the others one process each.
      expect(started.map((c) => c.comm).sort()).toEqual(backend === 'watchman' ? ['watchman', 'watchman'] : [backend === 'fswatch-cli' ? 'fswatch' : backend === 'watchdog' ? 'python3' : backend]);
      if (backend === 'watchman') expect(await readdir(state)).toHaveLength(1);
      const exit = await w.watcher.stop();
      running.splice(running.indexOf(w.watcher), 1);
      expect(exit.exit).not.toBeNull();
      const left = started.filter((c) => readdirSync('/proc').includes(String(c.pid)));
      expect(left).toEqual([]);
      expect(await readdir(state)).toEqual([]);
      const reported = w.events.length;
      await writeFile(path.join(w.root, 'after-stop'), '');
      await sleep(300);
      expect(w.events).toHaveLength(reported);
    });
  }
});

describe('a watcher of the user\'s own', () => {
  it('runs from its argv without a shell, and its JSON lines become events on the watched root', async () => {
    const root = await tempDir('root');
    const events: WatchEvent[] = [];
    const adapter = userListedAdapter({
      name: 'printer',
      // The user's program here is sh itself, given the root as $0: fsbench adds no shell.
      argv: ['/bin/sh', '-c', 'printf \'{"path":"%s/x y","kind":"renamed","from":"%s/old","time":1.5}\\n\' "$0" "$0"; exec sleep 600', '{root}'],
    });
    const w = await adapter.start(root, (e) => events.push(e), new AbortController().signal);
    running.push(w);
    const first = await until('the line', () => events[0]);
    expect(first).toMatchObject({ kind: 'renamed', path: `${root}/x y`, from: `${root}/old` });
    expect(typeof first.atNs).toBe('bigint');
    await w.stop();
  });

  it('runs as the uid and gid of its entry in the host\'s list, not as root', async () => {
    const root = await tempDir('root');
    const events: WatchEvent[] = [];
    const adapter = userListedAdapter({
      name: 'whoami',
      argv: ['/bin/sh', '-c', 'printf \'{"path":"%s/ids-%s","kind":"created"}\\n\' "$0" "$(id -u):$(id -g)"; exec sleep 600', '{root}'],
      uid: 65534,
      gid: 65534,
    });
    const w = await adapter.start(root, (e) => events.push(e), new AbortController().signal);
    running.push(w);
    expect(process.getuid?.()).toBe(0);
    expect(await until('the line', () => events[0])).toMatchObject({ kind: 'created', path: `${root}/ids-65534:65534` });
    await w.stop();
  });

  it('is stopped, and its stop fails saying so, when a line names a path outside the watched root', async () => {
    const root = await tempDir('root');
    const events: WatchEvent[] = [];
    const adapter = userListedAdapter({ name: 'liar', argv: ['/bin/sh', '-c', 'echo \'{"path":"/etc/passwd","kind":"created"}\'; exec sleep 600'] });
    const w = await adapter.start(root, (e) => events.push(e), new AbortController().signal);
    running.push(w);
    await until('the program to end', () => (children().some((c) => c.comm === 'sleep' || c.comm === 'sh') ? undefined : true));
    await expect(w.stop()).rejects.toMatchObject({ code: 'BACKEND_FAILED', message: expect.stringMatching(/outside the watched root/) as unknown });
    expect(events).toEqual([]);
  });
});

describe('the parsers refuse what a program could not have meant', () => {
  it('an unknown event name, a path outside the root, a record without a path', () => {
    expect(() => parseInotifywait('/r', 'CREATED /r/x', 0n)).toThrow();
    expect(() => parseInotifywait('/r', 'CREATE /etc/x', 0n)).toThrow(/outside/);
    expect(() => parseInotifywait('/r', 'CREATE /r/../etc/x', 0n)).toThrow(/normal/);
    expect(() => parseFswatch('/r', 'Created', 0n)).toThrow();
    expect(parseInotifywait('/r', 'Q_OVERFLOW ', 1n)).toEqual([{ kind: 'overflow', path: '/r', atNs: 1n }]);
    expect(parseFswatch('/r', 'Overflow /r', 1n)).toEqual([{ kind: 'overflow', path: '/r', atNs: 1n }]);
    expect(parseInotifywait('/r', 'CREATE,ISDIR /r/a b\nc', 2n)).toEqual([{ kind: 'created', path: '/r/a b\nc', atNs: 2n }]);
  });
});
