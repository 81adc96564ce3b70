/**
 * The kernel and platform facts of the machine fingerprint (contract/fingerprint.ts `HostFacts`),
 * read from /proc and /sys. Every reader takes the root of the tree it reads (`/` by default) so
 * a test can point it at a fixture tree; a file that is absent or does not hold what the kernel
 * writes there gives null, never a guess.
 */
import { readdir, readFile, realpath } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { HostFacts, ScratchStorage } from '../contract/fingerprint.js';

const oneLine = z.string().min(1).max(256).regex(/^\P{Cc}*$/u);

/** A sysfs or procfs file's text, trimmed; null when it cannot be read. */
async function readText(file: string): Promise<string | null> {
  try {
    return (await readFile(file, 'utf8')).trim();
  } catch {
    return null;
  }
}

/** A file holding one short line (a driver's name, a mode): null when absent, empty or not one line. */
async function readLine(file: string): Promise<string | null> {
  const parsed = oneLine.safeParse(await readText(file));
  return parsed.success ? parsed.data : null;
}

/** A `0`/`1` flag file. */
async function readFlag(file: string): Promise<boolean | null> {
  const text = await readText(file);
  return text === '1' ? true : text === '0' ? false : null;
}

/** The selected choice of a sysfs list such as `always [madvise] never`; a lone word is itself. */
export function bracketed(text: string | null): string | null {
  if (text === null) return null;
  const m = /\[([^\]\s]+)\]/.exec(text);
  if (m?.[1] !== undefined) return oneLine.safeParse(m[1]).success ? m[1] : null;
  return /^[\w+-]{1,64}$/.test(text) ? text : null;
}

const sys = (root: string, ...parts: string[]) => path.join(root, ...parts);

export interface CpuFreq {
  readonly driver: string | null;
  readonly governor: string | null;
  readonly boost: boolean | null;
}

/** cpufreq of CPU 0 and the boost switch: null throughout where the kernel has no cpufreq (most VMs). */
export async function readCpuFreq(root = '/'): Promise<CpuFreq> {
  const cpu = sys(root, 'sys/devices/system/cpu');
  const driver = await readLine(path.join(cpu, 'cpu0/cpufreq/scaling_driver'));
  const governor = await readLine(path.join(cpu, 'cpu0/cpufreq/scaling_governor'));
  let boost = await readFlag(path.join(cpu, 'cpufreq/boost'));
  if (boost === null) {
    // intel_pstate has no boost file: it says the opposite, in no_turbo.
    const noTurbo = await readFlag(path.join(cpu, 'intel_pstate/no_turbo'));
    boost = noTurbo === null ? null : !noTurbo;
  }
  return { driver, governor, boost };
}

export async function readSmt(root = '/'): Promise<{ control: string | null; active: boolean | null }> {
  const dir = sys(root, 'sys/devices/system/cpu/smt');
  return { control: await readLine(path.join(dir, 'control')), active: await readFlag(path.join(dir, 'active')) };
}

export async function readThp(root = '/'): Promise<{ enabled: string | null; defrag: string | null }> {
  const dir = sys(root, 'sys/kernel/mm/transparent_hugepage');
  return { enabled: bracketed(await readText(path.join(dir, 'enabled'))), defrag: bracketed(await readText(path.join(dir, 'defrag'))) };
}

/** NUMA nodes the kernel knows; null where it exposes no node directory (CONFIG_NUMA off). */
export async function readNumaNodes(root = '/'): Promise<number | null> {
  try {
    const n = (await readdir(sys(root, 'sys/devices/system/node'))).filter((name) => /^node\d+$/.test(name)).length;
    return n > 0 ? n : null;
  } catch {
    return null;
  }
}

export async function readClocksource(root = '/'): Promise<string | null> {
  return readLine(sys(root, 'sys/devices/system/clocksource/clocksource0/current_clocksource'));
}

