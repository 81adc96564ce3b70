/**
 * The kernel facts of the fingerprint, read from this machine and checked against independent
 * readers of the same facts: the sysfs files read here, util-linux's lscpu, findmnt and lsblk,
 * and the cgroup files. A tmpfs and a loop-mounted ext4 are mounted for real (the tests run as
 * root) to see a scratch directory without a block device and one on a loop device.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { MachineFingerprint } from '../contract/fingerprint.js';
import { bracketed, readHostFacts, readHypervisor } from '../host/facts.js';
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

/** What this machine says about being a guest, read here without the code under test. */
function guestSources(): { type: string | null; flags: string[] | null; dmi: string | null; paravirt: boolean } {
  const clocks = fileOrNull('/sys/devices/system/clocksource/clocksource0/available_clocksource')?.split(/\s+/) ?? [];
  return {
    type: fileOrNull('/sys/hypervisor/type'),
    flags: readFileSync('/proc/cpuinfo', 'utf8').match(/^flags\s*:(.*)$/m)?.[1]?.split(/\s+/) ?? null,
    dmi: fileOrNull('/sys/class/dmi/id/sys_vendor') || fileOrNull('/sys/class/dmi/id/product_name') || null,
    paravirt: clocks.some((c) => c === 'kvm-clock' || c === 'xen' || c.startsWith('hyperv_clocksource')),
  };
}

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
  // Each fact is compared with what this machine's files say, and is null exactly where they are
  // absent: machines of this kind differ in what their VM exposes. The branch a machine lacks is
  // covered by the fixture trees further down.
  it('reads cpufreq, SMT, THP and the clocksource as the sysfs files say, null where a file is absent', async () => {
    const { facts } = await collectFingerprint();
    const cpu = '/sys/devices/system/cpu';
    expect(facts.cpufreqDriver).toBe(fileOrNull(`${cpu}/cpu0/cpufreq/scaling_driver`));
    expect(facts.cpuGovernor).toBe(fileOrNull(`${cpu}/cpu0/cpufreq/scaling_governor`));
    const noTurbo = flagOrNull(`${cpu}/intel_pstate/no_turbo`);
    expect(facts.cpuBoost).toBe(flagOrNull(`${cpu}/cpufreq/boost`) ?? (noTurbo === null ? null : !noTurbo));
    expect(facts.smtControl).toBe(fileOrNull(`${cpu}/smt/control`));
    expect(facts.smtActive).toBe(flagOrNull(`${cpu}/smt/active`));
    const thp = '/sys/kernel/mm/transparent_hugepage';
    expect(facts.thpEnabled).toBe(selected(fileOrNull(`${thp}/enabled`)));
    expect(facts.thpDefrag).toBe(selected(fileOrNull(`${thp}/defrag`)));
    if (facts.thpEnabled !== null) expect(facts.thpEnabled).toMatch(/^(always|madvise|never)$/);
    expect(facts.clocksource).toBe(fileOrNull('/sys/devices/system/clocksource/clocksource0/current_clocksource'));
  });

  it('counts the NUMA nodes sysfs lists, none without a node directory', async () => {
    const { facts } = await collectFingerprint();
    const dir = '/sys/devices/system/node';
    const inSysfs = existsSync(dir) ? readdirSync(dir).filter((n) => /^node\d+$/.test(n)).length : 0;
    expect(facts.numaNodes).toBe(inSysfs > 0 ? inSysfs : null);
  });

  // lscpu prints the count only where it finds one: elsewhere this comparison is a counted skip.
  const lscpuNodes = lscpuField('NUMA node(s)');
  it.runIf(lscpuNodes !== null)('counts the NUMA nodes lscpu counts', async () => {
    const { facts } = await collectFingerprint();
    expect(facts.numaNodes).toBe(Number(lscpuNodes));
  });

  it('tells a guest from bare metal by the CPU flags, and names the hypervisor as the machine does', async () => {
    const { facts } = await collectFingerprint();
    const guest = guestSources();
    expect(facts.virtualized).toBe(guest.type !== null ? true : guest.flags === null ? null : guest.flags.includes('hypervisor'));
    // The name where the machine gives one, in the order the code looks: /sys/hypervisor, the
    // firmware (DMI), the paravirtual clock (some name: the cross-check below says which), else none.
    if (!facts.virtualized) expect(facts.hypervisor).toBeNull();
    else if (guest.type !== null || guest.dmi !== null) expect(facts.hypervisor).toBe(guest.type ?? guest.dmi);
    else if (guest.paravirt) expect(facts.hypervisor).not.toBeNull();
    else expect(facts.hypervisor).toBeNull();
  });

  // A guest named by its paravirtual clock alone: where the CPU names its hypervisor too (lscpu's
  // CPUID leaf), the two must agree; a machine without that line counts this as a skip.
  const named = guestSources();
  const cpuSays = lscpuField('Hypervisor vendor');
  it.runIf(named.flags?.includes('hypervisor') === true && named.type === null && named.dmi === null && named.paravirt && cpuSays !== null)(
    "names a guest by its paravirtual clock as lscpu's CPUID leaf does",
    async () => {
      const { facts } = await collectFingerprint();
      expect(facts.hypervisor?.toLowerCase()).toContain(cpuSays?.split(/\s+/)[0]?.toLowerCase());
    },
  );

  it("describes the scratch directory's mount and disk as findmnt and lsblk do", async () => {
    const { facts } = await collectFingerprint({}, temp);
    const s = facts.scratch;
    const mnt = findmnt(temp);
    expect(s?.source).toBe(mnt.source);
    expect(s?.fsType).toBe(mnt.fsType);
    expect(s?.mountOptions.join(',')).toBe(mnt.options);
    expect(s?.mountPoint).toBe(run('findmnt', ['-no', 'TARGET', '--target', temp]).trim());
    if (mnt.source === undefined || !mnt.source.startsWith('/dev/')) {
      // tmpfs or overlay under the temp directory (a container): no block device to describe.
      // The other case is the loop device further down, on any machine.
      expect(s?.device).toBeNull();
    } else {
      const parent = run('lsblk', ['-no', 'PKNAME', mnt.source]).trim().split('\n')[0] ?? '';
      const wholeDisk = parent === '' ? mnt.source : `/dev/${parent}`;
      const disk = lsblk(wholeDisk);
      expect(s?.device).toBe(disk.name);
      expect(s?.partition).toBe(parent === '' ? null : path.basename(realpathSync(mnt.source)));
      expect(s?.rotational).toBe(disk.rota);
      expect(s?.scheduler).toBe(disk.sched);
      expect(s?.model).toBe(disk.model?.trim() ? disk.model.trim() : null);
    }
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
    } else {
      // v1 (machines whose controllers are on v1, an empty cgroup2 at /sys/fs/cgroup/unified).
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
    }
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

/** A tree shaped like / holding only `files` (path -> text), for the branches this machine does not show. */
function fixtureRoot(files: Record<string, string>): string {
  const root = mkdtempSync(path.join(temp, 'root-'));
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    writeFileSync(path.join(root, file), `${text}\n`);
  }
  return root;
}

