/**
 * What a local user without privileges can do to a host fsbench runs on as root, tried the way
 * that user would, with real processes, a real uid (nobody, through setpriv), the compiled CLI
 * and the real kernel:
 *
 * - plant a scratch or journal directory before fsbench makes it (a symlinked marker pointing at
 *   a file root would overwrite, journal entries root would replay within a heartbeat): `fsbench
 *   run` and `fsbench agent` refuse to start (DIRECTORY_UNSAFE, naming the path) and touch
 *   nothing;
 * - swap a directory for a symlink before or while fsbench removes it, or between two phases of
 *   the metadata loop (in a directory of that user's that runs may use, FSBENCH_ALLOWED_TARGETS),
 *   or plant a symlink where the probe creates its files (a root-owned directory anyone may write
 *   in, as /tmp): nothing outside is followed, removed or truncated;
 * - take the Redis host lock away from an agent in the middle of a run: the sibling that takes it
 *   runs recovery, which leaves the live run's tmpfs, directory and limit alone (its writer still
 *   holds its owner lock), and the run completes (a process holding the real HostLock and
 *   Journal, then two real agents). This one needs no local user: anyone who can write to Redis.
 *
 * Every file-system attack runs as nobody. Each is set up first and then checked to be in place
 * (and nobody's), so that a test whose set-up silently failed cannot pass.
 */
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { chmod, chown, lstat, mkdir, mkdtemp, readdir, readFile, readlink, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { HostLock } from '../agent/host-lock.js';
import { currentBootId, Journal } from '../host/journal.js';
import { PACKAGE_ROOT } from '../host/native.js';
import { hostLockKey } from '../queue/keys.js';
import { CoordinatorClient } from '../cli/client.js';
import { JOB_KEY_FILE, JOB_PUBLIC_KEY_FILE, writeNewJobKey } from '../queue/signing.js';
import { startRedis, uniquePrefix, type TestRedis } from './fixtures/redis-server.js';
import { preEnroll } from './helpers/enroll.js';
import { until } from './helpers/http.js';
import { exited, freshCli, CLI, mountsUnder } from './helpers/local.js';

const exec = promisify(execFile);

const NOBODY = 65534;
const INSTANCES = '/proc/sys/fs/inotify/max_user_instances';
const QUEUED = '/proc/sys/fs/inotify/max_queued_events';
const PROBE = path.join(PACKAGE_ROOT, 'native', 'build', 'probe');
const dist = (p: string): string => JSON.stringify(pathToFileURL(path.join(PACKAGE_ROOT, 'dist', p)).href);

let redis: TestRedis;
const dirs: string[] = [];
const children: ChildProcess[] = [];
const groups = new WeakSet<ChildProcess>();
beforeAll(async () => {
  await freshCli();
  redis = await startRedis();
}, 180_000);
afterAll(async () => {
  await redis.stop();
});
afterEach(async () => {
  for (const c of children.splice(0)) {
    if (c.exitCode === null && c.signalCode === null) {
      const gone = new Promise((r) => c.once('exit', r));
      // Agents run in process groups of their own: their probes go with them.
      if (groups.has(c) && c.pid !== undefined) process.kill(-c.pid, 'SIGKILL');
      else c.kill('SIGKILL');
      await gone;
    }
  }
  for (const d of dirs.splice(0)) {
    for (const m of mountsUnder(d).reverse()) await exec('umount', ['-l', m.split(' ')[1] ?? '']).catch(() => undefined);
    await rm(d, { recursive: true, force: true });
  }
});

/** A fresh root-owned directory (mode 0700 unless told), removed after the test. */
async function rootDir(name: string, mode = 0o700): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), `fsbench-attack-${name}-`));
  dirs.push(d);
  await chmod(d, mode);
  return d;
}

/**
 * A directory of nobody's (mode 0755) in a root-owned one: a user's own project directory, which
 * an operator may let runs use (FSBENCH_ALLOWED_TARGETS). Root makes the runs' directories in it;
 * its owner can rename, remove and replace them, though not write inside them.
 */
async function nobodysDir(name: string): Promise<string> {
  const dir = path.join(await rootDir(`home-${name}`, 0o755), name);
  await mkdir(dir, { mode: 0o755 });
  await chown(dir, NOBODY, NOBODY);
  return dir;
}

/** Runs a shell script as nobody (a real unprivileged uid, no groups); throws with its output when it fails. */
async function asNobody(script: string): Promise<void> {
  await exec('setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', 'sh', '-euc', script]);
}

