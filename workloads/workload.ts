/**
 * What a workload's host folder (`workloads/<name>/`, plugged in by one line in
 * runner/workloads.ts) provides: how it runs on a host, and what a run takes from the host. The
 * contract folder (contract/workloads/<name>/, contract/workloads/slice.ts) says what its
 * parameters and metrics are. docs/adding-a-workload.md walks through both.
 */
import type { z } from 'zod';
import { FsbenchError, toFsbenchError } from '../contract/errors.js';
import type { Cell } from '../contract/matrix.js';
import type { InotifyLimits } from '../contract/fingerprint.js';
import type { Histogram } from '../contract/result.js';
import type { Journal } from '../host/journal.js';
import type { WatcherList } from '../host/watcher-list.js';
import { Teardown } from '../host/teardown.js';

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
  /** The host operator's own watchers (FSBENCH_WATCHERS), checked before the run against the cell's needs. */
  readonly watchers?: WatcherList;
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

/** What runs a cell: a workload's own code, or the sandbox that runs it in a container. */
export interface WorkloadRunner {
  /**
   * Runs one repetition of a cell. Throws an FsbenchError (with a stable code and an actionable
   * message) when the run cannot be measured; must leave the host as it found it either way.
   */
  run(cell: Cell, ctx: RunContext): Promise<WorkloadOutcome>;
}

/**
 * One thing a run takes from the host, said by the workload in its own words; runner/host-budget.ts
 * holds it against what this host has (MemAvailable and the cgroup's headroom, free space and
 * inodes) and what it allows (FSBENCH_MAX_QUEUED_EVENTS, FSBENCH_MAX_WATCHES,
 * FSBENCH_ALLOWED_TARGETS), and words the host's side of a refusal.
 */
export type HostNeed =
  /**
   * A host-wide kernel limit the run sets or fills, against the cap this host puts on it: above
   * it, LIMIT_NOT_ALLOWED with `refusal(cap)` as the message (what was asked, which sysctl, what
   * to ask instead).
   */
  | { readonly kind: 'limit'; readonly cap: 'maxQueuedEvents' | 'maxWatches'; readonly value: number; readonly refusal: (cap: number) => string }
  /** A directory the cell names, which must resolve inside the scratch directory or an allowed root (TARGET_NOT_ALLOWED). */
  | { readonly kind: 'directory'; readonly path: string }
  /** A watcher of the host's operator the cell names, which must be in the host's list (FSBENCH_WATCHERS): WATCHER_NOT_LISTED. */
  | { readonly kind: 'watcher'; readonly name: string }
  /**
   * Memory the run holds (a tmpfs: its pages are charged to whoever writes them): above what the
   * host can spare, HOST_TOO_SMALL "`what` needs N, but this host has M to spare (why): `fix`".
   */
  | { readonly kind: 'memory'; readonly bytes: number; readonly what: string; readonly fix: string }
  /**
   * Space (and inodes) the run writes on a filesystem: in the directory `dir` names (resolved and
   * held against the allowed roots like `directory`), or without `dir` the scratch directory.
   */
  | { readonly kind: 'space'; readonly dir?: string; readonly bytes: number; readonly inodes?: number; readonly what: string; readonly fix: string };

/** A workload's host side, as runner/workloads.ts registers it. */
export interface WorkloadSlice extends WorkloadRunner {
  /**
   * What one run of the cell takes from the host, in the order it is checked. The runner checks
   * every cell against it before anything of the run exists (runner/host-budget.ts), for `fsbench
   * run` and agents alike, so a cell asking for more than the host has or allows fails with its
   * code and nothing to undo. Reads only the cell: the host's side is the runner's.
   */
  hostNeeds(cell: Cell): readonly HostNeed[];
}

/**
 * A cell's parameters parsed with the workload's schema (contract/params.ts `paramsSchema`,
 * derived from its specs): the contract validated them when the matrix was submitted, so a
 * mismatch here (a job from another version, a hand-made cell) is fsbench's own fault, INTERNAL.
 */
export function cellParams<T>(schema: z.ZodType<T>, cell: Cell): T {
  const r = schema.safeParse(cell.params);
  if (!r.success) throw new FsbenchError('INTERNAL', `the cell's ${cell.workload} parameters do not match the contract: ${r.error.message}`);
  return r.data;
}

/**
 * Runs one measurement with a fresh Teardown and undoes everything it made, whatever happened.
 * A failure of the measurement is the run's error (CANCELLED once the run was cancelled, whatever
 * a tool killed by the same Ctrl-C said; a WorkloadSkipped keeps its class); a failure of the
 * undo is added to it, or after a success is the error itself.
 */
export async function withTeardown(ctx: RunContext, measure: (teardown: Teardown) => Promise<WorkloadOutcome>): Promise<WorkloadOutcome> {
  const teardown = new Teardown(ctx.journal);
  let outcome: WorkloadOutcome | undefined;
  let failure: FsbenchError | undefined;
  try {
    outcome = await measure(teardown);
  } catch (err) {
    failure = toFsbenchError(err, 'WORKLOAD_FAILED');
    if (ctx.signal.aborted && failure.code !== 'CANCELLED') {
      failure = new FsbenchError('CANCELLED', `the run was cancelled (${failure.message})`);
    }
  }
  try {
    await teardown.dispose();
  } catch (err) {
    const undo = toFsbenchError(err);
    failure = failure ? new FsbenchError(failure.code, `${failure.message}; and then: ${undo.message}`) : undo;
  }
  if (failure) throw failure;
  if (!outcome) throw new FsbenchError('INTERNAL', 'the run ended without a result');
  return outcome;
}
