/**
 * The list of a host's own watchers (FSBENCH_WATCHERS, host/watcher-list.ts): root's agent runs
 * only programs its operator listed, under the names a job may give, and never as root. Real
 * files, owners and modes: a list or a program another local user could change is refused, a
 * name the host does not list is refused naming what it lists, and an agent given a list it
 * cannot trust stops at start.
 */
import { generateKeyPairSync } from 'node:crypto';
import { chmod, chown, copyFile, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FsbenchError } from '../contract/errors.js';
import { listedWatcher, loadWatcherList, watcherArgv } from '../host/watcher-list.js';
import { runCli } from './helpers/local.js';

const NOBODY = 65534;
const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

/** A directory of root's (mkdtemp makes it 0700) with a program of root's in it, mode 0755. */
async function place(): Promise<{ dir: string; program: string }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'fsbench-watchers-'));
  dirs.push(dir);
  await chmod(dir, 0o755);
  const program = path.join(dir, 'mywatch');
  await copyFile('/bin/true', program);
  await chmod(program, 0o755);
  return { dir, program };
}

async function listFile(dir: string, body: unknown, mode = 0o644): Promise<string> {
  const file = path.join(dir, 'watchers.json');
  await writeFile(file, typeof body === 'string' ? body : JSON.stringify(body));
  await chmod(file, mode);
  return file;
}

/** The CONFIG_INVALID message loading `file` gives; fails the test when it loads. */
async function refusal(file: string): Promise<string> {
  const err = await loadWatcherList(file).then(() => null, (e: unknown) => e);
  expect(err).toBeInstanceOf(FsbenchError);
  expect(err instanceof FsbenchError ? err.code : '').toBe('CONFIG_INVALID');
  return err instanceof FsbenchError ? err.message : '';
}

