/**
 * Collects the machine fingerprint recorded with every run. Every value read from /proc, /sys or
 * a native probe is parsed, and a value that cannot be read is null rather than guessed.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { z } from 'zod';
import { InotifyLimits, MachineFingerprint } from '../contract/fingerprint.js';
import { readBootId } from './kernel.js';
import { nativeProgram, PACKAGE_ROOT } from './native.js';

const exec = promisify(execFile);

/** What `probe sysinfo` prints: cache sizes from sysconf (null where the CPU does not say). */
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


async function sysInfo(): Promise<z.infer<typeof SysInfo> | null> {
  try {
    const { stdout } = await exec(nativeProgram('probe'), ['sysinfo']);
    return SysInfo.parse(JSON.parse(stdout));
  } catch {
    return null;
  }
}

export interface Identity {
  /** Display name (FSBENCH_MACHINE); defaults to the hostname. */
  readonly machine?: string | undefined;
  readonly labels?: readonly string[] | undefined;
}

function fsbenchVersion(): string {
  try {
    const pkg = z.object({ version: z.string() }).parse(JSON.parse(readFileSync(path.join(PACKAGE_ROOT, 'package.json'), 'utf8')));
    return pkg.version;
  } catch {
    return 'unknown';
  }
}

export async function collectFingerprint(identity: Identity = {}): Promise<MachineFingerprint> {
  const cpus = os.cpus();
  const cpuinfo = await readFile('/proc/cpuinfo', 'utf8').catch(() => '');
  const bootId = await readBootId();
  const info = await sysInfo();
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
      l1dBytes: info?.l1dBytes ?? null,
      l2Bytes: info?.l2Bytes ?? null,
      l3Bytes: info?.l3Bytes ?? null,
    },
    memoryBytes: os.totalmem(),
    container: { inContainer: containerRuntime() !== null, runtime: containerRuntime() },
    inotifyLimits: await readInotifyLimits().catch(() => null),
    targetFs: null,
    node: process.version,
    fsbench: fsbenchVersion(),
  });
}
