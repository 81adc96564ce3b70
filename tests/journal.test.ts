/**
 * The host journal on the real kernel: entries are checked when written and again when
 * replayed (known sysctls with numbers, paths inside a scratch root), a refused entry is moved
 * to `refused/` and never executed, an earlier boot's files are still removed, and agents with
 * separate scratch directories share one journal without clobbering each other.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { FsbenchError } from '../contract/errors.js';
import { currentBootId, Journal, REFUSED_DIR, SCRATCH_MARKER } from '../host/journal.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function tempDir(name: string): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), `fsbench-journal-${name}-`));
  dirs.push(d);
  return d;
}

/** The pid of a process that has exited: the owner of a dead run's entries. */
function deadPid(): number {
  return spawnSync('true').pid;
}

/** Writes an entry as a tamperer (or an older, buggier writer) would: straight into the directory. */
async function plant(journalDir: string, stored: Record<string, unknown>): Promise<string> {
  const name = `${Date.now()}-planted-${Math.random().toString(16).slice(2)}.json`;
  await writeFile(path.join(journalDir, name), JSON.stringify(stored));
  return name;
}

async function entries(journalDir: string): Promise<string[]> {
  return (await readdir(journalDir)).filter((n) => n.endsWith('.json'));
}

async function refused(journalDir: string): Promise<string[]> {
  return readdir(path.join(journalDir, REFUSED_DIR)).catch(() => []);
}

