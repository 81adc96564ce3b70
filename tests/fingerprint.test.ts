/**
 * The machine facts a comparison across machines leans on, read from this machine's kernel and
 * checked against an independent reader of the same facts (util-linux's lscpu).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { collectFingerprint, readCaches } from '../host/fingerprint.js';

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

describe('the machine fingerprint', () => {
  it("takes each cache's size from the kernel's topology, as lscpu shows it, not from glibc's sysconf", async () => {
    const expected = lscpuCaches();
    expect(expected.length).toBeGreaterThan(0);
    const f = await collectFingerprint();
    expect(f.cpu.cacheSource).toBe('sysfs');
    expect(f.cpu.caches.map((c) => ({ level: c.level, type: c.type, bytes: c.bytes }))).toEqual(expected);
    const l3 = expected.find((c) => c.level === 3);
    const l2 = expected.find((c) => c.level === 2);
    expect(f.cpu.l3Bytes).toBe(l3?.bytes ?? null);
    expect(f.cpu.l2Bytes).toBe(l2?.bytes ?? null);
    expect(f.cpu.l1dBytes).toBe(expected.find((c) => c.level === 1 && c.type === 'Data')?.bytes ?? null);
    for (const c of f.cpu.caches) expect(c.sharedCpus).toMatch(/^[0-9,-]+$/);
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
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
