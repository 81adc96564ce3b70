/**
 * Collects the machine fingerprint recorded with every run. Every value read from /proc, /sys or
 * a native probe is parsed, and a value that cannot be read is null rather than guessed.
 */
import { existsSync, readFileSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { CacheInfo, InotifyLimits, MachineFingerprint } from '../contract/fingerprint.js';
import { readHostFacts } from './facts.js';
import { readBootId } from './kernel.js';
import { FSBENCH_VERSION } from './version.js';

/**
 * What `probe sysinfo` prints: cache sizes from sysconf (null where the CPU does not say). Not
 * used for the fingerprint: see cpuCaches.
 */
export const SysInfo = z
  .object({
    l1dBytes: z.number().int().nonnegative().nullable(),
    l2Bytes: z.number().int().nonnegative().nullable(),
    l3Bytes: z.number().int().nonnegative().nullable(),
    pageSize: z.number().int().positive(),
    onlineCpus: z.number().int().positive(),
    allowedCpus: z.number().int().positive(),
  })
  .strict();

const INOTIFY_DIR = '/proc/sys/fs/inotify';

async function readInt(file: string): Promise<number> {
  const n = Number((await readFile(file, 'utf8')).trim());
  if (!Number.isInteger(n)) throw new Error(`${file} does not hold an integer`);
  return n;
}

/** The inotify limits in force now for this user namespace. */
export async function readInotifyLimits(): Promise<InotifyLimits> {
  return InotifyLimits.parse({
    maxQueuedEvents: await readInt(`${INOTIFY_DIR}/max_queued_events`),
    maxUserWatches: await readInt(`${INOTIFY_DIR}/max_user_watches`),
    maxUserInstances: await readInt(`${INOTIFY_DIR}/max_user_instances`),
  });
}

function physicalCores(cpuinfo: string): number | null {
  const cores = new Set<string>();
  for (const block of cpuinfo.split('\n\n')) {
    const phys = /^physical id\s*:\s*(\d+)/m.exec(block)?.[1];
    const core = /^core id\s*:\s*(\d+)/m.exec(block)?.[1];
    if (phys !== undefined && core !== undefined) cores.add(`${phys}:${core}`);
  }
  return cores.size > 0 ? cores.size : null;
}

function containerRuntime(): string | null {
  if (existsSync('/.dockerenv')) return 'docker';
  if (existsSync('/run/.containerenv')) return 'podman';
  try {
    const cgroup = readFileSync('/proc/1/cgroup', 'utf8');
    const m = /(docker|kubepods|containerd|lxc|libpod)/.exec(cgroup);
    if (m?.[1]) return m[1];
  } catch {
    // No /proc/1/cgroup readable: assume a host.
  }
  return null;
}


/** Where the kernel describes the caches CPU 0 sees, one `indexN` directory per cache. */
export const CPU0_CACHES = '/sys/devices/system/cpu/cpu0/cache';

/** `32K`, `32768K`, `1M`, as sysfs spells cache sizes (binary units). */
function cacheSize(text: string): number | null {
  const m = /^(\d+)([KMG]?)$/.exec(text.trim());
  if (!m?.[1]) return null;
  const unit = m[2] === 'K' ? 1024 : m[2] === 'M' ? 1024 ** 2 : m[2] === 'G' ? 1024 ** 3 : 1;
  return Number(m[1]) * unit;
}

/**
 * The caches CPU 0 sees, from the kernel's topology: each cache's own size, which is what a
 * working set competes for. glibc's sysconf(_SC_LEVEL3_CACHE_SIZE) can say otherwise (268435456
 * on a 2-vCPU EPYC VM whose sysfs and lscpu say 32 MiB per instance). Empty when sysfs has
 * nothing (some VMs and architectures); a cache whose files cannot be read is left out.
 */
export async function readCaches(dir = CPU0_CACHES): Promise<CacheInfo[]> {
  let names: string[];
  try {
    names = (await readdir(dir)).filter((n) => /^index\d+$/.test(n)).sort((a, b) => Number(a.slice(5)) - Number(b.slice(5)));
  } catch {
    return [];
  }
  const caches: CacheInfo[] = [];
  for (const name of names) {
    const read = (file: string) => readFile(path.join(dir, name, file), 'utf8').then((t) => t.trim(), () => null);
    const [level, type, size, shared] = await Promise.all([read('level'), read('type'), read('size'), read('shared_cpu_list')]);
    const parsed = CacheInfo.safeParse({ level: Number(level), type, bytes: size === null ? null : cacheSize(size), sharedCpus: shared });
    if (parsed.success) caches.push(parsed.data);
  }
  return caches;
}

/** The size of the level-`level` data or unified cache, if the kernel lists one. */
function cacheBytes(caches: readonly CacheInfo[], level: number): number | null {
  return caches.find((c) => c.level === level && c.type !== 'Instruction')?.bytes ?? null;
}

/**
 * The fingerprint's cache fields, from the kernel's topology under `dir` only. Where sysfs lists
 * no caches the sizes are unknown (null, cacheSource null): glibc's sysconf still answers there,
 * but from CPUID leaves a hypervisor fills as it likes (an L3 of 508 MiB on a 2-vCPU VM whose
 * twin shows 32 MiB in sysfs), and a knee judged against that would be judged against a guess.
 */
export async function cpuCaches(dir = CPU0_CACHES): Promise<Pick<MachineFingerprint['cpu'], 'l1dBytes' | 'l2Bytes' | 'l3Bytes' | 'cacheSource' | 'caches'>> {
  const caches = await readCaches(dir);
  return {
    l1dBytes: cacheBytes(caches, 1),
    l2Bytes: cacheBytes(caches, 2),
    l3Bytes: cacheBytes(caches, 3),
    cacheSource: caches.length > 0 ? 'sysfs' : null,
    caches,
  };
}

export interface Identity {
  /** Display name (FSBENCH_MACHINE); defaults to the hostname. */
  readonly machine?: string | undefined;
  readonly labels?: readonly string[] | undefined;
}

/** `scratchDir`: the directory runs write under, whose storage the facts then describe. */
export async function collectFingerprint(identity: Identity = {}, scratchDir?: string): Promise<MachineFingerprint> {
  const cpus = os.cpus();
  const cpuinfo = await readFile('/proc/cpuinfo', 'utf8').catch(() => '');
  const bootId = await readBootId();
  const hostname = os.hostname();
  return MachineFingerprint.parse({
    hostname,
    bootId,
    machine: identity.machine ?? hostname,
    labels: [...(identity.labels ?? [])],
    kernel: { release: os.release(), version: os.version(), arch: os.arch() },
    cpu: {
      model: cpus[0]?.model.trim() ?? 'unknown',
      logicalCores: Math.max(1, cpus.length),
      physicalCores: physicalCores(cpuinfo),
      ...(await cpuCaches()),
    },
    memoryBytes: os.totalmem(),
    container: { inContainer: containerRuntime() !== null, runtime: containerRuntime() },
    inotifyLimits: await readInotifyLimits().catch(() => null),
    targetFs: null,
    facts: await readHostFacts(scratchDir),
    node: process.version,
    fsbench: FSBENCH_VERSION,
  });
}