const q = (s: string): string => `'${s.replaceAll("'", `'\\''`)}'`;

/** The pid of a process that has exited: what a dead run's entry names. */
function deadPid(): number {
  return spawnSync('true').pid;
}

/** What a file is, to tell that nothing wrote it: its bytes and its mtime. */
async function snapshot(file: string): Promise<{ text: string; mtimeMs: number; size: number }> {
  const st = await stat(file);
  return { text: await readFile(file, 'utf8'), mtimeMs: st.mtimeMs, size: st.size };
}

/** Every file under `dir` with its content, to tell that none went. */
function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (e.isFile()) {
      const p = path.join(e.parentPath, e.name);
      out[path.relative(dir, p)] = readFileSync(p, 'utf8');
    }
  }
  return out;
}

/** A file and a directory tree root owns, somewhere a local user can name but not write: what the attacks aim at. */
async function decoys(): Promise<{ dir: string; file: string; tree: string; files: Record<string, string> }> {
  const dir = await rootDir('decoy', 0o755);
  const file = path.join(dir, 'precious');
  await writeFile(file, 'root:x:0:0:root:/root:/bin/bash\n');
  // An mtime in the past: a write, even of the same bytes, would show.
  await utimes(file, new Date('2020-01-01T00:00:00Z'), new Date('2020-01-01T00:00:00Z'));
  const t = path.join(dir, 'tree');
  await mkdir(path.join(t, 'sub'), { recursive: true });
  await writeFile(path.join(t, 'a'), 'a\n');
  await writeFile(path.join(t, 'sub', 'b'), 'b\n');
  return { dir, file, tree: t, files: tree(t) };
}

async function runMatrix(dir: string): Promise<string> {
  const file = path.join(dir, 'm.yaml');
  await writeFile(file, 'name: attacked\nworkload: noop\nwarmup: 0\nrepetitions: 1\nparams:\n  sleep: 10ms\n');
  return file;
}

/** The compiled CLI as root, to the end (killed after `ms`: a process that does not refuse at once is a failure too). */
async function cli(args: string[], env: Record<string, string>, ms = 20_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  const timer = setTimeout(() => child.kill('SIGKILL'), ms);
  try {
    return await exited(child);
  } finally {
    clearTimeout(timer);
  }
}

describe('a scratch or journal directory planted by an unprivileged user', () => {
  let keyDir = '';
  let keyFile = '';
  beforeAll(async () => {
    keyDir = await mkdtemp(path.join(os.tmpdir(), 'fsbench-attack-key-'));
    await writeNewJobKey(keyDir);
    keyFile = path.join(keyDir, JOB_PUBLIC_KEY_FILE);
  });
  afterAll(async () => {
    await rm(keyDir, { recursive: true, force: true });
  });

  /** The two ways to start fsbench as root on a host: each must refuse before it reads or writes anything there. */
  const starts = {
    'fsbench run': async (scratch: string, extra: Record<string, string>) => cli(['run', await runMatrix(await rootDir('matrix')), '--scratch', scratch, '--no-progress'], extra),
    'fsbench agent': async (scratch: string, extra: Record<string, string>) =>
      cli(['agent'], {
        FSBENCH_SCRATCH: scratch,
        FSBENCH_JOB_KEY: keyFile,
        REDIS_URL: redis.url,
        FSBENCH_QUEUE_PREFIX: uniquePrefix('attack'),
        FSBENCH_HOST_ID: `attacked-${Math.random().toString(16).slice(2)}`,
        FSBENCH_HEARTBEAT: '200ms',
        ...extra,
      }),
  };

  it.each(Object.keys(starts) as (keyof typeof starts)[])(
    '%s refuses a scratch directory nobody made first in a /tmp-like directory, with a symlinked marker and journal entries, and touches neither the decoy nor the limit',
    async (how) => {
      const sticky = await rootDir('sticky', 0o1777);
      const d = await decoys();
      const scratch = path.join(sticky, 'fsbench');
      const bootId = await currentBootId();
      const pidNs = await readlink('/proc/self/ns/pid');
      // Entries as an fsbench of this host would have left them: a dead writer, this boot, this pid namespace.
      const entry = (e: Record<string, unknown>, root?: string) => JSON.stringify({ pid: deadPid(), bootId, pidNs, ...(root ? { root } : {}), entry: e });
      const limit = readFileSync(INSTANCES, 'utf8');
      await asNobody(
        [
          `mkdir ${q(scratch)} ${q(`${scratch}/journal`)}`,
          `ln -s ${q(d.file)} ${q(`${scratch}/.fsbench-scratch`)}`,
          `ln -s ${q(d.dir)} ${q(`${scratch}/link`)}`,
          // Root would write 0 into the host-wide limit: no user could open an inotify instance any more.
          `printf '%s' ${q(entry({ kind: 'sysctl', path: INSTANCES, original: '0' }))} > ${q(`${scratch}/journal/1-1-a.json`)}`,
          // And remove a tree of root's, through a symlink, or with a parent that is missing.
          `printf '%s' ${q(entry({ kind: 'path', path: `${scratch}/link/tree` }, scratch))} > ${q(`${scratch}/journal/1-1-b.json`)}`,
          `printf '%s' ${q(entry({ kind: 'path', path: `${scratch}/gone/tree` }, scratch))} > ${q(`${scratch}/journal/1-1-c.json`)}`,
        ].join('\n'),
      );
      // The trap is in place, and is nobody's.
      expect((await lstat(scratch)).uid).toBe(NOBODY);
      expect(await readlink(path.join(scratch, '.fsbench-scratch'))).toBe(d.file);
      const planted = (await readdir(path.join(scratch, 'journal'))).sort();
      expect(planted).toEqual(['1-1-a.json', '1-1-b.json', '1-1-c.json']);
      const before = await snapshot(d.file);

      const r = await starts[how](scratch, {});

      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain(`the scratch directory ${scratch} is not safe: ${scratch} is owned by uid ${NOBODY}, not by root, who runs fsbench`);
      expect(r.stderr).toMatch(/Fix: chown root:root .* && chmod 0700 .*, or choose another FSBENCH_SCRATCH \[DIRECTORY_UNSAFE\]/);
      expect(await snapshot(d.file)).toEqual(before);
      expect(readFileSync(INSTANCES, 'utf8')).toBe(limit);
      expect(tree(d.tree)).toEqual(d.files);
      // Nothing replayed, moved aside or added in the attacker's directory either.
      expect((await readdir(path.join(scratch, 'journal'))).sort()).toEqual(planted);
      expect((await readdir(scratch)).sort()).toEqual(['.fsbench-scratch', 'journal', 'link']);
    },
  );

  it.each(Object.keys(starts) as (keyof typeof starts)[])('%s refuses a journal directory nobody owns, beside a scratch directory of root, and replays none of its entries', async (how) => {
    const sticky = await rootDir('sticky', 0o1777);
    const scratch = path.join(await rootDir('scratch'), 'scratch');
    const journal = path.join(sticky, 'journal');
    const limit = readFileSync(INSTANCES, 'utf8');
    const planted = JSON.stringify({ pid: deadPid(), bootId: await currentBootId(), pidNs: await readlink('/proc/self/ns/pid'), entry: { kind: 'sysctl', path: INSTANCES, original: '0' } });
    await asNobody(`mkdir ${q(journal)}\nprintf '%s' ${q(planted)} > ${q(`${journal}/1-1-a.json`)}`);
    expect(readdirSync(journal)).toEqual(['1-1-a.json']);

    const r = await starts[how](scratch, { FSBENCH_JOURNAL_DIR: journal });

    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain(`the journal directory ${journal} is not safe: ${journal} is owned by uid ${NOBODY}`);
    expect(r.stderr).toContain('[DIRECTORY_UNSAFE]');
    expect(readFileSync(INSTANCES, 'utf8')).toBe(limit);
    expect(readdirSync(journal)).toEqual(['1-1-a.json']);
  });

  it.each(Object.keys(starts) as (keyof typeof starts)[])('%s refuses a scratch path that is a symlink nobody planted, and writes nothing where it points', async (how) => {
    const sticky = await rootDir('sticky', 0o1777);
    // A directory of root's: the marker, the journal and the runs' files must not land in it.
    const target = await rootDir('target', 0o755);
    await writeFile(path.join(target, 'keep'), 'keep\n');
    const link = path.join(sticky, 'fsbench');
    await asNobody(`ln -s ${q(target)} ${q(link)}`);
    expect((await lstat(link)).isSymbolicLink()).toBe(true);

    const r = await starts[how](link, {});

    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain(`the scratch directory ${link} is not safe: ${link} is a symlink`);
    expect(r.stderr).toContain('[DIRECTORY_UNSAFE]');
    expect(readdirSync(target)).toEqual(['keep']);
  });

  it('refuses a scratch directory of root inside a directory nobody owns, and makes nothing there', async () => {
    const sticky = await rootDir('sticky', 0o1777);
    const theirs = path.join(sticky, 'theirs');
    await asNobody(`mkdir -m 0755 ${q(theirs)}`);
    const scratch = path.join(theirs, 'scratch');

    const r = await starts['fsbench run'](scratch, {});

    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain(`the scratch directory ${scratch} is not safe: ${theirs} is owned by uid ${NOBODY}, not by root`);
    expect(readdirSync(theirs)).toEqual([]);
  });
});

/**
 * A writer in a process of its own, as a run of another agent: opens the shared journal for its
 * scratch directory, makes each directory and journals it, prints `recorded`, then waits until
 * killed (its owner lock goes with it).
 */
async function writer(journalDir: string, scratch: string, runDirs: readonly string[], targets: readonly string[] = []): Promise<ChildProcess> {
  const code = `import { mkdirSync } from 'node:fs';
