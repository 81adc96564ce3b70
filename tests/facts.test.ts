/**
 * The kernel facts of the fingerprint, read from this machine and checked against independent
 * readers of the same facts: the sysfs files read here, util-linux's lscpu, findmnt and lsblk,
 * and the cgroup files. A tmpfs and a loop-mounted ext4 are mounted for real (the tests run as
 * root) to see a scratch directory without a block device and one on a loop device.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { MachineFingerprint } from '../contract/fingerprint.js';
import { bracketed, readHostFacts } from '../host/facts.js';
import { collectFingerprint } from '../host/fingerprint.js';
import { syntheticFingerprint } from './fixtures/synthetic.js';

const run = (cmd: string, args: readonly string[]) => execFileSync(cmd, args, { encoding: 'utf8' });
const fileOrNull = (file: string) => (existsSync(file) ? readFileSync(file, 'utf8').trim() : null);
const flagOrNull = (file: string) => {
  const t = fileOrNull(file);
  return t === null ? null : t === '1';
};
/** `always [madvise] never` -> madvise, split by words rather than by the code's regex. */
const selected = (text: string | null) => text?.split(/\s+/).find((w) => w.startsWith('['))?.slice(1, -1) ?? null;
/** One `Name: value` line of lscpu's output. */
const lscpuField = (name: string) => {
  const line = run('lscpu', []).split('\n').find((l) => l.startsWith(`${name}:`));
  return line === undefined ? null : line.slice(name.length + 1).trim();
};

const LsblkDisk = z.object({ name: z.string(), rota: z.boolean(), sched: z.string().nullable(), model: z.string().nullable() });
function lsblk(device: string) {
  const out = z.object({ blockdevices: z.array(LsblkDisk).length(1) }).parse(JSON.parse(run('lsblk', ['-Jd', '-o', 'NAME,ROTA,SCHED,MODEL', device])));
  const [disk] = out.blockdevices;
  if (!disk) throw new Error(`lsblk lists nothing for ${device}`);
  return disk;
}
/** findmnt's SOURCE, FSTYPE and OPTIONS of the mount holding `dir`. */
function findmnt(dir: string) {
  const [source, fsType, options] = run('findmnt', ['-no', 'SOURCE,FSTYPE,OPTIONS', '--target', dir]).trim().split(/\s+/);
  return { source, fsType, options };
}

const temp = mkdtempSync(path.join(os.tmpdir(), 'fsbench-facts-'));
afterAll(() => {
  rmSync(temp, { recursive: true, force: true });
});

