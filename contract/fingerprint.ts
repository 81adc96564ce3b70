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

/**
 * The storage behind a run's scratch directory: the mount that holds it (the longest mount point
 * over it in /proc/self/mountinfo) and the block device behind that mount. The device fields are
 * null where there is no block device (tmpfs, overlay, a network filesystem) or sysfs does not say.
 */
export const ScratchStorage = z
  .object({
    dir: fact,
    mountPoint: fact,
    fsType: fact,
    /** The mount's source as mountinfo names it (/dev/vda, tmpfs, overlay). */
    source: fact,
    /** The per-mount options followed by the filesystem's own (super) options, as findmnt lists them. */
    mountOptions: z.array(fact).max(64),
    /** The whole disk (vda, nvme0n1), or a loop or device-mapper device (loop3, dm-0). */
    device: fact.nullable(),
    /** The partition the filesystem is on, when it is on one (nvme0n1p2). */
    partition: fact.nullable(),
    /** A loop device's backing file. */
    backingFile: fact.nullable(),
    /** A device-mapper device's underlying whole disks. */
    slaves: z.array(fact).max(32),
    rotational: z.boolean().nullable(),
    model: fact.nullable(),
    /** The I/O scheduler in use (the bracketed one of queue/scheduler). */
    scheduler: fact.nullable(),
  })
  .strict();
export type ScratchStorage = z.infer<typeof ScratchStorage>;

/**
 * Kernel and platform settings that move benchmark numbers without showing in the CPU model:
 * frequency scaling, SMT, transparent huge pages, NUMA, virtualisation, the clock, the scratch
 * directory's storage and the cgroup limits the process runs under. Each is null when it could
 * not be read; nothing is guessed.
 */
export const HostFacts = z
  .object({
    /** cpufreq's scaling driver and governor of CPU 0; null without cpufreq (many VMs). */
    cpufreqDriver: fact.nullable(),
    cpuGovernor: fact.nullable(),
    /** Turbo/boost allowed (cpufreq/boost, or intel_pstate's no_turbo inverted). */
    cpuBoost: z.boolean().nullable(),
    /** The kernel's SMT control (on, off, forceoff, notsupported, notimplemented) and whether siblings run. */
    smtControl: fact.nullable(),
    smtActive: z.boolean().nullable(),
    /** Transparent huge pages: the selected mode of `enabled` and of `defrag`. */
    thpEnabled: fact.nullable(),
    thpDefrag: fact.nullable(),
    numaNodes: z.number().int().positive().nullable(),
    /**
     * true: a guest (the CPU's hypervisor flag or /sys/hypervisor); false: bare metal (an x86
     * CPU flag list without the flag); null: cannot tell (no flag list, as on arm64).
     */
    virtualized: z.boolean().nullable(),
    /** Who the hypervisor is, when the kernel or firmware says (KVM, Amazon EC2, xen); null on bare metal or when unnamed. */
    hypervisor: fact.nullable(),
    clocksource: fact.nullable(),
    /** null when no scratch directory was given, or its mount could not be found. */
    scratch: ScratchStorage.nullable(),
    /** Which cgroup hierarchy the limits were read from; null when none could be read (limits then unknown, not unlimited). */
    cgroupVersion: z.enum(['1', '2']).nullable(),
    /** CPUs the process's cgroup (and its ancestors) allow; null = no limit, or unknown without a cgroupVersion. */
    cpuLimit: z.number().positive().nullable(),
    memoryLimitBytes: z.number().int().positive().nullable(),
  })
  .strict();
export type HostFacts = z.infer<typeof HostFacts>;

/** What a fingerprint from before these facts were recorded holds: nothing known. */
export const UNKNOWN_HOST_FACTS: HostFacts = {
  cpufreqDriver: null,
  cpuGovernor: null,
  cpuBoost: null,
  smtControl: null,
  smtActive: null,
  thpEnabled: null,
  thpDefrag: null,
  numaNodes: null,
  virtualized: null,
  hypervisor: null,
  clocksource: null,
  scratch: null,
  cgroupVersion: null,
  cpuLimit: null,
  memoryLimitBytes: null,
};

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
        /**
         * Where the three sizes above came from: the kernel's topology, or null where it lists no
         * caches (the sizes are then null too). `sysconf` is glibc's unverified figure, which
         * fingerprints recorded before this took where sysfs had nothing; reports say so where a
         * knee is judged against it.
         */
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
    /** Older stored fingerprints have none: they parse with every fact unknown. */
    facts: HostFacts.default(() => ({ ...UNKNOWN_HOST_FACTS })),
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

/**
 * Fingerprints a process keeps in memory: a fleet of 1,000 hosts has at least as many, and a cache
 * of 1,000 cleared when full fetched, parsed and stored them all again, batch after batch.
 */
export const FINGERPRINTS_KEPT = 4096;

/** Sets `key` in a cache of at most FINGERPRINTS_KEPT entries, dropping the oldest. */
export function keepFingerprint<V>(cache: Map<string, V>, key: string, value: V): void {
  if (!cache.has(key) && cache.size >= FINGERPRINTS_KEPT) {
    const oldest = cache.keys().next();
    if (oldest.done !== true) cache.delete(oldest.value);
  }
  cache.set(key, value);
}
