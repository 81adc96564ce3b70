/**
 * The machine facts a comparison across machines leans on, read from this machine's kernel and
 * checked against an independent reader of the same facts (util-linux's lscpu); and what a knee
 * judged against those sizes says when the kernel did not give them.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { collectFingerprint, CPU0_CACHES, cpuCaches, readCaches } from '../host/fingerprint.js';
import { buildReport } from '../report/build.js';
import { syntheticRuns } from './fixtures/synthetic.js';

/** lscpu's view: level, type and the size of one instance, in bytes. */
function lscpuCaches(): { level: number; type: string; bytes: number }[] {
  const out = execFileSync('lscpu', ['--caches=LEVEL,TYPE,ONE-SIZE', '--bytes'], { encoding: 'utf8' });
  return out
    .trim()
    .split('\n')
    .slice(1) // the heading
    .map((line) => line.trim().split(/\s+/))
    .map(([level, type, bytes]) => ({ level: Number(level), type: type ?? '', bytes: Number(bytes) }));
}

/** The cache directories sysfs lists for CPU 0, read here without the code under test; none where sysfs has none. */
function sysfsCacheCount(): number {
  return existsSync(CPU0_CACHES) ? readdirSync(CPU0_CACHES).filter((n) => /^index\d+$/.test(n)).length : 0;
}

describe('the machine fingerprint', () => {
  // Machines of this kind differ: one lists its caches in sysfs, another none. Each runs the test
  // that holds what its kernel says, and reports the other as skipped: never a pass that checked
  // nothing. The other case is covered on any machine by the fixture trees below.
  const sysfsCaches = sysfsCacheCount();

  it.runIf(sysfsCaches > 0)("takes each cache's size from the kernel's topology, as lscpu shows it", async () => {
    const f = await collectFingerprint();
    const listed = lscpuCaches();
    // lscpu reads the same sysfs tree: where it has caches, it lists them.
    expect(listed.length).toBeGreaterThan(0);
    expect(f.cpu.cacheSource).toBe('sysfs');
    expect(f.cpu.caches.map((c) => ({ level: c.level, type: c.type, bytes: c.bytes }))).toEqual(listed);
    expect(f.cpu.l3Bytes).toBe(listed.find((c) => c.level === 3)?.bytes ?? null);
    expect(f.cpu.l2Bytes).toBe(listed.find((c) => c.level === 2)?.bytes ?? null);
    expect(f.cpu.l1dBytes).toBe(listed.find((c) => c.level === 1 && c.type === 'Data')?.bytes ?? null);
    for (const c of f.cpu.caches) expect(c.sharedCpus).toMatch(/^[0-9,-]+$/);
  });

  it.runIf(sysfsCaches === 0)("knows no cache size where the kernel lists no cache topology in sysfs: unknown, not glibc's guess", async () => {
    const f = await collectFingerprint();
    expect(f.cpu.cacheSource).toBeNull();
    expect(f.cpu.caches).toEqual([]);
    expect([f.cpu.l1dBytes, f.cpu.l2Bytes, f.cpu.l3Bytes]).toEqual([null, null, null]);
  });

  it("leaves the sizes unknown where sysfs lists no caches, whatever glibc's sysconf claims", async () => {
    const empty = mkdtempSync(path.join(os.tmpdir(), 'fsbench-nocaches-'));
    try {
      expect(await cpuCaches(empty)).toEqual({ l1dBytes: null, l2Bytes: null, l3Bytes: null, cacheSource: null, caches: [] });
      expect(await cpuCaches(path.join(empty, 'absent'))).toEqual({ l1dBytes: null, l2Bytes: null, l3Bytes: null, cacheSource: null, caches: [] });
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });

  it('reads the sizes as sysfs spells them, leaves out a cache it cannot read, and has none where sysfs has none', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'fsbench-caches-'));
    try {
      const cache = (index: number, files: Record<string, string>) => {
        mkdirSync(path.join(dir, `index${index}`));
        for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, `index${index}`, name), `${text}\n`);
      };
      cache(0, { level: '1', type: 'Data', size: '48K', shared_cpu_list: '0,8' });
      cache(1, { level: '2', type: 'Unified', size: '2M', shared_cpu_list: '0,8' });
      cache(2, { level: '3', type: 'Unified', size: '36864K', shared_cpu_list: '0-15' });
      cache(10, { level: '3', type: 'Unified', size: 'lots', shared_cpu_list: '0-15' });
      cache(11, { level: '4', type: 'Unified', shared_cpu_list: '0' });
      expect(await readCaches(dir)).toEqual([
        { level: 1, type: 'Data', bytes: 48 * 1024, sharedCpus: '0,8' },
        { level: 2, type: 'Unified', bytes: 2 * 1024 ** 2, sharedCpus: '0,8' },
        { level: 3, type: 'Unified', bytes: 36 * 1024 ** 2, sharedCpus: '0-15' },
      ]);
      expect(await readCaches(path.join(dir, 'absent'))).toEqual([]);
      const fields = await cpuCaches(dir);
      expect([fields.l1dBytes, fields.l2Bytes, fields.l3Bytes, fields.cacheSource]).toEqual([48 * 1024, 2 * 1024 ** 2, 36 * 1024 ** 2, 'sysfs']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('a knee judged against the cache sizes the fingerprint holds', () => {
  const matrix = { name: 'sweep', workload: 'inotify' as const, repetitions: 5, params: { bufferBytes: Array.from({ length: 8 }, (_, i) => 1024 * 4 ** i) } };
  /** The sweep's knees on a machine whose fingerprint got its sizes as `cacheSource` says. */
  const kneesWith = (cacheSource: 'sysfs' | 'sysconf' | null, l3Bytes: number | null) => {
    const runs = syntheticRuns({ matrix, machine: { machine: 'vm', l3Bytes: 8 * 1024 ** 2 }, seed: 5, noise: 0.005 }).map((r) => ({
      ...r,
      fingerprint: { ...r.fingerprint, cpu: { ...r.fingerprint.cpu, cacheSource, l3Bytes } },
    }));
    const { knees } = buildReport(runs, { title: 'sweep' });
    expect(knees).toHaveLength(1);
    expect(knees[0]?.knee).not.toBeNull();
    return knees;
  };

  it("says so when the L3 is glibc's sysconf figure the kernel never gave (a fingerprint recorded before it was left unknown)", () => {
    const [k] = kneesWith('sysconf', 508 * 1024 ** 2);
    expect(k?.cacheSource).toBe('sysconf');
    expect(k?.kneeOverL3).not.toBeNull();
    expect(k?.note).toMatch(/^knee\/L3 is judged against an L3 of 508MiB that only glibc's sysconf reports: .* an unverified guess\.$/);
  });

  it("says nothing when the L3 is the kernel's, and that there is no L3 to judge against when the machine reports none", () => {
    expect(kneesWith('sysfs', 8 * 1024 ** 2)[0]?.note).toBeNull();
    const [unknown] = kneesWith(null, null);
    expect(unknown?.kneeOverL3).toBeNull();
    expect(unknown?.note).toBe('vm reports no L3 size (its kernel lists no cache topology): the knee is not compared with a cache.');
  });
});
