/**
 * What a machine is, recorded with every run so results from different machines are compared
 * knowing what differs between them.
 */
import { z } from 'zod';

const bytes = z.number().int().nonnegative();

export const InotifyLimits = z
  .object({
    maxQueuedEvents: z.number().int().nonnegative(),
    maxUserWatches: z.number().int().nonnegative(),
    maxUserInstances: z.number().int().nonnegative(),
  })
  .strict();
export type InotifyLimits = z.infer<typeof InotifyLimits>;

export const MachineFingerprint = z
  .object({
    hostname: z.string(),
    /** The kernel's boot id: two agents with the same one share a kernel, its sysctls and its page cache. */
    bootId: z.string().nullable(),
    /** A display name from configuration (FSBENCH_MACHINE), else the hostname. */
    machine: z.string(),
    labels: z.array(z.string()).default([]),
    kernel: z.object({ release: z.string(), version: z.string(), arch: z.string() }).strict(),
    cpu: z
      .object({
        model: z.string(),
        logicalCores: z.number().int().positive(),
        physicalCores: z.number().int().positive().nullable(),
        l1dBytes: bytes.nullable(),
        l2Bytes: bytes.nullable(),
        l3Bytes: bytes.nullable(),
      })
      .strict(),
    memoryBytes: bytes,
    container: z.object({ inContainer: z.boolean(), runtime: z.string().nullable() }).strict(),
    inotifyLimits: InotifyLimits.nullable(),
    /** The filesystem type of the run's target directory (tmpfs, xfs, overlay ...), when known. */
    targetFs: z.string().nullable(),
    node: z.string(),
    fsbench: z.string(),
  })
  .strict();
export type MachineFingerprint = z.infer<typeof MachineFingerprint>;
