/**
 * The registry of workloads: their parameters, metric schemas and the cross-parameter rules
 * that turn a cell into a `skipped` run. Runner, agent, coordinator and CLI all read it.
 */
import type { z } from 'zod';
import type { ParamSpecs, ParamValue } from '../params.js';
import { INOTIFY_HEADLINE_METRICS, InotifyMetrics, inotifyParams, inotifySkipReason } from './inotify.js';
import { METADATA_HEADLINE_METRICS, MetadataMetrics, metadataParams, metadataSkipReason } from './metadata.js';
import { NoopMetrics, noopParams } from './noop.js';
import { containerParams, containerSkipReason } from './container.js';

export const WORKLOAD_NAMES = ['inotify', 'metadata', 'noop'] as const;
export type WorkloadName = (typeof WORKLOAD_NAMES)[number];

export interface WorkloadContract {
  readonly params: ParamSpecs;
  /** Validates an `ok` run's metrics; every value is a number, or null where not observable. */
  readonly metrics: z.ZodType<Record<string, number | null>>;
  /** Metrics a summary shows first. */
  readonly headline: readonly string[];
  /** Why a combination of values cannot be measured, making its runs `skipped`. */
  readonly skipReason: (params: Readonly<Record<string, ParamValue>>) => string | undefined;
  /**
   * Whether a run measures the kernel (limits, CPUs, page cache) and so must have the host to
   * itself: agents take the host lock for it. A workload that never touches the kernel does not.
   */
  readonly exclusive: boolean;
}

export const WORKLOADS: Readonly<Record<WorkloadName, WorkloadContract>> = {
  inotify: {
    params: { ...inotifyParams, ...containerParams },
    metrics: InotifyMetrics,
    headline: INOTIFY_HEADLINE_METRICS,
    skipReason: (p) => containerSkipReason(p) ?? inotifySkipReason(p),
    exclusive: true,
  },
  metadata: {
    params: { ...metadataParams, ...containerParams },
    metrics: MetadataMetrics,
    headline: METADATA_HEADLINE_METRICS,
    skipReason: (p) => containerSkipReason(p) ?? metadataSkipReason(p),
    exclusive: true,
  },
  noop: {
    params: noopParams,
    metrics: NoopMetrics,
    headline: ['value'],
    skipReason: () => undefined,
    exclusive: false,
  },
};