describe('machines that expose more, or less, than this one', () => {
  const cpu = 'sys/devices/system/cpu';
  const flagsWith = (...extra: string[]) => `processor\t: 0\nflags\t\t: fpu sse2 ${extra.join(' ')}\n`;

  it('reads every fact where every file is there', async () => {
    const root = fixtureRoot({
      [`${cpu}/cpu0/cpufreq/scaling_driver`]: 'acpi-cpufreq',
      [`${cpu}/cpu0/cpufreq/scaling_governor`]: 'performance',
      [`${cpu}/cpufreq/boost`]: '1',
      [`${cpu}/smt/control`]: 'on',
      [`${cpu}/smt/active`]: '1',
      'sys/kernel/mm/transparent_hugepage/enabled': 'always [madvise] never',
      'sys/kernel/mm/transparent_hugepage/defrag': '[always] defer never',
      'sys/devices/system/node/node0/cpulist': '0-3',
      'sys/devices/system/node/node1/cpulist': '4-7',
      'sys/devices/system/clocksource/clocksource0/current_clocksource': 'tsc',
      'proc/cpuinfo': flagsWith(),
    });
    const facts = await readHostFacts(undefined, root);
    expect(facts).toMatchObject({
      cpufreqDriver: 'acpi-cpufreq', cpuGovernor: 'performance', cpuBoost: true, smtControl: 'on', smtActive: true,
      thpEnabled: 'madvise', thpDefrag: 'always', numaNodes: 2, virtualized: false, hypervisor: null, clocksource: 'tsc',
    });
  });

  it('knows nothing, rather than guessing, where no file is there', async () => {
    const facts = await readHostFacts(path.join(temp, 'nowhere'), fixtureRoot({}));
    expect(Object.values(facts).every((v) => v === null)).toBe(true);
  });

  it("reads intel_pstate's no_turbo inverted where there is no boost file", async () => {
    const root = fixtureRoot({ [`${cpu}/intel_pstate/no_turbo`]: '1' });
    expect((await readHostFacts(undefined, root)).cpuBoost).toBe(false);
  });

  it('names a guest by /sys/hypervisor, else its firmware, else its paravirtual clock, else not at all', async () => {
    const clock = 'sys/devices/system/clocksource/clocksource0/available_clocksource';
    const cases: [Record<string, string>, { virtualized: boolean | null; hypervisor: string | null }][] = [
      [{ 'sys/hypervisor/type': 'xen' }, { virtualized: true, hypervisor: 'xen' }],
      [{ 'proc/cpuinfo': flagsWith('hypervisor'), 'sys/class/dmi/id/sys_vendor': 'Vendor Inc.', [clock]: 'kvm-clock tsc' }, { virtualized: true, hypervisor: 'Vendor Inc.' }],
      [{ 'proc/cpuinfo': flagsWith('hypervisor'), 'sys/class/dmi/id/product_name': 'Product' }, { virtualized: true, hypervisor: 'Product' }],
      [{ 'proc/cpuinfo': flagsWith('hypervisor'), [clock]: 'kvm-clock tsc acpi_pm' }, { virtualized: true, hypervisor: 'KVM' }],
      [{ 'proc/cpuinfo': flagsWith('hypervisor'), [clock]: 'hyperv_clocksource_tsc_page' }, { virtualized: true, hypervisor: 'Microsoft Hyper-V' }],
      // A guest nothing names: a VM of this kind without DMI and without a paravirtual clock.
      [{ 'proc/cpuinfo': flagsWith('hypervisor'), [clock]: 'tsc acpi_pm' }, { virtualized: true, hypervisor: null }],
      [{ 'proc/cpuinfo': flagsWith() }, { virtualized: false, hypervisor: null }],
      [{ 'proc/cpuinfo': 'processor\t: 0\nFeatures\t: fp asimd\n' }, { virtualized: null, hypervisor: null }],
    ];
    for (const [files, expected] of cases) expect(await readHypervisor(fixtureRoot(files)), JSON.stringify(files)).toEqual(expected);
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