describe('the machine facts', () => {
  it('reads cpufreq, SMT, THP and the clocksource as the sysfs files say', async () => {
    const { facts } = await collectFingerprint();
    const cpu = '/sys/devices/system/cpu';
    expect(facts.cpufreqDriver).toBe(fileOrNull(`${cpu}/cpu0/cpufreq/scaling_driver`));
    expect(facts.cpuGovernor).toBe(fileOrNull(`${cpu}/cpu0/cpufreq/scaling_governor`));
    const noTurbo = flagOrNull(`${cpu}/intel_pstate/no_turbo`);
    expect(facts.cpuBoost).toBe(flagOrNull(`${cpu}/cpufreq/boost`) ?? (noTurbo === null ? null : !noTurbo));
    // This 2-vCPU VM has SMT control and THP; the assertions above would pass on nulls, these not.
    expect(facts.smtControl).toBe(readFileSync(`${cpu}/smt/control`, 'utf8').trim());
    expect(facts.smtActive).toBe(readFileSync(`${cpu}/smt/active`, 'utf8').trim() === '1');
    const thp = '/sys/kernel/mm/transparent_hugepage';
    expect(facts.thpEnabled).toBe(selected(readFileSync(`${thp}/enabled`, 'utf8')));
    expect(facts.thpDefrag).toBe(selected(readFileSync(`${thp}/defrag`, 'utf8')));
    expect(facts.thpEnabled).toMatch(/^(always|madvise|never)$/);
    expect(facts.clocksource).toBe(readFileSync('/sys/devices/system/clocksource/clocksource0/current_clocksource', 'utf8').trim());
    expect(facts.clocksource).not.toBeNull();
  });

  it('counts the NUMA nodes lscpu counts', async () => {
    const { facts } = await collectFingerprint();
    const nodes = lscpuField('NUMA node(s)');
    expect(nodes).not.toBeNull();
    expect(facts.numaNodes).toBe(Number(nodes));
    expect(facts.numaNodes).toBe(readdirSync('/sys/devices/system/node').filter((n) => /^node\d+$/.test(n)).length);
  });

  it('names the hypervisor as /sys/hypervisor, the firmware or the CPU (lscpu) does, and a guest as virtualized', async () => {
    const { facts } = await collectFingerprint();
    const flags = readFileSync('/proc/cpuinfo', 'utf8').match(/^flags\s*:(.*)$/m)?.[1]?.split(/\s+/) ?? null;
    const vendor = fileOrNull('/sys/hypervisor/type') ?? fileOrNull('/sys/class/dmi/id/sys_vendor') ?? lscpuField('Hypervisor vendor');
    expect(facts.virtualized).toBe(flags === null ? null : flags.includes('hypervisor'));
    expect(facts.hypervisor).toBe(facts.virtualized ? vendor : null);
    // This machine is a KVM guest without DMI: named by its paravirtual clock.
    expect(facts.virtualized).toBe(true);
    expect(facts.hypervisor).toBe('KVM');
  });

  it("describes the scratch directory's mount and disk as findmnt and lsblk do", async () => {
    const { facts } = await collectFingerprint({}, temp);
    const s = facts.scratch;
    const mnt = findmnt(temp);
    expect(s?.source).toBe(mnt.source);
    expect(s?.fsType).toBe(mnt.fsType);
    expect(s?.mountOptions.join(',')).toBe(mnt.options);
    expect(mnt.source).toMatch(/^\/dev\//);
    const disk = lsblk(mnt.source ?? '');
    expect(s?.device).toBe(disk.name);
    expect(s?.partition).toBeNull();
    expect(s?.rotational).toBe(disk.rota);
    expect(s?.scheduler).toBe(disk.sched);
    expect(s?.model).toBe(disk.model?.trim() ?? null);
    expect(s?.mountPoint).toBe(run('findmnt', ['-no', 'TARGET', '--target', temp]).trim());
  });

  it('reads the cgroup limits the process runs under, max and v1 "unlimited" as none', async () => {
    const { facts } = await collectFingerprint();
    const lines = readFileSync('/proc/self/cgroup', 'utf8').trim().split('\n');
    const pathOf = (controller: string) => lines.map((l) => l.split(':')).find(([, c]) => c?.split(',').includes(controller))?.[2];
    if (existsSync('/sys/fs/cgroup/cgroup.controllers')) {
      const dir = path.join('/sys/fs/cgroup', lines.find((l) => l.startsWith('0::'))?.slice(3) ?? '/');
      const [quota, period] = (fileOrNull(path.join(dir, 'cpu.max')) ?? 'max').split(' ');
      const mem = fileOrNull(path.join(dir, 'memory.max')) ?? 'max';
      expect(facts.cgroupVersion).toBe('2');
      expect(facts.cpuLimit).toBe(quota === 'max' ? null : Number(quota) / Number(period));
      expect(facts.memoryLimitBytes).toBe(mem === 'max' ? null : Number(mem));
      return;
    }
    // v1 (this machine: the controllers are on v1, an empty cgroup2 at /sys/fs/cgroup/unified).
    const cpuDir = path.join('/sys/fs/cgroup/cpu', pathOf('cpu') ?? '');
    const memDir = path.join('/sys/fs/cgroup/memory', pathOf('memory') ?? '');
    const quota = Number(readFileSync(path.join(cpuDir, 'cpu.cfs_quota_us'), 'utf8'));
    const period = Number(readFileSync(path.join(cpuDir, 'cpu.cfs_period_us'), 'utf8'));
    // memory.stat's hierarchical limit already takes the ancestors' into account.
    const limit = readFileSync(path.join(memDir, 'memory.stat'), 'utf8').match(/^hierarchical_memory_limit (\d+)$/m)?.[1];
    expect(limit).toBeDefined();
    expect(facts.cgroupVersion).toBe('1');
    expect(facts.cpuLimit).toBe(quota === -1 ? null : quota / period);
    expect(facts.memoryLimitBytes).toBe(BigInt(limit ?? '0') >= 2n ** 62n ? null : Number(limit));
  });

  it('parses a fingerprint stored before the facts with every fact unknown', () => {
    const old: Record<string, unknown> = { ...syntheticFingerprint({ machine: 'old' }) };
    delete old['facts'];
    const parsed = MachineFingerprint.parse(old);
    expect(parsed.facts.cpuGovernor).toBeNull();
    expect(parsed.facts.scratch).toBeNull();
    expect(parsed.facts.cgroupVersion).toBeNull();
    expect(Object.values(parsed.facts).every((v) => v === null)).toBe(true);
    expect(Object.keys(parsed.facts)).toHaveLength(15);
  });

  it('takes the bracketed choice of a sysfs list, or a lone word', () => {
    expect(bracketed('always defer defer+madvise [madvise] never')).toBe('madvise');
    expect(bracketed('[none] mq-deadline')).toBe('none');
    expect(bracketed('none')).toBe('none');
    expect(bracketed('a b')).toBeNull();
    expect(bracketed(null)).toBeNull();
  });
});

describe('a scratch directory without a block device', () => {
  const dir = path.join(temp, 'tmpfs');
  beforeAll(() => {
    mkdirSync(dir);
    run('mount', ['-t', 'tmpfs', '-o', 'size=16m', 'tmpfs', dir]);
    mkdirSync(path.join(dir, 'scratch'));
  });
  afterAll(() => run('umount', [dir]));

  it('is on tmpfs with no device, and its mount options include the size', async () => {
    const { facts } = await collectFingerprint({}, path.join(dir, 'scratch'));
    const s = facts.scratch;
    expect(s?.mountPoint).toBe(dir);
    expect(s?.fsType).toBe('tmpfs');
    expect(s?.device).toBeNull();
    expect(s?.rotational).toBeNull();
    expect(s?.scheduler).toBeNull();
    expect(s?.mountOptions).toContain('size=16384k');
    expect(s?.mountOptions.join(',')).toBe(findmnt(dir).options);
  });
});

describe('a scratch directory on a loop device', () => {
  const image = path.join(temp, 'loop.img');
  const dir = path.join(temp, 'loop');
  let device = '';
  beforeAll(() => {
    writeFileSync(image, Buffer.alloc(0));
    run('truncate', ['-s', '32M', image]);
    run('mkfs.ext4', ['-q', image]);
    device = run('losetup', ['--find', '--show', image]).trim();
    mkdirSync(dir);
    run('mount', [device, dir]);
  });
  afterAll(() => {
    run('umount', [dir]);
    run('losetup', ['-d', device]);
  });

  it('names the loop device, its backing file and the ext4 on it, as lsblk and findmnt do', async () => {
    const facts = await readHostFacts(dir);
    const s = facts.scratch;
    expect(s?.fsType).toBe('ext4');
    expect(s?.device).toBe(path.basename(device));
    expect(s?.backingFile).toBe(image);
    expect(s?.rotational).toBe(lsblk(device).rota);
    expect(s?.scheduler).toBe(lsblk(device).sched);
    expect(s?.mountOptions.join(',')).toBe(findmnt(dir).options);
  });
});