describe('a journal entry replayed after a crash', () => {
  it('naming /proc/sys/../../ is refused, moved to refused/, and nothing is written', async () => {
    const scratch = await tempDir('scratch');
    const journalDir = path.join(scratch, 'journal');
    const journal = await Journal.open(journalDir);
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
    const journal = await Journal.open(journalDir);
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

  it('naming a path outside the scratch directory is refused and the path survives, whatever root it claims', async () => {
    const scratch = await tempDir('scratch');
    const journalDir = path.join(scratch, 'journal');
    const journal = await Journal.open(journalDir);
    const elsewhere = await tempDir('precious');
    const precious = path.join(elsewhere, 'data');
    await mkdir(precious);
    const bootId = await currentBootId();
    const plain = await plant(journalDir, { pid: deadPid(), bootId, entry: { kind: 'path', path: precious } });
    // Claiming the other directory as its root does not help: no agent marked it as a scratch directory.
    const claimed = await plant(journalDir, { pid: deadPid(), bootId, root: elsewhere, entry: { kind: 'path', path: precious } });
    // Nor does a symlink inside the scratch directory that leads out of it.
    await symlink(elsewhere, path.join(scratch, 'link'));
    const linked = await plant(journalDir, { pid: deadPid(), bootId, entry: { kind: 'path', path: path.join(scratch, 'link', 'data') } });

    const lines = await journal.recover();

    expect(lines).toHaveLength(3);
    expect(lines.find((l) => l.startsWith(`refused ${plain}`))).toMatch(/is outside the scratch directory/);
    expect(lines.find((l) => l.startsWith(`refused ${claimed}`))).toMatch(/is neither this agent's scratch directory nor marked as another's/);
    expect(lines.find((l) => l.startsWith(`refused ${linked}`))).toMatch(/resolves to .*, outside /);
    expect(existsSync(precious)).toBe(true);
    expect((await refused(journalDir)).sort()).toEqual([plain, claimed, linked].sort());
  });
});

describe('writing a journal entry', () => {
  it('refuses what replay would refuse, and leaves no file behind', async () => {
    const scratch = await tempDir('scratch');
    const journalDir = path.join(scratch, 'journal');
    const journal = await Journal.open(journalDir);
    const outside = path.join(await tempDir('outside'), 'x');

    const attempts = [
      journal.record({ kind: 'sysctl', path: '/proc/sys/fs/inotify/max_queued_events', original: 'sixteen' }),
      journal.record({ kind: 'path', path: outside }),
      journal.record({ kind: 'mount', target: `${scratch}/a/../../etc` }),
    ];
    const errors = await Promise.all(attempts.map((a) => a.then(() => null, (err: unknown) => err)));

    for (const err of errors) {
      expect(err).toBeInstanceOf(FsbenchError);
      expect(err).toMatchObject({ code: 'INTERNAL' });
    }
    expect(String(errors[1])).toMatch(/outside the scratch directory/);
    expect(await entries(journalDir)).toEqual([]);
  });
});

describe('entries of an earlier boot', () => {
  it('still remove their directories, while their limits and mounts are dropped unwritten', async () => {
    const scratch = await tempDir('scratch');
    const journalDir = path.join(scratch, 'journal');
    const journal = await Journal.open(journalDir);
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

describe('one journal shared by agents with separate scratch directories', () => {
  it("undoes a dead agent's entry in that agent's (marked) scratch directory", async () => {
    const shared = path.join(await tempDir('shared'), 'journal');
    const scratchA = await tempDir('scratch-a');
    const scratchB = await tempDir('scratch-b');
    const a = await Journal.open(shared, { scratch: scratchA });
    const b = await Journal.open(shared, { scratch: scratchB });
    expect(existsSync(path.join(scratchA, SCRATCH_MARKER))).toBe(true);
    const runDir = path.join(scratchA, 'fsbench-inotify-12345678');
    await mkdir(runDir);
    await a.record({ kind: 'path', path: runDir });
    // What a killed agent leaves: its entry, with a pid that is gone.
    const [name] = await entries(shared);
    if (name === undefined) throw new Error('no entry written');
    const stored = z.looseObject({ pid: z.number() }).parse(JSON.parse(await readFile(path.join(shared, name), 'utf8')));
    await writeFile(path.join(shared, name), JSON.stringify({ ...stored, pid: deadPid() }));

    expect(await b.recover()).toEqual([`undid path ${runDir}`]);
    expect(existsSync(runDir)).toBe(false);
  });

  it("leaves, under one host's lock, the entries another container wrote for another host id", async () => {
    // Two simulated hosts on one kernel (FSBENCH_HOST_ID) with one journal volume, as compose's
    // e2e test runs them: host-a's lock must not undo what host-b's run is measuring under.
    const shared = path.join(await tempDir('shared'), 'journal');
    const scratch = await tempDir('scratch');
    const writer = await Journal.open(shared, { scratch, hostId: 'host-b' });
    const runDir = path.join(scratch, 'fsbench-inotify-87654321');
    await mkdir(runDir);
    await writer.record({ kind: 'path', path: runDir });
    const [name] = await entries(shared);
    if (name === undefined) throw new Error('no entry written');
    // Written from another container: its pid namespace differs, so only the host lock speaks for it.
    const stored = z.looseObject({ hostId: z.string() }).parse(JSON.parse(await readFile(path.join(shared, name), 'utf8')));
    expect(stored.hostId).toBe('host-b');
    await writeFile(path.join(shared, name), JSON.stringify({ ...stored, pidNs: 'pid:[1]' }));

    const otherHost = await Journal.open(shared, { scratch, hostId: 'host-a' });
    expect(await otherHost.recover({ holdsHostLock: true })).toEqual([]);
    expect(existsSync(runDir)).toBe(true);
    expect(await entries(shared)).toEqual([name]);

    const sameHost = await Journal.open(shared, { scratch, hostId: 'host-b' });
    expect(await sameHost.recover({ holdsHostLock: true })).toEqual([`undid path ${runDir}`]);
    expect(existsSync(runDir)).toBe(false);
  });

  it('keeps every entry of agents writing at once, each in a file of its own', async () => {
    const shared = path.join(await tempDir('shared'), 'journal');
    const a = await Journal.open(shared, { scratch: await tempDir('scratch-a') });
    const b = await Journal.open(shared, { scratch: await tempDir('scratch-b') });
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
  });
});