import { Journal } from ${dist('host/journal.js')};
const journal = await Journal.open(${JSON.stringify(journalDir)}, { scratch: ${JSON.stringify(scratch)}, targets: ${JSON.stringify(targets)} });
for (const dir of ${JSON.stringify(runDirs)}) {
  mkdirSync(dir, { recursive: true });
  await journal.record({ kind: 'path', path: dir });
}
console.log('recorded');
setInterval(() => undefined, 1000);`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (out += b.toString()));
  const end = Date.now() + 20_000;
  while (!out.includes('recorded')) {
    if (child.exitCode !== null || Date.now() > end) throw new Error(`the writer did not record its entries: ${out}`);
    await sleep(20);
  }
  return child;
}

async function kill(child: ChildProcess): Promise<void> {
  const gone = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await gone;
}

describe('a directory swapped for a symlink', () => {
  it("before recovery: `fsbench run` removes a killed run's directories without following the symlinks nobody swapped into them, and refuses one reached through a symlink", async () => {
    const scratch = await rootDir('scratch');
    const journalDir = path.join(scratch, 'journal');
    // The killed run made its directories in nobody's directory, an allowed target.
    const target = await nobodysDir('project');
    const d = await decoys();
    const inner = path.join(target, 'fsbench-inotify-0000000a'); // replaced by nobody's, whose sub is a symlink
    const whole = path.join(target, 'fsbench-inotify-0000000b'); // becomes a symlink itself
    const deep = path.join(target, 'fsbench-metadata-0000000c', 'mnt'); // its parent becomes a symlink
    const run = await writer(journalDir, scratch, [path.join(inner, 'sub'), whole, deep], [target]);
    await kill(run);
    await mkdir(path.join(d.dir, 'mnt'));
    // The swaps, by nobody: root's directories moved aside or removed, symlinks in their place.
    await asNobody(
      [
        `mv ${q(inner)} ${q(`${inner}.aside`)}`,
        `mkdir ${q(inner)}`,
        `ln -s ${q(d.tree)} ${q(path.join(inner, 'sub'))}`,
        `ln -s ${q(d.file)} ${q(path.join(inner, 'file'))}`,
        `rmdir ${q(whole)}`,
        `ln -s ${q(d.tree)} ${q(whole)}`,
        `mv ${q(path.dirname(deep))} ${q(`${path.dirname(deep)}.aside`)}`,
        `ln -s ${q(d.dir)} ${q(path.dirname(deep))}`,
      ].join('\n'),
    );
    // In place, and nobody's.
    for (const [link, to] of [[path.join(inner, 'sub'), d.tree], [path.join(inner, 'file'), d.file], [whole, d.tree], [path.dirname(deep), d.dir]] as const) {
      expect([link, await readlink(link), (await lstat(link)).uid]).toEqual([link, to, NOBODY]);
    }
    const before = await snapshot(d.file);

    // `fsbench run` recovers the host's journal before its first run: a real, separate process.
    const r = await cli(['run', await runMatrix(await rootDir('matrix')), '--scratch', scratch, '--no-progress', '--format', 'json'], {});

    expect(r.code, r.stderr).toBe(0);
    const recovered = r.stderr.split('\n').filter((l) => l.includes('recovered from an earlier run'));
    expect(recovered.sort()).toEqual(
      [
        `fsbench: recovered from an earlier run: undid path ${path.join(inner, 'sub')}`,
        `fsbench: recovered from an earlier run: undid path ${whole}`,
        expect.stringMatching(new RegExp(`^fsbench: recovered from an earlier run: refused .*: ${deep} is reached through a symlink, ${path.dirname(deep)}$`)),
      ].sort(),
    );
    expect(existsSync(path.join(inner, 'sub'))).toBe(false);
    expect(existsSync(whole)).toBe(false);
    expect(tree(d.tree)).toEqual(d.files);
    expect(await snapshot(d.file)).toEqual(before);
    expect(existsSync(path.join(d.dir, 'mnt'))).toBe(true);
  });

  it('while recovery removes a tree: nobody, racing to swap its subdirectory for a symlink to a decoy, 30 times over, never gets the decoy removed', async () => {
    const scratch = await rootDir('scratch');
    const target = await nobodysDir('tree');
    const d = await decoys();
    const journal = await Journal.open(path.join(scratch, 'journal'), { scratch, targets: [target] });
    // In nobody's directory, and itself nobody's (a tree an unprivileged writer fills): nobody can
    // rename what is in it, though not what is below.
    const runDir = path.join(target, 'fsbench-metadata-race');
    const sub = path.join(runDir, 'sub');
    // Swaps sub for a symlink to the decoy and back as fast as it can, as nobody, counting the swaps made.
    const racer = spawn(
      'setpriv',
      [
        `--reuid=${NOBODY}`,
        `--regid=${NOBODY}`,
        '--clear-groups',
        process.execPath,
        '-e',
        `const fs = require('node:fs');
