/**
 * The semantics workload's charts (docs/what-watchers-report.md): per machine and per everything
 * else that differs besides the backend (pace, target, ...), the recall of each kind of change,
 * one bar per backend, and each backend's latency from the operation to its report.
 */
import { groupBy, labelWithout, medianOf, seriesColor, type ChartInput, type ChartSpec } from '../../charts.js';
import { SEMANTICS_BACKENDS } from './backends.js';
import { kindsOf, perKindMetric } from './index.js';

export function semanticsCharts(input: ChartInput): ChartSpec[] {
  const multiMachine = input.machines.length > 1;
  const groups = groupBy(input.cells, (c) => `${c.machine}\u0000${labelWithout(c.label, ['backend', 'watcher'])}`);
  return [...groups.values()].flatMap((cells): ChartSpec[] => {
    const first = cells[0];
    if (first === undefined) return [];
    const subtitle = [multiMachine ? `on ${first.machine}` : '', labelWithout(first.label, ['backend', 'watcher'])].filter((s) => s !== '').join(' ');
    const kinds = kindsOf(first.params['kinds']);
    // The backends in the parameter's order; a `user` backend is told apart by its watcher's name.
    const rank = (c: (typeof cells)[number]) => SEMANTICS_BACKENDS.findIndex((b) => b === c.params['backend']);
    const ordered = [...cells].sort((a, b) => rank(a) - rank(b));
    const nameOf = (c: (typeof cells)[number]) => (c.params['backend'] === 'user' ? String(c.params['watcher']) : String(c.params['backend']));
    return [
      {
        type: 'bar',
        title: 'operations reported with the right kind on the right path',
        subtitle,
        data: { metric: 'recall', machine: first.machine },
        labels: kinds,
        series: ordered.map((c, i) => ({ label: nameOf(c), data: kinds.map((k) => medianOf(c, perKindMetric('recall', k))), color: seriesColor(i) })),
        y: { title: 'recall (median of the runs)', ticks: 'plain' },
      },
      {
        type: 'bar',
        title: 'latency from the operation to its report',
        subtitle,
        data: { metric: 'latencyP50Ms', machine: first.machine },
        labels: ordered.map(nameOf),
        series: [
          { label: 'p50', data: ordered.map((c) => medianOf(c, 'latencyP50Ms')), color: seriesColor(0) },
          { label: 'p99', data: ordered.map((c) => medianOf(c, 'latencyP99Ms')), color: seriesColor(1) },
        ],
        y: { title: 'ms (median of the runs)', ticks: 'compact' },
      },
    ];
  });
}
