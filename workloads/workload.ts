/**
 * What a workload implementation provides to the runner. The contract (contract/workloads)
 * says what a workload's parameters and metrics are; this says how it runs on a host.
 */
import { FsbenchError } from '../contract/errors.js';
import type { Cell } from '../contract/matrix.js';
import type { InotifyLimits } from '../contract/fingerprint.js';
import type { Histogram } from '../contract/result.js';
import type { Journal } from '../host/journal.js';

/**
 * A cell this host cannot measure at all, found only when the run tries (the kernel refuses a
 * fanotify mark on this filesystem): the run is `skipped` with the reason, like a combination the
 * contract refuses up front, rather than `failed`, which would say something went wrong.
 */
export class WorkloadSkipped extends FsbenchError {
  constructor(readonly skipReason: string) {
    super('FS_REFUSED', skipReason);
  }
}

export interface RunContext {
  /** Where runs create their files, images and mounts (FSBENCH_SCRATCH). */
  readonly scratchDir: string;
  /** Host-change journal: every mount, loop device, sysctl and scratch path goes through it. */
  readonly journal: Journal;
  /** Aborted on SIGINT/SIGTERM or cancellation: stop measuring, clean up, throw CANCELLED. */
  readonly signal: AbortSignal;
  readonly log: (line: string) => void;
  /**
   * Runs a cell inside a fresh container shaped by its `container.*` parameters, when this
   * process can reach a Docker engine; without it such cells fail with SANDBOX_UNAVAILABLE.
   */
  readonly sandbox?: WorkloadRunner;
}

export interface WorkloadOutcome {
  readonly metrics: Record<string, number | null>;
  readonly histograms?: Record<string, Histogram>;
  readonly info?: Record<string, string | number | boolean | null>;
  /** The kernel limits the run ran under, for workloads that depend on them. */
  readonly limits: InotifyLimits | null;
  /** The filesystem type the run measured on, for the fingerprint. */
  readonly targetFs: string | null;
}

export interface WorkloadRunner {
  /**
   * Runs one repetition of a cell. Throws an FsbenchError (with a stable code and an actionable
   * message) when the run cannot be measured; must leave the host as it found it either way.
   */
  run(cell: Cell, ctx: RunContext): Promise<WorkloadOutcome>;
}