const [sub, decoy] = process.argv.slice(1);
let swaps = 0;
console.log(JSON.stringify({ uid: process.getuid(), gid: process.getgid(), groups: process.getgroups() }));
process.on('SIGTERM', () => { console.log(JSON.stringify({ swaps })); process.exit(0); });
// In bursts, so that SIGTERM gets its turn between them.
const burst = () => {
  for (let i = 0; i < 500; i++) {
    try { fs.renameSync(sub, sub + '.real'); fs.symlinkSync(decoy, sub); swaps++; } catch {}
    try { fs.unlinkSync(sub); } catch {}
    try { fs.renameSync(sub + '.real', sub); } catch {}
  }
  setImmediate(burst);
};
burst();`,
        sub,
        d.tree,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    children.push(racer);
    let out = '';
    racer.stdout.on('data', (b: Buffer) => (out += b.toString()));
    const Racer = z.object({ uid: z.number(), gid: z.number(), groups: z.array(z.number()) });
    const who = await until('the racer to start', () => Promise.resolve(out.includes('\n') ? Racer.parse(JSON.parse(out.split('\n')[0] ?? '')) : undefined));
    // Node lists the effective group among the supplementary ones: nobody's, and no other.
    expect(who).toEqual({ uid: NOBODY, gid: NOBODY, groups: [NOBODY] });
    try {
      let undone = 0;
      for (let round = 0; round < 30; round++) {
        // Built aside and renamed into place, so that nothing here ever writes through the racer's symlink.
        const stage = path.join(scratch, 'stage');
        for (let i = 0; i < 20; i++) {
          await mkdir(path.join(stage, 'sub', `d${i}`), { recursive: true });
          await writeFile(path.join(stage, 'sub', `d${i}`, 'f'), 'x');
        }
        await chown(stage, NOBODY, NOBODY);
        await rename(stage, runDir);
        // Recorded and let go, as a run whose teardown failed: recovery removes it, racer and all.
        journal.release(await journal.record({ kind: 'path', path: runDir }));
        const lines = await journal.recover();
        undone += lines.filter((l) => l === `undid path ${runDir}`).length;
        expect(tree(d.tree)).toEqual(d.files);
      }
      const exitedRacer = new Promise((r) => racer.once('exit', r));
      racer.kill('SIGTERM');
      await exitedRacer;
      const { swaps } = z.object({ swaps: z.number() }).parse(JSON.parse(out.trim().split('\n').pop() ?? ''));
      // The race ran: the racer swapped, and recovery removed the tree (or refused it) every round.
      expect(swaps).toBeGreaterThan(30);
      expect(undone).toBe(30);
      expect(tree(d.tree)).toEqual(d.files);
    } finally {
      await journal.close();
    }
  }, 120_000);

  it("during a run: the metadata loop's next phase refuses its run directory swapped for a symlink to a copy elsewhere, whose files survive", async () => {
    const METADATA = path.join(PACKAGE_ROOT, 'native', 'build', 'metadata');
    const phase = async (name: string, root: string) => {
      const child = spawn(METADATA, [name, '--root', root, '--dirs', '2', '--files', '3', '--file-size', '1', '--parent', String(process.pid)], { stdio: ['ignore', 'pipe', 'pipe'] });
      children.push(child);
      return exited(child);
    };
    // The run directory in nobody's directory (an allowed target), made by root as a run makes it.
    const runDir = path.join(await nobodysDir('swapped'), 'fsbench-metadata-swapped');
    await mkdir(runDir, { mode: 0o700 });
    const created = await phase('create', runDir);
    expect(created.code, created.stdout + created.stderr).toBe(0);
    expect(Object.keys(tree(runDir))).toHaveLength(6);
    // Between two phases the run directory becomes a symlink to a copy of it that is not the run's.
    const d = await decoys();
    const copy = path.join(d.dir, 'copy');
    await exec('cp', ['-a', runDir, copy]);
    const files = tree(copy);
    expect(Object.keys(files)).toHaveLength(6);
    await asNobody(`mv ${q(runDir)} ${q(`${runDir}.moved`)}\nln -s ${q(copy)} ${q(runDir)}`);
    expect([await readlink(runDir), (await lstat(runDir)).uid]).toEqual([copy, NOBODY]);

    const swapped = await phase('unlink', runDir);

    expect(swapped.code).toBe(3);
    expect(swapped.stdout).toContain(`{"error":{"code":"ELOOP","message":"open (without following symlinks) ${runDir}: Too many levels of symbolic links","done":0}}`);
    expect(tree(copy)).toEqual(files);
    // The same phase in the real run directory removes its files: the refusal is not a phase that never works.
    const real = await phase('unlink', `${runDir}.moved`);
    expect(real.code, real.stdout + real.stderr).toBe(0);
    expect(tree(`${runDir}.moved`)).toEqual({});
  });

  it('in the probe\'s directory: a planted file.00000 -> decoy is refused, not truncated; a directory reached through a symlink or owned by nobody is refused, and nothing is created', async () => {
    const d = await decoys();
    const before = await snapshot(d.file);
    const args = (dir: string): string[] => ['inotify', '--dir', dir, '--files', '4', '--writers', '1', '--duration-ms', '100', '--write-bytes', '1', '--buffer-bytes', '65536', '--watch', 'files', '--mode', 'concurrent', '--reader', 'full'];
    const probe = async (dir: string) => {
      const child = spawn(PROBE, args(dir), { stdio: ['ignore', 'pipe', 'pipe'] });
      children.push(child);
      return exited(child);
    };
    const ErrorLine = z.object({ error: z.object({ code: z.string(), message: z.string() }) });
    const refusal = (stdout: string) => ErrorLine.parse(JSON.parse(stdout.trim().split('\n').pop() ?? '')).error;

    // Root's directories anyone may write in, as /tmp: nobody plants the symlinks.
    const planted = await rootDir('planted', 0o1777);
    await asNobody(`ln -s ${q(d.file)} ${q(path.join(planted, 'file.00000'))}`);
    expect((await lstat(path.join(planted, 'file.00000'))).uid).toBe(NOBODY);
    const a = await probe(planted);
    expect(a.code).toBe(3);
    expect(refusal(a.stdout).code).toBe('TARGET_UNUSABLE');
    expect(refusal(a.stdout).message).toMatch(/^file\.00000 in .* exists and is not a regular file of this user/);
    expect(await snapshot(d.file)).toEqual(before);

    const real = await rootDir('real', 0o755);
    const viaLink = path.join(await rootDir('links', 0o1777), 'dir');
    await asNobody(`ln -s ${q(real)} ${q(viaLink)}`);
    expect([await readlink(viaLink), (await lstat(viaLink)).uid]).toEqual([real, NOBODY]);
    const b = await probe(viaLink);
    expect(b.code).toBe(3);
    expect(refusal(b.stdout).code).toBe('TARGET_UNUSABLE');
    expect(refusal(b.stdout).message).toContain('without symlinks');
    expect(readdirSync(real)).toEqual([]);

    const theirs = path.join(await rootDir('sticky', 0o1777), 'theirs');
    await asNobody(`mkdir -m 0777 ${q(theirs)}`);
    const c = await probe(theirs);
    expect(c.code).toBe(3);
    expect(refusal(c.stdout).code).toBe('TARGET_UNUSABLE');
    expect(refusal(c.stdout).message).toContain(`owned by uid ${NOBODY}`);
    expect(readdirSync(theirs)).toEqual([]);

    // The same probe in a directory of its own runs: the refusals above are not a probe that never runs.
    const own = await rootDir('own', 0o755);
    const ok = await probe(own);
    expect(ok.code, ok.stdout + ok.stderr).toBe(0);
    expect(readdirSync(own).filter((n) => n.startsWith('file.'))).toHaveLength(4);
  });
});

describe('the host lock deleted in the middle of a run', () => {
  it("a sibling that takes the lock and recovers leaves the live run's tmpfs, directory and limit in place, undoes only a dead writer's entry, and the run completes", async () => {
    const original = Number(readFileSync(QUEUED, 'utf8').trim());
    const changed = original === 20_000 ? 20_001 : 20_000;
    const journalDir = path.join(await rootDir('shared'), 'journal');
    const scratchA = await rootDir('scratch-a');
    const prefix = uniquePrefix('stolen-lock');
    const hostId = `host-${Math.random().toString(16).slice(2)}`;
    const key = hostLockKey(prefix, hostId);

    // Agent A's side, in a process of its own: takes the host lock, then measures an inotify
    // cell that changes max_queued_events and mounts a tmpfs, for 4 s, as an agent does.
    const code = `import { Redis } from 'ioredis';
