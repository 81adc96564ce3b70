/**
 * What has run on a host (agent/ran-here.ts), on a real filesystem: the record two agents of one
 * host share through the state directory, which keeps a job that ran here from running again.
 */
import { execFile } from 'node:child_process';
import { appendFile, mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { RanHere } from '../agent/ran-here.js';

const dirs: string[] = [];
const opened: RanHere[] = [];
afterEach(async () => {
  for (const r of opened.splice(0)) await r.close();
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function root(): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), 'fsbench-ran-here-'));
  dirs.push(d);
  return path.join(d, 'done');
}

function ranHere(dir: string): RanHere {
  const r = new RanHere(dir);
  opened.push(r);
  return r;
}

const nonce = (i: number) => `n${String(i).padStart(21, '0')}`;
const report = (i: number) => JSON.stringify({ report: `{"run":${i},"text":"ü \\n"}`, key: 'k', mac: 'm' });

describe('what ran on this host', () => {
  it("finds another agent's journal created within the clock tick of its last listing, when the directory's mtime did not change", async () => {
    const dir = await root();
    const a = ranHere(dir);
    await a.record('20000', nonce(1), report(1));
    const day = path.join(dir, '20000');
    const before = await stat(day, { bigint: true });
    // The mtime to the nanosecond, for touch -r to put back (utimes takes a double of seconds).
    const reference = `${dir}.mtime`;
    await writeFile(reference, '');
    await promisify(execFile)('touch', ['-m', '-r', day, reference]);
    // a lists the directory (one journal, its own), then b starts a journal of its own in it.
    expect(await a.lookup('20000', nonce(2))).toBeNull();
    const b = ranHere(dir);
    await b.record('20000', nonce(2), report(2));
    // What a coarse filesystem clock does when both happen within one tick: the mtime stays.
    await promisify(execFile)('touch', ['-m', '-r', reference, day]);
    expect((await stat(day, { bigint: true })).mtimeNs).toBe(before.mtimeNs);
    expect(await a.lookup('20000', nonce(2))).toBe(report(2));
  });

  it('is found again by this agent and by another agent of the host, also what was recorded after its last look', async () => {
    const dir = await root();
    const a = ranHere(dir);
    const b = ranHere(dir);
    expect(await a.lookup('20000', nonce(1))).toBeNull();
    for (let i = 0; i < 50; i++) await a.record('20000', nonce(i), report(i));
    expect(await a.lookup('20000', nonce(7))).toBe(report(7));
    // The other agent catches up from the files, then again after more lines.
    expect(await b.lookup('20000', nonce(49))).toBe(report(49));
    expect(await b.lookup('20000', nonce(50))).toBeNull();
    await a.record('20000', nonce(50), report(50));
    await b.record('20000', nonce(51), report(51));
    expect(await b.lookup('20000', nonce(50))).toBe(report(50));
    expect(await a.lookup('20000', nonce(51))).toBe(report(51));
    // A report longer than what is read at a time (4 MiB), then a short one after it.
    const long = JSON.stringify({ report: 'x'.repeat(9 * 1024 * 1024), key: 'k', mac: 'm' });
    await a.record('20000', nonce(60), long);
    await a.record('20000', nonce(61), report(61));
    expect(await b.lookup('20000', nonce(61))).toBe(report(61));
    expect(await b.lookup('20000', nonce(60))).toBe(long);
    // Another day is another directory: nothing of this one is found there.
    expect(await a.lookup('20001', nonce(7))).toBeNull();
    const files = await readdir(path.join(dir, '20000'));
    expect(files).toHaveLength(2);
    for (const f of files) expect((await stat(path.join(dir, '20000', f))).mode & 0o777).toBe(0o600);
    expect((await stat(path.join(dir, '20000'))).mode & 0o777).toBe(0o700);
  });

  it('never takes a line cut short by a crash for a run, and a new process writes a file of its own', async () => {
    const dir = await root();
    const before = ranHere(dir);
    await before.record('20000', nonce(1), report(1));
    await before.close();
    const [file] = await readdir(path.join(dir, '20000'));
    // The process died while writing the next line.
    await appendFile(path.join(dir, '20000', file ?? ''), `${nonce(2)} {"report":"cut sho`);
    const after = ranHere(dir);
    expect(await after.lookup('20000', nonce(1))).toBe(report(1));
    expect(await after.lookup('20000', nonce(2))).toBeNull();
    await after.record('20000', nonce(2), report(2));
    expect(await ranHere(dir).lookup('20000', nonce(2))).toBe(report(2));
    expect(await readdir(path.join(dir, '20000'))).toHaveLength(2);
  });

  it('honours a marker file from before the journals, and forgets one that cannot be read', async () => {
    const dir = await root();
    await mkdir(path.join(dir, '20000'), { recursive: true });
    await writeFile(path.join(dir, '20000', nonce(3)), report(3));
    await writeFile(path.join(dir, '20000', nonce(4)), '{"report":');
    const r = ranHere(dir);
    expect(await r.lookup('20000', nonce(3))).toBe(report(3));
    expect(await r.lookup('20000', nonce(4))).toBe('{"report":');
    await r.forget('20000', nonce(4));
    expect(await r.lookup('20000', nonce(4))).toBeNull();
    expect((await readdir(path.join(dir, '20000'))).sort()).toEqual([nonce(3)]);
  });

  it('prunes whole days before the one given, and records again afterwards', async () => {
    const dir = await root();
    const r = ranHere(dir);
    for (const day of ['19998', '19999', '20000']) await r.record(day, nonce(1), report(1));
    await r.prune(19999);
    expect((await readdir(dir)).sort()).toEqual(['19999', '20000']);
    expect(await r.lookup('19998', nonce(1))).toBeNull();
    await r.record('19998', nonce(2), report(2));
    expect(await r.lookup('19998', nonce(2))).toBe(report(2));
  });
});
