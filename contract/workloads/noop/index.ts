/**
 * A workload that measures nothing: it exists to exercise dispatch, storage and aggregation
 * (tests, `npm run bench:dispatch`) without touching the kernel.
 */
import { z } from 'zod';
import type { MetricDocs } from '../../metrics.js';
import { numberParam, type ParamSpecs } from '../../params.js';
import type { WorkloadContract } from '../slice.js';

export const noopParams = {
  sleep: { kind: 'duration', min: 0, max: 60_000, default: 0, doc: 'How long each run waits before it reports.' },
  value: { kind: 'integer', min: 0, max: 1_000_000_000, default: 1, doc: 'The number the run reports as its `value` metric.' },
  jitter: {
    kind: 'integer',
    min: 0,
    max: 100,
    default: 0,
    doc: 'Moves each run\'s `value` up or down by up to this percent of it, at random: a noisy cell with a known spread (tests of `repetitions: auto`).',
  },
} as const satisfies ParamSpecs;

export const NoopMetrics = z.object({ value: z.number(), elapsedMs: z.number().nonnegative() }).strict();
export type NoopMetrics = z.infer<typeof NoopMetrics>;

export const NOOP_METRIC_DOCS = {
  value: { unit: '1', direction: 'neither', doc: 'The `value` parameter, reported back: a number tests can control.' },
  elapsedMs: { unit: 'ms', direction: 'neither', doc: 'How long the run took (about `sleep`).' },
} as const satisfies MetricDocs<NoopMetrics>;

export const noopContract: WorkloadContract = {
  params: noopParams,
  metrics: NoopMetrics,
  metricDocs: NOOP_METRIC_DOCS,
  headline: ['value'],
  sweeps: [],
  skipReason: () => undefined,
  exclusive: false,
  // Nothing to set up: a run is its sleep.
  estimateRunMs: (p) => numberParam(p, 'sleep'),
  native: [],
  sandbox: null,
};
