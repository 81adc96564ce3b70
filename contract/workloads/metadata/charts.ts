/** The metadata workload's charts, after seed 001: files per second of each phase, bars grouped by inode size and mount options, a panel per filesystem. */
import { groupBy, labelWithout, medianOf, seriesColor, type ChartInput, type ChartSpec } from '../../charts.js';

const PHASES = ['create', 'readByDir', 'readInterleaved', 'stat', 'unlink'];
const SERIES_PARAMS = ['inodeSize', 'mountOptions'];

export function metadataCharts(input: ChartInput): ChartSpec[] {
  const rest = (label: string) => labelWithout(label, [...SERIES_PARAMS, 'fs']);
  return [...groupBy(input.cells, (c) => `${c.machine}\u0000${String(c.params['fs'])}\u0000${rest(c.label)}`).values()].flatMap((group) => {
    const first = group[0];
    if (first === undefined) return [];
    const seriesOf = (label: string) => label.split(' ').filter((t) => SERIES_PARAMS.some((n) => t.startsWith(`${n}=`))).join(' ') || 'files/s';
    const series = [...groupBy(group, (c) => seriesOf(c.label)).entries()].map(([label, members], i) => ({
      label,
      data: PHASES.map((p) => (members[0] ? medianOf(members[0], `${p}FilesPerSec`) : null)),
      color: seriesColor(i),
    }));
    return [{ type: 'bar' as const, title: `${String(first.params['fs'])}: files/s by phase`, subtitle: `on ${first.machine} ${rest(first.label)}`, labels: PHASES, series, y: { title: 'files/s (median)', ticks: 'compact' as const } }];
  });
}
