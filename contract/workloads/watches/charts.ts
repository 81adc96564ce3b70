/**
 * The watches workload's charts (docs/watches.md): per machine, against the tree's size in
 * directories, one line per backend: the time until the whole tree is watched and the first
 * event arrives, the rate watches were added at, the kernel memory each watch costs, and what the
 * watcher's own memory grows by per watch. fanotify's one mark has no per-watch figure worth drawing: it is in the first chart only.
 */
import { groupBy, labelWithout, medianOf, seriesColor, type ChartCell, type ChartInput, type ChartSpec } from '../../charts.js';
import { WATCH_BACKENDS } from './index.js';

const PANELS = [
  { metric: 'firstEventMs', title: 'time until the whole tree is watched', y: 'ms until the first event (median)', perWatch: false },
  // The same setups as a rate: chokidar's line would otherwise flatten the others against the axis.
  { metric: 'watchesPerSec', title: 'watches added per second', y: 'watches/s (median)', perWatch: true },
  { metric: 'kernelBytesPerWatch', title: 'kernel memory per watch', y: 'bytes per watch (median)', perWatch: true },
  { metric: 'rssBytesPerWatch', title: "the watcher's own memory per watch", y: 'RSS bytes per watch (median)', perWatch: true },
] as const;

export function watchesCharts(input: ChartInput): ChartSpec[] {
  const multiMachine = input.machines.length > 1;
  // One set of panels per machine and per everything else that differs besides the backend and the size.
  const groups = groupBy(input.cells, (c) => `${c.machine}\u0000${labelWithout(c.label, ['backend', 'dirs'])}`);
  return [...groups.values()].flatMap((cells) => {
    const first = cells[0];
    if (first === undefined) return [];
    const rest = labelWithout(first.label, ['backend', 'dirs']);
    const sizes = new Set(cells.map((c) => c.params['dirs']));
    // A curve needs at least two sizes; a single size is the generic bar chart's business.
    if (sizes.size < 2) return [];
    const byBackend = groupBy(cells, (c) => String(c.params['backend']));
    return PANELS.map((panel): ChartSpec => {
      const series = WATCH_BACKENDS.flatMap((backend, i) => {
        const members: readonly ChartCell[] = byBackend.get(backend) ?? [];
        if (members.length === 0 || (panel.perWatch && backend === 'fanotify')) return [];
        const data = members
          .flatMap((c) => {
            const y = medianOf(c, panel.metric);
            const x = c.params['dirs'];
            return y === null || typeof x !== 'number' ? [] : [{ x, y }];
          })
          .sort((a, b) => a.x - b.x);
        return data.length === 0 ? [] : [{ label: backend, data, color: seriesColor(i) }];
      });
      return {
        type: 'line',
        title: panel.title,
        subtitle: [multiMachine ? `on ${first.machine}` : '', rest].filter((s) => s !== '').join(' '),
        data: { metric: panel.metric, machine: first.machine },
        series,
        x: { title: 'directories in the tree', ticks: 'compact', linear: true },
        y: { title: panel.y, ticks: 'compact' },
      };
    });
  });
}