import { HostLock } from ${dist('agent/host-lock.js')};
import { Journal } from ${dist('host/journal.js')};
import { runCell } from ${dist('runner/run-cell.js')};
import { collectFingerprint } from ${dist('host/fingerprint.js')};
import { expandMatrix, parseMatrix } from ${dist('contract/matrix.js')};
const redis = new Redis(${JSON.stringify(redis.url)}, { lazyConnect: false });
const journal = await Journal.open(${JSON.stringify(journalDir)}, { scratch: ${JSON.stringify(scratchA)} });
const lock = new HostLock(redis, { prefix: ${JSON.stringify(prefix)}, hostId: ${JSON.stringify(hostId)}, owner: 'agent-a', ttlMs: 60000, pollMs: 50, maxHoldMs: 600000,
  onAcquired: async () => { await journal.recover(); }, onLost: () => console.log('lost'), log: (l) => console.log(l) });
await lock.acquire(new AbortController().signal);
console.log('locked');
const [cell] = expandMatrix(parseMatrix({ name: 't', workload: 'inotify', params: { maxQueuedEvents: ${changed}, duration: '4s', files: 8, writers: 1 } }));
const fingerprint = await collectFingerprint();
const r = await runCell({ matrix: 't', cell, repetition: 0, fingerprint }, { scratchDir: journal.scratch, journal, signal: new AbortController().signal, log: () => undefined });
console.log(JSON.stringify({ state: r.state, limits: r.limits ?? null, error: r.state === 'ok' ? null : r.error }));
await lock.release();
await journal.close();
await redis.quit();`;
    const a = spawn(process.execPath, ['--input-type=module', '-e', code], { cwd: PACKAGE_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(a);
    const aDone = exited(a);
    let aOut = '';
    a.stdout.on('data', (b: Buffer) => (aOut += b.toString()));

    // A is mid-run: its lock in Redis, its limit changed, its tmpfs mounted in its run directory.
    const end = Date.now() + 20_000;
    while (!(Number(readFileSync(QUEUED, 'utf8').trim()) === changed && mountsUnder(scratchA).length === 1)) {
      if (a.exitCode !== null || Date.now() > end) throw new Error(`agent A did not start its run: ${aOut}`);
      await sleep(20);
    }
    const [runDirA] = readdirSync(scratchA).filter((n) => n.startsWith('fsbench-inotify-'));
    if (runDirA === undefined) throw new Error('agent A has no run directory');
    // A dead run of a third writer, left in the same journal after A took the lock: what B's recovery must undo.
    const scratchDead = await rootDir('scratch-dead');
    const deadRun = path.join(scratchDead, 'fsbench-inotify-deadbeef');
    await kill(await writer(journalDir, scratchDead, [deadRun]));
    const client = new Redis(redis.url);
    let recovered: string[] = [];
    const journalB = await Journal.open(journalDir, { scratch: await rootDir('scratch-b') });
    try {
      const b = new HostLock(client, {
        prefix,
        hostId,
        owner: 'agent-b',
        ttlMs: 60_000,
        pollMs: 50,
        maxHoldMs: 600_000,
        // What an agent does when it takes the lock (agent/agent.ts): the host's journal recovered.
        onAcquired: async () => {
          recovered = await journalB.recover();
        },
        onLost: () => undefined,
        log: () => undefined,
      });
      expect(String(await client.get(key))).toMatch(/^agent-a\//);
      // While A holds the lock, B does not get it.
      expect(await b.tryOnce()).toBe(false);

      // The attack: anyone who can write to Redis deletes the lock; B takes it and recovers.
      expect(await client.del(key)).toBe(1);
      expect(await b.tryOnce()).toBe(true);
      expect(String(await client.get(key))).toMatch(/^agent-b\//);

      // Recovery ran (the dead writer's directory is gone) and left A's live run alone.
      expect(recovered).toEqual([`undid path ${deadRun}`]);
      expect(existsSync(deadRun)).toBe(false);
      expect(Number(readFileSync(QUEUED, 'utf8').trim())).toBe(changed);
      expect(mountsUnder(scratchA)).toHaveLength(1);
      expect(statSync(path.join(scratchA, runDirA)).isDirectory()).toBe(true);
      expect(a.exitCode).toBeNull();
      await b.release();
    } finally {
      await journalB.close();
      client.disconnect();
    }

    // A's run completes, measured under its own limit, and A then restores what it changed.
    const r = await aDone;
    expect(r.code, r.stderr).toBe(0);
    const line = aOut.trim().split('\n').pop() ?? '';
    expect(JSON.parse(line)).toMatchObject({ state: 'ok', limits: { maxQueuedEvents: changed }, error: null });
    expect(Number(readFileSync(QUEUED, 'utf8').trim())).toBe(original);
    expect(mountsUnder(scratchA)).toEqual([]);
    expect(readdirSync(journalDir).filter((n) => n.endsWith('.json'))).toEqual([]);
  }, 60_000);

  it("with real agents: the sibling's recovery after the lock is deleted undoes only a dead writer's entry, none of the live run's, and the run is stored once, ok", async () => {
    const original = Number(readFileSync(QUEUED, 'utf8').trim());
    const changed = original === 20_000 ? 20_001 : 20_000;
    const dataDir = await rootDir('data');
    await writeNewJobKey(dataDir);
    const journalDir = path.join(await rootDir('shared'), 'journal');
    const env = {
      REDIS_URL: redis.url,
      FSBENCH_JOB_KEY: path.join(dataDir, JOB_PUBLIC_KEY_FILE),
      FSBENCH_QUEUE_PREFIX: uniquePrefix('stolen-lock-agents'),
      FSBENCH_DATA_DIR: dataDir,
      FSBENCH_PORT: '0',
      FSBENCH_HEARTBEAT: '200ms',
      FSBENCH_STALL_TIMEOUT: '5s',
      FSBENCH_JOURNAL_DIR: journalDir,
      FSBENCH_HOST_ID: `host-${Math.random().toString(16).slice(2)}`,
    };
    const coordinator = agentProc(['coordinator'], env);
    const client = new CoordinatorClient((await coordinator.waitFor(/listening on (http:\/\/\S+);/))[1] ?? '');
    const privateKey = await readFile(path.join(dataDir, JOB_KEY_FILE), 'utf8');
    const agent = async (machine: string, heartbeat: string): Promise<Proc & { scratch: string }> => {
      const scratch = await rootDir(`scratch-${machine}`);
      await preEnroll(redis.url, env.FSBENCH_QUEUE_PREFIX, privateKey, path.join(scratch, 'agent'), env.FSBENCH_HOST_ID, machine);
      const p = agentProc(['agent'], { ...env, FSBENCH_MACHINE: machine, FSBENCH_SCRATCH: scratch, FSBENCH_HEARTBEAT: heartbeat });
      await p.waitFor(/waiting for runs/);
      return { ...p, scratch };
    };
    // The order is fixed, not left to a race: A first looks at its lock again a heartbeat (30 s)
    // after it started, long after B has recovered (a few seconds in), and its run (10 s) is still
    // under way when B recovers. B looks for leftovers every 200 ms.
    const a = await agent('a', '30s');
    const aStarted = Date.now();
    const { id } = z.object({ id: z.string() }).parse(
      await client.json('POST', '/v1/matrices', { name: 'stolen', workload: 'inotify', warmup: 0, repetitions: 1, params: { maxQueuedEvents: changed, duration: '10s', files: 8, writers: 1 } }),
    );
    await until('agent A to change the limit and mount its tmpfs', () => Promise.resolve(Number(readFileSync(QUEUED, 'utf8').trim()) === changed && mountsUnder(a.scratch).length === 1 ? true : undefined), { ms: 20_000 });
    const runStarted = Date.now();
    const b = await agent('b', '200ms');
    // A dead writer's entry in the shared journal, left after A took the lock: what B must undo.
    const scratchDead = await rootDir('scratch-dead');
    const deadRun = path.join(scratchDead, 'fsbench-inotify-deadbeef');
    await kill(await writer(journalDir, scratchDead, [deadRun]));
    const client2 = new Redis(redis.url);
    try {
      expect(String(await client2.get(hostLockKey(env.FSBENCH_QUEUE_PREFIX, env.FSBENCH_HOST_ID)))).toMatch(/^a-/);
      expect(await client2.del(hostLockKey(env.FSBENCH_QUEUE_PREFIX, env.FSBENCH_HOST_ID))).toBe(1);
    } finally {
      client2.disconnect();
    }

    await b.waitFor(/restored what a dead run left: undid path \S+fsbench-inotify-deadbeef/);
    // The order above held (else this says so, rather than checking less): A has not looked at
    // its lock since, and its run is not over.
    expect(Date.now() - aStarted).toBeLessThan(25_000);
    expect(Date.now() - runStarted).toBeLessThan(8_000);
    expect(a.output()).not.toContain('host lock lost');
    // B undid nothing of A's: one line, the dead writer's; A's run is under way with all it changed in place.
    expect(b.output().split('\n').filter((l) => l.includes('restored what a dead run left'))).toEqual([expect.stringContaining(`undid path ${deadRun}`)]);
    expect(existsSync(deadRun)).toBe(false);
    expect(mountsUnder(a.scratch)).toHaveLength(1);
    expect(Number(readFileSync(QUEUED, 'utf8').trim())).toBe(changed);

    await until('the matrix to finish', async () => (z.object({ state: z.string() }).loose().parse(await client.json('GET', `/v1/matrices/${id}`)).state === 'done' ? true : undefined), { ms: 40_000 });
    const { runs } = z.object({ runs: z.array(z.object({ state: z.string(), attempts: z.number(), limits: z.object({ maxQueuedEvents: z.number() }).loose().nullish() }).loose()) }).parse(
      await client.json('GET', `/v1/matrices/${id}/results`),
    );
    // Stored once, measured under its own limit, by A to the end: its first attempt.
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({ state: 'ok', attempts: 1, limits: { maxQueuedEvents: changed } });
    expect(Number(readFileSync(QUEUED, 'utf8').trim())).toBe(original);
    expect(mountsUnder(a.scratch)).toEqual([]);
    expect(mountsUnder(b.scratch)).toEqual([]);
  }, 90_000);
});

interface Proc {
  readonly child: ChildProcess;
  output: () => string;
  waitFor(re: RegExp, ms?: number): Promise<RegExpMatchArray>;
}

/** The compiled CLI in a process group of its own, so that killing it takes its probe along. */
function agentProc(args: string[], env: Record<string, string>): Proc {
  const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  children.push(child);
  groups.add(child);
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  return {
    child,
    output: () => out,
    waitFor: async (re, ms = 20_000) => {
      const end = Date.now() + ms;
      for (;;) {
        const m = re.exec(out);
        if (m) return m;
        if (child.exitCode !== null || Date.now() > end) throw new Error(`no ${String(re)} in:\n${out}`);
        await sleep(20);
      }
    },
  };
}
