/**
 * A workload that measures nothing of the kernel: it exists to exercise dispatch, storage and
 * aggregation (tests, `npm run bench:dispatch`) without touching it, and, with `spin`, to measure
 * something real with a change of known size (`slowdown`), which is how the regression gate is
 * calibrated (`npm run bench:calibration`).
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
    doc: 'Moves each run\'s `value` (and `opsPerSec`) up or down by up to this percent of it, at random: a noisy cell with a known spread (tests of `repetitions: auto`, the gate\'s calibration).',
  },
  spin: {
    kind: 'duration',
    min: 0,
    max: 10_000,
    default: 0,
    doc: 'How long each run repeats a fixed unit of CPU work, reporting the rate as `opsPerSec`: a real measurement, with this machine\'s own noise.',
  },
  slowdown: {
    kind: 'integer',
    min: 0,
    max: 90,
    default: 0,
    doc: 'Makes each unit of `spin` work cost more, so that `opsPerSec` drops by this percent: a regression of known size.',
  },
} as const satisfies ParamSpecs;

export const NoopMetrics = z.object({ value: z.number(), elapsedMs: z.number().nonnegative(), opsPerSec: z.number().nonnegative().nullable().optional() }).strict();
export type NoopMetrics = z.infer<typeof NoopMetrics>;

export const NOOP_METRIC_DOCS = {
  value: { unit: '1', direction: 'neither', doc: 'The `value` parameter, reported back: a number tests can control.' },
  elapsedMs: { unit: 'ms', direction: 'neither', doc: 'How long the run took (about `sleep` plus `spin`).' },
  opsPerSec: { unit: 'ops/s', direction: 'higher', doc: 'Units of CPU work done per second during `spin`; null without `spin`.' },
} as const satisfies MetricDocs<NoopMetrics>;

export const noopContract: WorkloadContract = {
  params: noopParams,
  metrics: NoopMetrics,
  metricDocs: NOOP_METRIC_DOCS,
  headline: ['value'],
  sweeps: [],
  skipReason: () => undefined,
  exclusive: false,
  // Nothing to set up: a run is its sleep and its spin.
  estimateRunMs: (p) => numberParam(p, 'sleep') + numberParam(p, 'spin'),
  native: [],
  sandbox: null,
};
