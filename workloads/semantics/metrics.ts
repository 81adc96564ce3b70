/** A matching turned into the contract's metrics (contract/workloads/semantics): totals, then each kind's. */
import { OPERATION_KINDS, perKindMetric } from '../../contract/workloads/semantics/index.js';
import { percentile, type Matching } from './matching.js';

const toMs = (ns: number | null) => (ns === null ? null : ns / 1e6);

export interface RunFacts {
  readonly overflowsKnown: boolean;
  readonly synthesized: number | null;
  readonly opsPerSec: number;
  readonly readyMs: number;
}

export function semanticsMetrics(m: Matching, f: RunFacts): Record<string, number | null> {
  const metrics: Record<string, number | null> = {
    recall: m.operations === 0 ? 0 : m.recalled / m.operations,
    operations: m.operations,
    missed: m.operations - m.recalled,
    wrongKind: m.wrongKind,
    unknownKind: m.unknownKind,
    duplicates: m.duplicates,
    unrelated: m.unrelated,
    late: m.late,
    latencyP50Ms: toMs(percentile(m.latenciesNs, 0.5)),
    latencyP99Ms: toMs(percentile(m.latenciesNs, 0.99)),
    deafAfter: m.deafAfter,
    deafChecks: m.deafChecks,
    overflows: f.overflowsKnown ? m.overflows : null,
    synthesized: f.synthesized,
    events: m.events,
    opsPerSec: f.opsPerSec,
    readyMs: f.readyMs,
  };
  for (const kind of OPERATION_KINDS) {
    const k = m.byKind.get(kind);
    const made = k !== undefined && k.operations > 0;
    metrics[perKindMetric('recall', kind)] = made ? k.recalled / k.operations : null;
    metrics[perKindMetric('wrong_kind', kind)] = made ? k.wrongKind : null;
    metrics[perKindMetric('duplicates', kind)] = made ? k.duplicates : null;
    metrics[perKindMetric('latency_p50_ms', kind)] = made ? toMs(percentile(k.latenciesNs, 0.5)) : null;
  }
  return metrics;
}
