/**
 * What else happened on the machine while a run measured: CPU stolen by the hypervisor, CPU
 * used by other processes, pressure stalls and context switches, as deltas from just before the
 * workload started to just after it ended (host/interference.ts measures them). A number the
 * machine could not give is null, never a guess. Optional in a run, so results of versions
 * that did not measure it still parse.
 */
import { z } from 'zod';

/** Milliseconds over one run: a run lasts at most days, on at most thousands of CPUs. */
const ms = z.number().nonnegative().max(1e12);
const count = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);

/** Why a run counts as disturbed: the threshold each crossed is in `thresholds`. */
export const INTERFERENCE_FLAGS = ['steal', 'outsideCpu'] as const;
export type InterferenceFlag = (typeof INTERFERENCE_FLAGS)[number];

/** One /proc/pressure file's stall time over the run; `full` is absent from older kernels' cpu file. */
export const PressureDelta = z
  .object({
    someMs: ms,
    fullMs: ms.nullable(),
  })
  .strict();
export type PressureDelta = z.infer<typeof PressureDelta>;

/**
 * The thresholds as settings (FSBENCH_MAX_STEAL, FSBENCH_MAX_OUTSIDE_CPU): declared here so the
 * settings table and the runner, which reads them where the run is measured, share one schema.
 */
export const INTERFERENCE_SETTINGS = {
  maxSteal: { env: 'FSBENCH_MAX_STEAL', schema: z.coerce.number().min(0).max(1).default(0.02) },
  maxOutsideCpu: { env: 'FSBENCH_MAX_OUTSIDE_CPU', schema: z.coerce.number().min(0).max(65_536).default(0.1) },
} as const;

export const InterferenceThresholds = z
  .object({
    /** Largest share of all CPUs' time stolen before a run is flagged (FSBENCH_MAX_STEAL). */
    maxSteal: z.number().min(0).max(1),
    /** Largest CPU use by others, in CPUs, before a run is flagged (FSBENCH_MAX_OUTSIDE_CPU). */
    maxOutsideCpu: z.number().min(0).max(65_536),
  })
  .strict();
export type InterferenceThresholds = z.infer<typeof InterferenceThresholds>;

export const Interference = z
  .object({
    /** The measured span: just before the workload started to just after it ended. */
    wallMs: ms,
    /** CPUs the host's /proc/stat counts (host-wide, even in a container). */
    cpus: z.number().int().min(1).max(65_536).nullable(),
    /** Time the hypervisor ran other guests on this guest's CPUs. */
    stealMs: ms.nullable(),
    /** stealMs / (wallMs x cpus). */
    stealFraction: z.number().min(0).max(1).nullable(),
    /** Busy CPU time of the whole host: user, nice, system, irq, softirq. */
    hostBusyMs: ms.nullable(),
    /** CPU time of the measuring process itself (all its threads). */
    ownCpuMs: ms,
    /** CPU time of the child processes it waited for during the run (the native probes). */
    childrenCpuMs: ms.nullable(),
    /** hostBusyMs minus the run's own and its children's CPU time: what everything else used. */
    outsideCpuMs: ms.nullable(),
    /** outsideCpuMs / wallMs: how many CPUs others kept busy on average (0.5 = half of one CPU). */
    outsideCpuFraction: z.number().min(0).max(65_536).nullable(),
    /** Context switches on the whole host (/proc/stat ctxt). */
    hostCtxSwitches: count.nullable(),
    /** The measuring process's own context switches, voluntary and involuntary. */
    ownCtxSwitches: count,
    /** Pressure stall time (/proc/pressure); null where the kernel has no PSI. */
    pressure: z
      .object({
        cpu: PressureDelta.nullable(),
        io: PressureDelta.nullable(),
        memory: PressureDelta.nullable(),
      })
      .strict(),
    /** The thresholds in effect where the run was measured, and those it crossed. */
    thresholds: InterferenceThresholds,
    flagged: z.array(z.enum(INTERFERENCE_FLAGS)).max(INTERFERENCE_FLAGS.length),
  })
  .strict();
export type Interference = z.infer<typeof Interference>;
