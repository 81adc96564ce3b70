/**
 * The agent's health file (FSBENCH_HEALTH_FILE) is written by root: a symlink planted where it
 * writes must never be written through, and a directory reached through a symlink is refused,
 * as the scratch and journal directories are.
 */
import { lstat, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startHealthFile } from '../agent/health-file.js';
import { FsbenchError } from '../contract/errors.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function tempDir(): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), 'fsbench-health-'));
  dirs.push(d);
  return d;
}

const reachable = () => ({ reachable: true, since: new Date().toISOString(), reason: null });

describe("the agent's health file", () => {
  it('never writes through a symlink planted in place of the file it writes first', async () => {
    const dir = await tempDir();
    const victim = path.join(dir, 'victim');
    await writeFile(victim, 'precious\n');
    const file = path.join(dir, 'health');
    // The name the agent writes before renaming it over the file: its pid is no secret.
    const planted = path.join(dir, `.health.${String(process.pid)}.tmp`);
    await symlink(victim, planted);
    expect((await lstat(planted)).isSymbolicLink()).toBe(true);
    const h = await startHealthFile({ file, intervalMs: 60_000, redis: reachable, log: () => undefined });
    try {
      expect(await readFile(victim, 'utf8')).toBe('precious\n');
      expect((await lstat(file)).isFile()).toBe(true);
      expect(JSON.parse(await readFile(file, 'utf8'))).toMatchObject({ ok: true, pid: process.pid });
    } finally {
      await h.stop();
    }
    expect(await readFile(victim, 'utf8')).toBe('precious\n');
  });

  it('refuses a directory reached through a symlink (DIRECTORY_UNSAFE), writing nothing', async () => {
    const dir = await tempDir();
    const real = path.join(dir, 'real');
    await mkdir(real, { mode: 0o700 });
    const link = path.join(dir, 'link');
    await symlink(real, link);
    const started = startHealthFile({ file: path.join(link, 'health'), intervalMs: 60_000, redis: reachable, log: () => undefined });
    await expect(started).rejects.toThrow(FsbenchError);
    await expect(started).rejects.toMatchObject({ code: 'DIRECTORY_UNSAFE', message: expect.stringContaining(`${link} is a symlink`) as unknown });
    await expect(lstat(path.join(real, 'health'))).rejects.toThrow(/ENOENT/);
  });
});
