/**
 * The host journal on the real kernel: entries are checked when written and again when
 * replayed (known sysctls with numbers, paths inside a root registered in the journal, under a
 * parent that exists and no symlink), a refused entry is moved to `refused/` and never
 * executed, an earlier boot's files are still removed, an entry is undone only once its writer
 * (a real process, in this pid namespace or another) is gone, and agents with separate scratch
 * directories share one journal without clobbering each other.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, readlink, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { FsbenchError } from '../contract/errors.js';
import { currentBootId, Journal, REFUSED_DIR, SCRATCH_MARKER, type JournalOptions } from '../host/journal.js';
import { PACKAGE_ROOT } from '../host/native.js';
import { freshCli } from './helpers/local.js';

/** The compiled journal, for writers in processes of their own. */
const JOURNAL_JS = pathToFileURL(path.join(PACKAGE_ROOT, 'dist', 'host', 'journal.js')).href;

const dirs: string[] = [];
const journals: Journal[] = [];
const children: ChildProcess[] = [];
beforeAll(async () => {
  await freshCli();
}, 180_000);
afterEach(async () => {
  for (const c of children.splice(0)) {
    if (c.exitCode === null && c.signalCode === null) {
      c.kill('SIGKILL');
      await new Promise((r) => c.once('exit', r));
    }
  }
  for (const j of journals.splice(0)) await j.close();
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function tempDir(name: string): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), `fsbench-journal-${name}-`));
  dirs.push(d);
  return d;
}

/** Opens a journal that is closed after the test. */
async function open(dir: string, options: JournalOptions = {}): Promise<Journal> {
  const j = await Journal.open(dir, options);
  journals.push(j);
  return j;
}

/** The pid of a process that has exited: the owner of a dead run's entries. */
function deadPid(): number {
  return spawnSync('true').pid;
}

/**
 * Writes an entry as a tamperer (or an older version, without an owner lock) would: straight
 * into the directory, from this pid namespace.
 */
async function plant(journalDir: string, stored: Record<string, unknown>): Promise<string> {
  const name = `${Date.now()}-planted-${Math.random().toString(16).slice(2)}.json`;
  await writeFile(path.join(journalDir, name), JSON.stringify({ pidNs: await readlink('/proc/self/ns/pid'), ...stored }));
  return name;
}

async function entries(journalDir: string): Promise<string[]> {
  return (await readdir(journalDir)).filter((n) => n.endsWith('.json'));
}

async function refused(journalDir: string): Promise<string[]> {
  return readdir(path.join(journalDir, REFUSED_DIR)).catch(() => []);
}

/**
 * A writer in a process of its own (in a new pid namespace with `pidNamespace`, as an agent in
 * another container): opens the journal, makes each `runDir` and journals it, then waits until killed.
 */
async function writer(journalDir: string, scratch: string, runDir: string | readonly string[], pidNamespace = false): Promise<ChildProcess> {
  const code = `import { mkdirSync } from 'node:fs';
import { Journal } from ${JSON.stringify(JOURNAL_JS)};
const journal = await Journal.open(${JSON.stringify(journalDir)}, { scratch: ${JSON.stringify(scratch)} });
for (const dir of ${JSON.stringify([runDir].flat())}) {
  mkdirSync(dir);
  await journal.record({ kind: 'path', path: dir });
}
console.log('recorded');
setInterval(() => undefined, 1000);`;
  const node = [process.execPath, '--input-type=module', '-e', code];
  // --kill-child: killing unshare kills the writer, pid 1 of its namespace, and with it the namespace.
  const child = pidNamespace ? spawn('unshare', ['--pid', '--fork', '--kill-child', ...node], { stdio: ['ignore', 'pipe', 'pipe'] }) : spawn(node[0] ?? '', node.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  const collect = (d: Buffer): void => {
    out += d.toString();
  };
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);
  const end = Date.now() + 20_000;
  while (!out.includes('recorded')) {
    if (child.exitCode !== null || Date.now() > end) throw new Error(`the writer did not record its entry: ${out}`);
    await sleep(20);
  }
  return child;
}

async function kill(child: ChildProcess): Promise<void> {
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await exited;
}