describe("a host's own watchers", () => {
  it('reads a list of root\'s, runs each as nobody unless told, and puts the watched root where {root} stands', async () => {
    const { dir, program } = await place();
    const file = await listFile(dir, { watchers: [{ name: 'mywatch', argv: [program, '--json', '--root={root}', '{root}'] }, { name: 'other', argv: [program], uid: 1000, gid: 1000 }] });
    const list = await loadWatcherList(file);
    expect(list.watchers.map((w) => w.name)).toEqual(['mywatch', 'other']);
    const w = listedWatcher(list, 'mywatch');
    expect([w.uid, w.gid]).toEqual([NOBODY, NOBODY]);
    expect(listedWatcher(list, 'other').uid).toBe(1000);
    expect(watcherArgv(w, '/scratch/run 1')).toEqual([program, '--json', '--root=/scratch/run 1', '/scratch/run 1']);
  });

  it('refuses a name the host does not list, naming what it lists and who adds one', async () => {
    const { dir, program } = await place();
    const list = await loadWatcherList(await listFile(dir, { watchers: [{ name: 'mywatch', argv: [program] }] }));
    expect(() => listedWatcher(list, 'rm-rf')).toThrow(/no watcher called rm-rf may run on this host: .*watchers\.json \(FSBENCH_WATCHERS\) lists mywatch\. Its operator adds one there/);
    const none = await loadWatcherList(undefined);
    expect(() => listedWatcher(none, 'mywatch')).toThrow(/this host lists no watchers \(FSBENCH_WATCHERS is not set\)/);
    const err = (() => {
      try {
        listedWatcher(none, 'mywatch');
        return null;
      } catch (e) {
        return e;
      }
    })();
    expect(err instanceof FsbenchError ? err.code : err).toBe('WATCHER_NOT_LISTED');
  });

  it('refuses a list another local user could change: writable by others, owned by nobody, a symlink, in a directory of nobody\'s', async () => {
    const { dir, program } = await place();
    const body = { watchers: [{ name: 'mywatch', argv: [program] }] };
    const file = await listFile(dir, body, 0o666);
    expect(await refusal(file)).toMatch(/is writable by others \(mode 0666\)/);
    await chmod(file, 0o644);
    await chown(file, NOBODY, NOBODY);
    expect(await refusal(file)).toMatch(/is owned by uid 65534, not by root/);
    await chown(file, 0, 0);
    const link = path.join(dir, 'link.json');
    await symlink(file, link);
    expect(await refusal(link)).toMatch(/is a symlink/);
    const theirs = path.join(dir, 'theirs');
    await mkdir(theirs, { mode: 0o755 });
    await chown(theirs, NOBODY, NOBODY);
    expect(await refusal(await listFile(theirs, body))).toMatch(/in a directory another local user could change/);
    // The same list, of root's, in a directory of root's, loads: what was refused was each flaw.
    expect((await loadWatcherList(file)).watchers).toHaveLength(1);
  });

  it('refuses a listed program another local user could replace, or that cannot run', async () => {
    const { dir, program } = await place();
    const file = await listFile(dir, { watchers: [{ name: 'mywatch', argv: [program] }] });
    await chown(program, NOBODY, NOBODY);
    expect(await refusal(file)).toMatch(/lists mywatch as .*mywatch, but .*mywatch is owned by uid 65534, not by root/);
    await chown(program, 0, 0);
    await chmod(program, 0o775);
    expect(await refusal(file)).toMatch(/is writable by its group/);
    await chmod(program, 0o755);
    await chmod(dir, 0o777);
    expect(await refusal(file)).toMatch(/another local user could change|writable by others/);
    await chmod(dir, 0o755);
    await rm(program);
    expect(await refusal(file)).toMatch(/which cannot be run .*install it, or fix its path/);
  });

  it('refuses lists that are not lists: not JSON, a relative program, root as the user, two of one name, unknown fields, too large, missing', async () => {
    const { dir, program } = await place();
    expect(await refusal(await listFile(dir, '{"watchers": ['))).toMatch(/is not JSON/);
    expect(await refusal(await listFile(dir, { watchers: [{ name: 'w', argv: ['mywatch'] }] }))).toMatch(/argv: must start with the program as a normalised absolute path/);
    expect(await refusal(await listFile(dir, { watchers: [{ name: 'w', argv: [program], uid: 0 }] }))).toMatch(/uid: must not be 0: a listed watcher never runs as root/);
    expect(await refusal(await listFile(dir, { watchers: [{ name: 'w', argv: [program] }, { name: 'w', argv: [program] }] }))).toMatch(/watcher names must be unique/);
    expect(await refusal(await listFile(dir, { watchers: [{ name: 'w', argv: [program], shell: 'sh -c' }] }))).toMatch(/Unrecognized key.*shell/);
    expect(await refusal(await listFile(dir, { watchers: [{ name: 'Bad Name', argv: [program] }] }))).toMatch(/name: must be 1 to 32 of a-z/);
    expect(await refusal(await listFile(dir, `{"watchers": [], "pad": "${'x'.repeat(70_000)}"}`))).toMatch(/more than the 65536 a list may be/);
    expect(await refusal(path.join(dir, 'none.json'))).toMatch(/does not exist: create it, or unset FSBENCH_WATCHERS/);
  });

  it('stops `fsbench agent` at start when its list cannot be trusted, saying which file and why, without a stack trace', async () => {
    const { dir, program } = await place();
    const file = await listFile(dir, { watchers: [{ name: 'mywatch', argv: [program] }] }, 0o666);
    const scratch = await mkdtemp(path.join(os.tmpdir(), 'fsbench-watchers-scratch-'));
    dirs.push(scratch);
    const r = await runCli(['agent'], { FSBENCH_WATCHERS: file, FSBENCH_SCRATCH: scratch, FSBENCH_JOB_KEY: generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }).toString(), REDIS_URL: 'redis://127.0.0.1:1', FSBENCH_HOST_ID: 'watchers-test', FSBENCH_MACHINE: 'watchers-test' });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(`the watcher list ${file} (FSBENCH_WATCHERS) is writable by others`);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});
