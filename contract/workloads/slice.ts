/**
 * What a workload is to the rest of fsbench: the one interface its contract folder
 * (`contract/workloads/<name>/`) implements, and everything the runner, agent, coordinator, CLI,
 * reports and dashboard ask about a workload, so that none of them names one. How a workload
 * runs on a host is the other half, `workloads/workload.ts`. Pure code: the dashboard's bundle
 * imports contract/, so nothing here may reach the host. docs/adding-a-workload.md walks
 * through both halves.
 */
import type { z } from 'zod';
import type { WorkloadCharts } from '../charts.js';
import type { WorkloadNotes } from '../notes.js';
import type { MetricDoc } from '../metrics.js';
import type { ParamSpecs, ParamValue } from '../params.js';

/** A cell's parameters as the contract's functions see them: every declared one present (cells carry their defaults). */
export type SliceParams = Readonly<Record<string, ParamValue>>;

/** How a workload runs inside a sandbox container (`container.storage` other than `none`). */
export interface SandboxNeeds {
  /**
   * The parameter that must name the container's work directory (the storage under test) for
   * the run to measure it, or undefined when the run already lands there: a run that works
   * under the scratch directory needs nothing, since the container's scratch directory is the
   * work directory. sandbox/protocol.ts sets that parameter to the work directory's path.
   */
  readonly workDirParam: (params: SliceParams) => string | undefined;
}

export interface WorkloadContract {
  /**
   * Every parameter, declared once: type, range, default and doc. Matrices are validated,
   * reference tables written and the workload's zod schemas derived (contract/params.ts
   * `paramsSchema`) from these. A workload that can run in a sandbox includes `containerParams`.
   */
  readonly params: ParamSpecs;
  /** Validates an `ok` run's metrics; every value is a number, or null where not observable. */
  readonly metrics: z.ZodType<Record<string, number | null>>;
  /** Unit, direction and meaning of every metric the schema allows (see contract/metrics.ts). */
  readonly metricDocs: Readonly<Record<string, MetricDoc>>;
  /** Metrics a summary shows first; the first is what `repetitions: auto` judges by default. */
  readonly headline: readonly string[];
  /**
   * Sweeps whose knee a report finds: along `param`, the smallest value whose median `metric`
   * is within 5% of the best (seed 000: the read buffer against throughput, next to the L3 size).
   */
  readonly sweeps: readonly { readonly param: string; readonly metric: string }[];
  /** Why a combination of values cannot be measured, making its runs `skipped`. */
  readonly skipReason: (params: SliceParams) => string | undefined;
  /**
   * Whether a run measures the kernel (limits, CPUs, page cache) and so must have the host to
   * itself: agents take the host lock for it. A workload that never touches the kernel does not.
   */
  readonly exclusive: boolean;
  /**
   * Roughly how long one run of a cell takes, in milliseconds, setup and teardown included
   * (`RUN_OVERHEAD_MS` for what every run on a host costs). The coordinator adds these up for a
   * matrix's estimate and its FSBENCH_MAX_DURATION check: rough by design, there to refuse a
   * typo that asks for a month and to tell users what to expect.
   */
  readonly estimateRunMs: (params: SliceParams) => number;
  /**
   * The native programs a run starts, by name: `native/<name>.c`, built into
   * `native/build/<name>` by `native/build.mjs`. `fsbench run` checks they exist before the
   * first run, so a missing build is one message, not a failed run per cell.
   */
  readonly native: readonly string[];
  /** How its runs go into a sandbox container, or null for a workload without `container.*` parameters. */
  readonly sandbox: SandboxNeeds | null;
  /** How its ok cells are charted (report/charts.ts); without, a bar of the first headline metric per cell. */
  readonly charts?: WorkloadCharts;
  /** What its numbers hide, said per cell and summarised over cells (report/notes.ts adds what any workload gets). */
  readonly notes?: WorkloadNotes;
}

/** What setting up and tearing down any run on a host costs (fingerprint, target, limits), for estimates. */
export const RUN_OVERHEAD_MS = 200;