/** Paravirtual clocks only a given hypervisor offers its guests. */
const PARAVIRT_CLOCKS: readonly [RegExp, string][] = [
  [/^kvm-clock$/, 'KVM'],
  [/^hyperv_clocksource/, 'Microsoft Hyper-V'],
  [/^xen$/, 'Xen'],
];

/**
 * Whether this is a guest, and of whom. "none" and "unknown" are told apart by the x86 CPU flag
 * list: flags without `hypervisor` (and no /sys/hypervisor) is bare metal (virtualized false,
 * hypervisor null); no flag list at all (arm64, a hidden /proc) is unknown (virtualized null).
 * A guest is named by /sys/hypervisor/type, else its firmware's vendor (DMI sys_vendor, else
 * product_name), else the paravirtual clock the hypervisor offers; a guest none of these name
 * keeps hypervisor null.
 */
export async function readHypervisor(root = '/'): Promise<{ virtualized: boolean | null; hypervisor: string | null }> {
  const type = await readLine(sys(root, 'sys/hypervisor/type'));
  if (type !== null) return { virtualized: true, hypervisor: type };
  const cpuinfo = await readText(sys(root, 'proc/cpuinfo'));
  const flags = cpuinfo === null ? undefined : /^flags\s*:(.*)$/m.exec(cpuinfo)?.[1];
  if (flags === undefined) return { virtualized: null, hypervisor: null };
  if (!flags.split(/\s+/).includes('hypervisor')) return { virtualized: false, hypervisor: null };
  const dmi = sys(root, 'sys/class/dmi/id');
  const vendor = (await readLine(path.join(dmi, 'sys_vendor'))) ?? (await readLine(path.join(dmi, 'product_name')));
  if (vendor !== null) return { virtualized: true, hypervisor: vendor };
  const clocks = (await readText(sys(root, 'sys/devices/system/clocksource/clocksource0/available_clocksource')))?.split(/\s+/) ?? [];
  const byClock = PARAVIRT_CLOCKS.find(([re]) => clocks.some((c) => re.test(c)))?.[1] ?? null;
  return { virtualized: true, hypervisor: byClock };
}

// ---- mounts --------------------------------------------------------------------------------

export interface MountInfo {
  readonly majorMinor: string;
  /** The directory of the filesystem this mount shows (not `/` for bind mounts and cgroup namespaces). */
  readonly root: string;
  readonly mountPoint: string;
  readonly options: readonly string[];
  readonly fsType: string;
  readonly source: string;
  readonly superOptions: readonly string[];
}

