/**
 * What a machine is, recorded with every run so results from different machines are compared
 * knowing what differs between them.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';

const bytes = z.number().int().nonnegative();
/** Free text a machine reports about itself (a CPU model, a kernel version): bounded, one line. */
const fact = z.string().max(256).regex(/^\P{Cc}*$/u, 'must be one line without control characters');

/**
 * A machine's display name (FSBENCH_MACHINE, else its hostname): a hostname's characters, so it
 * reads the same in a table, a URL, a file name and a log line.
 */
export const MachineName = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$/, 'must be 1-253 letters, digits, dots, dashes or underscores');

/** A label a matrix's placement can select (FSBENCH_LABELS). */
export const Label = z.string().regex(/^[A-Za-z0-9._:-]{1,64}$/, 'must be 1-64 letters, digits or . _ : -');

export const InotifyLimits = z
  .object({
    maxQueuedEvents: z.number().int().nonnegative(),
    maxUserWatches: z.number().int().nonnegative(),
    maxUserInstances: z.number().int().nonnegative(),
  })
  .strict();
export type InotifyLimits = z.infer<typeof InotifyLimits>;

/**
 * The Docker part of a machine fingerprint: which engine an agent's runs went through, with
 * which storage driver and cgroup version, and what its own container was allowed to use. Two
 * agents on one machine with different CPU or memory limits measure different things.
 */
export const DockerFingerprint = z
  .object({
    engineVersion: fact,
    apiVersion: fact,
    /** overlay2, btrfs, zfs, vfs ...: what `container.storage: overlay` actually measures. */
    storageDriver: fact,
    cgroupVersion: z.enum(['1', '2']).nullable(),
    cgroupDriver: fact.nullable(),
    /** The agent's own container; null when the agent runs on the host. */
    self: z
      .object({
        containerId: fact,
        image: fact,
        /** CPUs the container may use (NanoCpus, else quota / period); null = no limit. */
        cpuLimit: z.number().positive().nullable(),
        /** CPUs it is pinned to (`--cpuset-cpus`), null = any. */
        cpuset: fact.nullable(),
        memoryLimitBytes: z.number().int().positive().nullable(),
      })
      .strict()
      .nullable(),
  })
  .strict();
export type DockerFingerprint = z.infer<typeof DockerFingerprint>;

/** One CPU cache as the kernel's topology describes it (sysfs `cpu0/cache/indexN`). */
export const CacheInfo = z
  .object({
    level: z.number().int().min(1).max(8),
    type: z.enum(['Data', 'Instruction', 'Unified']),
    /** This instance's size: what the CPUs in `sharedCpus` share. */
    bytes: bytes,
    /** The CPUs sharing this instance, as the kernel lists them (`0-1`, `0,2`). */
    sharedCpus: z.string().regex(/^[0-9,-]{1,256}$/),
  })
  .strict();
export type CacheInfo = z.infer<typeof CacheInfo>;

export const MachineFingerprint = z
  .object({
    hostname: MachineName,
    /** The kernel's boot id: two agents with the same one share a kernel, its sysctls and its page cache. */
    bootId: fact.nullable(),
    /** A display name from configuration (FSBENCH_MACHINE), else the hostname. */
    machine: MachineName,
    labels: z.array(Label).max(32).default([]),
    kernel: z.object({ release: fact, version: fact, arch: fact }).strict(),
    cpu: z
      .object({
        model: fact,
        logicalCores: z.number().int().positive(),
        physicalCores: z.number().int().positive().nullable(),
        l1dBytes: bytes.nullable(),
        l2Bytes: bytes.nullable(),
        l3Bytes: bytes.nullable(),
        /** Where the three sizes above came from: the kernel's topology, or glibc's sysconf where sysfs has nothing. */
        cacheSource: z.enum(['sysfs', 'sysconf']).nullable().default(null),
        caches: z.array(CacheInfo).max(16).default([]),
      })
      .strict(),
    memoryBytes: bytes,
    container: z
      .object({
        inContainer: z.boolean(),
        runtime: fact.nullable(),
        /** The Docker engine an agent with the socket runs containers through; null without one. */
        docker: DockerFingerprint.nullable().default(null),
      })
      .strict(),
    inotifyLimits: InotifyLimits.nullable(),
    /** The filesystem type of the run's target directory (tmpfs, xfs, overlay ...), when known. */
    targetFs: fact.nullable(),
    node: fact,
    fsbench: fact,
  })
  .strict();
export type MachineFingerprint = z.infer<typeof MachineFingerprint>;

/**
 * A fingerprint's name by content: the first 16 hex digits of the SHA-256 of its JSON text.
 * Stored runs point at their fingerprint by it, and agents name theirs by it in their reports.
 */
export function fingerprintHash(json: string): string {
  return createHash('sha256').update(json).digest('hex').slice(0, 16);
}