/** Recovers until something is undone (the kernel drops a killed holder's lock a moment after the kill), at most 5 s. */
async function recoverOnceGone(journal: Journal): Promise<string[]> {
  const end = Date.now() + 5_000;
  for (;;) {
    const lines = await journal.recover();
    if (lines.length > 0 || Date.now() > end) return lines;
    await sleep(50);
  }
}

describe('a journal entry replayed after a crash', () => {
  it('naming /proc/sys/../../ is refused, moved to refused/, and nothing is written', async () => {
    const scratch = await tempDir('scratch');
    const journalDir = path.join(scratch, 'journal');
    const journal = await open(journalDir);
    const victim = path.join(await tempDir('victim'), 'file');
    await writeFile(victim, 'untouched\n');
    const name = await plant(journalDir, {
      pid: deadPid(),
      bootId: await currentBootId(),
      entry: { kind: 'sysctl', path: `/proc/sys/../..${victim}`, original: '1\n' },
    });

    const lines = await journal.recover();

    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^refused ${name}: entry\\.path: `));
    expect(await readFile(victim, 'utf8')).toBe('untouched\n');
    expect(await entries(journalDir)).toEqual([]);
    expect(await refused(journalDir)).toEqual([name]);
    // Refused once is refused for good: a second recovery finds nothing to do.
    expect(await journal.recover()).toEqual([]);
  });

  it('with a non-numeric value for a known sysctl is refused and the limit keeps its value', async () => {
    const scratch = await tempDir('scratch');
    const journalDir = path.join(scratch, 'journal');
    const journal = await open(journalDir);
    const file = '/proc/sys/fs/inotify/max_user_instances';
    const before = await readFile(file, 'utf8');
    const name = await plant(journalDir, {
      pid: deadPid(),
      bootId: await currentBootId(),
      entry: { kind: 'sysctl', path: file, original: '128 && reboot' },
    });

    const lines = await journal.recover();

    expect(lines).toEqual([`refused ${name}: entry.original: must be a number`]);
    expect(await readFile(file, 'utf8')).toBe(before);
    expect(await refused(journalDir)).toEqual([name]);
  });

  it('naming a path outside the registered roots is refused and the path survives, whatever root it claims or marker it plants', async () => {
    const scratch = await tempDir('scratch');
    const journalDir = path.join(scratch, 'journal');
    const journal = await open(journalDir);
    const elsewhere = await tempDir('precious');
    const precious = path.join(elsewhere, 'data');
    await mkdir(precious);
    // A scratch marker proves nothing any more: whoever can write a directory can put one there.
    await writeFile(path.join(elsewhere, SCRATCH_MARKER), 'fsbench scratch directory\n');
    const bootId = await currentBootId();
    const plain = await plant(journalDir, { pid: deadPid(), bootId, entry: { kind: 'path', path: precious } });
    const claimed = await plant(journalDir, { pid: deadPid(), bootId, root: elsewhere, entry: { kind: 'path', path: precious } });
    // Nor does a symlink inside the scratch directory that leads out of it.
    await symlink(elsewhere, path.join(scratch, 'link'));
    const linked = await plant(journalDir, { pid: deadPid(), bootId, entry: { kind: 'path', path: path.join(scratch, 'link', 'data') } });

    const lines = await journal.recover();

    expect(lines).toHaveLength(3);
    expect(lines.find((l) => l.startsWith(`refused ${plain}`))).toMatch(/is outside the scratch directories and allowed targets registered in this journal/);
    expect(lines.find((l) => l.startsWith(`refused ${claimed}`))).toMatch(/is not a root registered in this journal/);
    expect(lines.find((l) => l.startsWith(`refused ${linked}`))).toMatch(/is reached through a symlink, .*\/link$/);
    expect(existsSync(precious)).toBe(true);
    expect((await refused(journalDir)).sort()).toEqual([plain, claimed, linked].sort());
  });

  it('whose parent directory is missing is refused, never acted on', async () => {
    const scratch = await tempDir('scratch');
    const journalDir = path.join(scratch, 'journal');
    const journal = await open(journalDir);
    const orphan = path.join(scratch, 'fsbench-metadata-00000000', 'mnt');
    const name = await plant(journalDir, { pid: deadPid(), bootId: await currentBootId(), entry: { kind: 'path', path: orphan } });

    const lines = await journal.recover();

    expect(lines).toEqual([`refused ${name}: its parent directory ${path.dirname(orphan)} is missing`]);
    expect(await refused(journalDir)).toEqual([name]);
  });
});

describe('writing a journal entry', () => {
  it('refuses what replay would refuse, and leaves no file behind', async () => {
    const scratch = await tempDir('scratch');
    const journalDir = path.join(scratch, 'journal');
    const journal = await open(journalDir);
    const outside = path.join(await tempDir('outside'), 'x');

    const attempts = [
      journal.record({ kind: 'sysctl', path: '/proc/sys/fs/inotify/max_queued_events', original: 'sixteen' }),
      journal.record({ kind: 'path', path: outside }),
      journal.record({ kind: 'mount', target: `${scratch}/a/../../etc` }),
    ];
    const errors = await Promise.all(attempts.map((a) => a.then(() => null, (err: unknown) => err)));

    expect(errors).toHaveLength(3);
    for (const err of errors) {
      expect(err).toBeInstanceOf(FsbenchError);
      expect(err).toMatchObject({ code: 'INTERNAL' });
    }
    expect(String(errors[1])).toMatch(/outside the scratch directory/);
    expect(await entries(journalDir)).toEqual([]);
  });

  it('is refused once the journal is closed: its owner lock is gone', async () => {
    const scratch = await tempDir('scratch');
    const journal = await Journal.open(path.join(scratch, 'journal'));
    await journal.close();
    await expect(journal.record({ kind: 'path', path: path.join(scratch, 'x') })).rejects.toThrow(/is closed/);
  });
});

describe('entries of an earlier boot', () => {
  it('still remove their directories, while their limits and mounts are dropped unwritten', async () => {
    const scratch = await tempDir('scratch');
    const journalDir = path.join(scratch, 'journal');
    const journal = await open(journalDir);
    const leftover = path.join(scratch, 'fsbench-metadata-0badc0de');
    await mkdir(path.join(leftover, 'dir.001'), { recursive: true });
    await writeFile(path.join(leftover, 'image.xfs'), 'x');
    const file = '/proc/sys/fs/inotify/max_user_instances';
    const before = await readFile(file, 'utf8');
    const bootId = 'an-earlier-boot';
    await plant(journalDir, { pid: 1, bootId, entry: { kind: 'path', path: leftover } });
    await plant(journalDir, { pid: 1, bootId, entry: { kind: 'mount', target: path.join(leftover, 'mnt') } });
    await plant(journalDir, { pid: 1, bootId, entry: { kind: 'sysctl', path: file, original: `${Number(before) + 7}\n` } });

    const lines = await journal.recover();

    expect(lines.sort()).toEqual(
      [
        `undid (earlier boot) path ${leftover}`,
        `dropped (earlier boot) mount ${path.join(leftover, 'mnt')}`,
        `dropped (earlier boot) ${file} = ${Number(before) + 7}`,
      ].sort(),
    );
    expect(existsSync(leftover)).toBe(false);
    expect(await readFile(file, 'utf8')).toBe(before);
    expect(await entries(journalDir)).toEqual([]);
  });
});

describe('who is gone: the owner lock of each entry', () => {
  it("undoes a SIGKILLed writer's entry in that writer's own scratch directory, registered in the shared journal", async () => {
    const shared = path.join(await tempDir('shared'), 'journal');
    const scratchA = await tempDir('scratch-a');
    const runDir = path.join(scratchA, 'fsbench-inotify-12345678');
    const a = await writer(shared, scratchA, runDir);
    const b = await open(shared, { scratch: await tempDir('scratch-b') });
    expect(existsSync(path.join(scratchA, SCRATCH_MARKER))).toBe(true);
    // Alive, in this very pid namespace: left alone.
    expect(await b.recover()).toEqual([]);
    expect(existsSync(runDir)).toBe(true);

    await kill(a);

    expect(await recoverOnceGone(b)).toEqual([`undid path ${runDir}`]);
    expect(existsSync(runDir)).toBe(false);
    expect(await entries(shared)).toEqual([]);
  });

  it('never undoes the entry of a live writer in another pid namespace, whatever the host lock says; undoes it once the writer is killed', async () => {
    const shared = path.join(await tempDir('shared'), 'journal');
    const scratch = await tempDir('scratch');
    const runDir = path.join(scratch, 'fsbench-inotify-87654321');
    const other = await writer(shared, scratch, runDir, true);
    const [name] = await entries(shared);
    if (name === undefined) throw new Error('no entry written');
    // Written from another pid namespace (another container): its pid says nothing here.
    const stored = z.looseObject({ pid: z.number(), pidNs: z.string(), owner: z.string() }).parse(JSON.parse(await readFile(path.join(shared, name), 'utf8')));
    expect(stored.pidNs).not.toBe(await readlink('/proc/self/ns/pid'));
    expect(stored.pid).toBe(1);

    // What a sibling agent that took the host lock runs: the writer's owner lock is still held.
    const sibling = await open(shared, { scratch: await tempDir('scratch-sibling') });
    expect(await sibling.recover()).toEqual([]);
    expect(existsSync(runDir)).toBe(true);
    expect(await entries(shared)).toEqual([name]);

    await kill(other);

    expect(await recoverOnceGone(sibling)).toEqual([`undid path ${runDir}`]);
    expect(existsSync(runDir)).toBe(false);
  });

  it("has each of a dead writer's entries undone once, by one of two agents recovering at the same moment", async () => {
    const shared = path.join(await tempDir('shared'), 'journal');
    const scratch = await tempDir('scratch-dead');
    const runDirs = Array.from({ length: 20 }, (_, i) => path.join(scratch, `fsbench-inotify-${i.toString(16).padStart(8, '0')}`));
    const dead = await writer(shared, scratch, runDirs);
    const a = await open(shared, { scratch: await tempDir('scratch-a') });
    const b = await open(shared, { scratch: await tempDir('scratch-b') });
    expect(await entries(shared)).toHaveLength(20);
    await kill(dead);

    // Both read the same 20 entries; without one recovery at a time, both would undo each (and
    // the later undo could hit what a new run made under the same name meanwhile).
    const end = Date.now() + 5_000;
    let lines: string[] = [];
    for (;;) {
      lines = (await Promise.all([a.recover(), b.recover()])).flat();
      if (lines.length > 0 || Date.now() > end) break;
      await sleep(50);
    }

    expect(lines.toSorted()).toEqual(runDirs.map((d) => `undid path ${d}`).toSorted());
    expect(runDirs.filter((d) => existsSync(d))).toEqual([]);
    expect(await entries(shared)).toEqual([]);
  });

  it("leaves a journal's own entries to its run until the run lets go of them", async () => {
    const scratch = await tempDir('scratch');
    const journal = await open(path.join(scratch, 'journal'));
    const runDir = path.join(scratch, 'fsbench-inotify-0000aaaa');
    await mkdir(runDir);
    const handle = await journal.record({ kind: 'path', path: runDir });

    expect(await journal.recover()).toEqual([]);
    expect(existsSync(runDir)).toBe(true);

    // A teardown that could not undo the change lets go of it: the next recovery retries it.
    journal.release(handle);
    expect(await journal.recover()).toEqual([`undid path ${runDir}`]);
    expect(existsSync(runDir)).toBe(false);
  });

  it('keeps every entry of agents writing at once, each in a file of its own', async () => {
    const shared = path.join(await tempDir('shared'), 'journal');
    const a = await open(shared, { scratch: await tempDir('scratch-a') });
    const b = await open(shared, { scratch: await tempDir('scratch-b') });
    const writes = Array.from({ length: 100 }, (_, i) => [
      a.record({ kind: 'sysctl', path: '/proc/sys/fs/inotify/max_queued_events', original: `${i}\n` }),
      b.record({ kind: 'sysctl', path: '/proc/sys/fs/inotify/max_user_watches', original: `${i}\n` }),
    ]).flat();
    const handles = await Promise.all(writes);

    expect(new Set(handles).size).toBe(200);
    const names = await entries(shared);
    expect(names).toHaveLength(200);
    const Written = z.looseObject({ entry: z.looseObject({ path: z.string() }) });
    const originals = await Promise.all(names.map(async (n) => Written.parse(JSON.parse(await readFile(path.join(shared, n), 'utf8'))).entry));
    expect(originals.filter((e) => e.path.endsWith('max_queued_events'))).toHaveLength(100);
    expect(originals.filter((e) => e.path.endsWith('max_user_watches'))).toHaveLength(100);
    // Both writers are alive (open): neither undoes the other's.
    expect(await a.recover()).toEqual([]);
    expect(await entries(shared)).toHaveLength(200);
  });
});