/** mountinfo escapes space, tab, newline and backslash in paths as octal. */
function unescapeMount(text: string): string {
  return text.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

/** One line of /proc/PID/mountinfo (proc(5)); null when it is not one. */
export function parseMountInfoLine(line: string): MountInfo | null {
  const [left, right] = line.split(' - ');
  if (left === undefined || right === undefined) return null;
  const l = left.split(' ');
  const r = right.split(' ');
  const [majorMinor, root, mountPoint, options] = [l[2], l[3], l[4], l[5]];
  const [fsType, source, superOptions] = [r[0], r[1], r[2]];
  if (majorMinor === undefined || !/^\d+:\d+$/.test(majorMinor) || root === undefined || mountPoint === undefined || options === undefined) return null;
  if (fsType === undefined || source === undefined) return null;
  return {
    majorMinor,
    root: unescapeMount(root),
    mountPoint: unescapeMount(mountPoint),
    options: options.split(','),
    fsType,
    source: unescapeMount(source),
    superOptions: superOptions === undefined ? [] : superOptions.split(','),
  };
}

export async function readMountInfo(root = '/'): Promise<MountInfo[]> {
  const text = await readText(sys(root, 'proc/self/mountinfo'));
  return (text ?? '').split('\n').flatMap((line) => parseMountInfoLine(line) ?? []);
}

function under(dir: string, mountPoint: string): boolean {
  return mountPoint === '/' || dir === mountPoint || dir.startsWith(`${mountPoint}/`);
}

/** The mount holding `dir` (an absolute, resolved path): the longest mount point over it, the last mounted on ties (it hides the others). */
export function mountOf(mounts: readonly MountInfo[], dir: string): MountInfo | null {
  let best: MountInfo | null = null;
  for (const m of mounts) if (under(dir, m.mountPoint) && (best === null || m.mountPoint.length >= best.mountPoint.length)) best = m;
  return best;
}

/** Per-mount options, then the filesystem's own, each once (`rw` is in both), as findmnt merges them. */
function mergedOptions(m: MountInfo): string[] {
  const out: string[] = [];
  for (const o of [...m.options, ...m.superOptions]) if (o !== '' && !out.includes(o) && !((o === 'rw' || o === 'ro') && out.some((x) => x === 'rw' || x === 'ro'))) out.push(o);
  // An option too long to be a fact (overlay's lowerdir=...) keeps its name.
  return out.slice(0, 64).map((o) => (oneLine.safeParse(o).success ? o : `${o.split('=')[0]?.slice(0, 200) ?? ''}=…`));
}

// ---- block devices -------------------------------------------------------------------------

interface Disk {
  readonly device: string;
  readonly partition: string | null;
  readonly dir: string;
}

/** A block device's sysfs directory, walked up from a partition to its whole disk. */
async function wholeDisk(deviceDir: string): Promise<Disk | null> {
  let dir: string;
  try {
    dir = await realpath(deviceDir);
  } catch {
    return null;
  }
  const name = path.basename(dir);
  if ((await readText(path.join(dir, 'partition'))) !== null) return { device: path.basename(path.dirname(dir)), partition: name, dir: path.dirname(dir) };
  return { device: name, partition: null, dir };
}

async function diskFacts(dir: string): Promise<{ rotational: boolean | null; model: string | null; scheduler: string | null }> {
  return {
    rotational: await readFlag(path.join(dir, 'queue/rotational')),
    model: await readLine(path.join(dir, 'device/model')),
    scheduler: bracketed(await readText(path.join(dir, 'queue/scheduler'))),
  };
}

/** A device-mapper device's underlying whole disks, through stacked dm devices (LUKS on LVM). */
async function dmSlaves(dir: string, root: string, depth = 0): Promise<Disk[]> {
  let names: string[];
  try {
    names = (await readdir(path.join(dir, 'slaves'))).sort();
  } catch {
    return [];
  }
  const out: Disk[] = [];
  for (const name of names) {
    const disk = await wholeDisk(sys(root, 'sys/class/block', name));
    if (disk === null) continue;
    if (depth < 8 && (await readText(path.join(disk.dir, 'dm/name'))) !== null) out.push(...(await dmSlaves(disk.dir, root, depth + 1)));
    else if (!out.some((d) => d.device === disk.device)) out.push(disk);
  }
  return out;
}

/** One value for several disks: theirs when they agree, all of them joined when they do not. */
function joined(values: readonly (string | null)[]): string | null {
  const known = [...new Set(values.filter((v): v is string => v !== null))];
  return known.length === 0 ? null : known.join('+').slice(0, 256);
}

type DeviceFacts = Pick<ScratchStorage, 'device' | 'partition' | 'backingFile' | 'slaves' | 'rotational' | 'model' | 'scheduler'>;

const NO_DEVICE: DeviceFacts = { device: null, partition: null, backingFile: null, slaves: [], rotational: null, model: null, scheduler: null };

/** The block device behind a mount: by its device number, else (btrfs shows an anonymous one) by its source's name. */
async function mountDevice(m: MountInfo, root: string): Promise<DeviceFacts> {
  let disk: Disk | null = null;
  if (!m.majorMinor.startsWith('0:')) disk = await wholeDisk(sys(root, 'sys/dev/block', m.majorMinor));
  if (disk === null && m.source.startsWith('/dev/')) {
    const name = await realpath(sys(root, m.source)).then((p) => path.basename(p), () => null);
    if (name !== null) disk = await wholeDisk(sys(root, 'sys/class/block', name));
  }
  if (disk === null) return NO_DEVICE;
  const own = await diskFacts(disk.dir);
  const backingFile = disk.device.startsWith('loop') ? await readLine(path.join(disk.dir, 'loop/backing_file')) : null;
  const slaves = await dmSlaves(disk.dir, root);
  if (slaves.length === 0) return { device: disk.device, partition: disk.partition, backingFile, slaves: [], ...own };
  // dm's own queue has no scheduler and no model: the disks under it do.
  const under = await Promise.all(slaves.map((s) => diskFacts(s.dir)));
  return {
    device: disk.device,
    partition: disk.partition,
    backingFile,
    slaves: slaves.map((s) => s.device).slice(0, 32),
    rotational: own.rotational ?? (under.some((u) => u.rotational === null) ? null : under.some((u) => u.rotational === true)),
    model: joined(under.map((u) => u.model)),
    scheduler: joined(under.map((u) => u.scheduler)),
  };
}

/** The storage behind `dir`: its mount, filesystem and block device; null when no mount holds it. */
export async function readScratchStorage(dir: string, root = '/'): Promise<ScratchStorage | null> {
  const resolved = await realpath(dir).catch(() => path.resolve(dir));
  const m = mountOf(await readMountInfo(root), resolved);
  if (m === null) return null;
  const parsed = ScratchStorage.safeParse({
    dir: resolved,
    mountPoint: m.mountPoint,
    fsType: m.fsType,
    source: m.source,
    mountOptions: mergedOptions(m),
    ...(await mountDevice(m, root)),
  });
  return parsed.success ? parsed.data : null;
}

// ---- cgroup limits -------------------------------------------------------------------------

export interface CgroupLimits {
  readonly version: '1' | '2' | null;
  readonly cpuLimit: number | null;
  readonly memoryLimitBytes: number | null;
}

/** `/proc/self/cgroup`: per hierarchy, its controllers (empty for v2) and this process's path. */
function parseProcCgroup(text: string): { controllers: string[]; path: string }[] {
  return text.split('\n').flatMap((line) => {
    const m = /^\d+:([^:]*):(\/.*)$/.exec(line);
    return m?.[1] === undefined || m[2] === undefined ? [] : [{ controllers: m[1] === '' ? [] : m[1].split(','), path: m[2] }];
  });
}

/** The directories from the process's cgroup up to the hierarchy's root as mounted: each may hold a limit. */
function cgroupDirs(mount: MountInfo, cgroupPath: string, root: string): string[] | null {
  const base = mount.root === '/' ? cgroupPath : cgroupPath === mount.root || cgroupPath.startsWith(`${mount.root}/`) ? cgroupPath.slice(mount.root.length) : null;
  if (base === null) return null;
  const dirs: string[] = [];
  for (let rel = path.posix.normalize(`/${base}`); ; rel = path.posix.dirname(rel)) {
    dirs.push(sys(root, mount.mountPoint, rel));
    if (rel === '/') return dirs;
  }
}

const digits = /^\d+$/;

/** v2 `cpu.max`: `max 100000` or `QUOTA PERIOD`. */
function cpuMaxLimit(text: string | null): number | null {
  const m = /^(max|\d+) (\d+)$/.exec(text ?? '');
  if (m?.[1] === undefined || m[1] === 'max' || m[2] === undefined || Number(m[2]) === 0) return null;
  return Number(m[1]) / Number(m[2]);
}

/** A byte limit; `max`, and v1's "unlimited" (PAGE_COUNTER_MAX pages, about 2^63 bytes, past exact doubles), are none. */
function byteLimit(text: string | null): number | null {
  if (text === null || !digits.test(text)) return null;
  const n = Number(text);
  return Number.isSafeInteger(n) && n > 0 ? n : null;
}

/** The smallest limit along the path: a parent's limit binds its children. */
async function smallest(dirs: readonly string[], read: (dir: string) => Promise<number | null>): Promise<number | null> {
  let min: number | null = null;
  for (const dir of dirs) {
    const v = await read(dir);
    if (v !== null && (min === null || v < min)) min = v;
  }
  return min;
}

async function v1CpuLimit(dir: string): Promise<number | null> {
  const quota = await readText(path.join(dir, 'cpu.cfs_quota_us'));
  const period = await readText(path.join(dir, 'cpu.cfs_period_us'));
  if (quota === null || period === null || !digits.test(quota) || !digits.test(period) || Number(period) === 0) return null;
  return Number(quota) / Number(period);
}

/**
 * The CPU and memory limits of this process's cgroup and its ancestors. Each controller is read
 * from the v1 hierarchy it is bound to, else from the unified (v2) one: on a hybrid host the
 * controllers live in v1 and the v2 mount holds none.
 */
export async function readCgroupLimits(root = '/'): Promise<CgroupLimits> {
  const text = await readText(sys(root, 'proc/self/cgroup'));
  if (text === null) return { version: null, cpuLimit: null, memoryLimitBytes: null };
  const groups = parseProcCgroup(text);
  const mounts = await readMountInfo(root);
  const v1Dirs = (controller: string): string[] | null => {
    const g = groups.find((x) => x.controllers.includes(controller));
    const m = mounts.find((x) => x.fsType === 'cgroup' && x.superOptions.includes(controller));
    return g && m ? cgroupDirs(m, g.path, root) : null;
  };
  const unified = groups.find((x) => x.controllers.length === 0);
  const v2Mount = mounts.find((x) => x.fsType === 'cgroup2');
  const v2Dirs = unified && v2Mount ? cgroupDirs(v2Mount, unified.path, root) : null;
  const cpuV1 = v1Dirs('cpu');
  const memV1 = v1Dirs('memory');
  const cpuLimit = cpuV1
    ? await smallest(cpuV1, v1CpuLimit)
    : v2Dirs ? await smallest(v2Dirs, async (d) => cpuMaxLimit(await readText(path.join(d, 'cpu.max')))) : null;
  const memoryLimitBytes = memV1
    ? await smallest(memV1, async (d) => byteLimit(await readText(path.join(d, 'memory.limit_in_bytes'))))
    : v2Dirs ? await smallest(v2Dirs, async (d) => byteLimit(await readText(path.join(d, 'memory.max')))) : null;
  const version = cpuV1 || memV1 ? '1' : v2Dirs ? '2' : null;
  return { version, cpuLimit, memoryLimitBytes };
}

// ---- all of them ---------------------------------------------------------------------------

/** Every fact, with the storage of `scratchDir` when one is given. */
export async function readHostFacts(scratchDir?: string, root = '/'): Promise<HostFacts> {
  const [freq, smt, thp, numaNodes, hv, clocksource, cgroup, scratch] = await Promise.all([
    readCpuFreq(root),
    readSmt(root),
    readThp(root),
    readNumaNodes(root),
    readHypervisor(root),
    readClocksource(root),
    readCgroupLimits(root),
    scratchDir === undefined ? null : readScratchStorage(scratchDir, root),
  ]);
  return HostFacts.parse({
    cpufreqDriver: freq.driver,
    cpuGovernor: freq.governor,
    cpuBoost: freq.boost,
    smtControl: smt.control,
    smtActive: smt.active,
    thpEnabled: thp.enabled,
    thpDefrag: thp.defrag,
    numaNodes,
    virtualized: hv.virtualized,
    hypervisor: hv.hypervisor,
    clocksource,
    scratch,
    cgroupVersion: cgroup.version,
    cpuLimit: cgroup.cpuLimit,
    memoryLimitBytes: cgroup.memoryLimitBytes,
  });
}
