/**
 * The browser side of the HTML report: the module that draws its charts with the dashboard's
 * chart functions (linked in by html-bundle.ts), and the few styles the dashboard lacks. Plain
 * browser JavaScript in a string: this project's TypeScript has no DOM types.
 *
 * The data comes from the page's JSON block (never from the network), charts are drawn per
 * workload as the dashboard's matrix view draws them, and a chart with more series or bars than
 * a reader can tell apart is cut, saying so under its title.
 */

export const MAX_CHART_SERIES = 24;
export const MAX_CHART_BARS = 200;
export const MAX_CHART_PANELS = 60;

export const PAGE_MODULE = `import { genericCharts, inotifyBarCharts, inotifySweepCharts, metadataCharts } from './charts.js';
import { h, headlineMetrics } from './util.js';

const MAX_SERIES = ${MAX_CHART_SERIES};
const MAX_BARS = ${MAX_CHART_BARS};
const MAX_PANELS = ${MAX_CHART_PANELS};

function chartsOf(report, workload, charts) {
  const ok = report.cells.filter((c) => c.ok > 0 && c.workload === workload);
  if (ok.length === 0) return [];
  const part = { ...report, cells: ok, knees: report.knees.filter((k) => k.workload === workload) };
  if (workload === 'inotify') {
    if (part.knees.some((k) => k.param === 'bufferBytes')) return inotifySweepCharts(part, charts);
    return inotifyBarCharts(ok, charts);
  }
  if (workload === 'metadata') return metadataCharts(ok, charts);
  return genericCharts(ok, headlineMetrics(report, workload)[0]?.name ?? 'value', charts);
}

/** Cuts a chart to what can be read, and says so in its caption. */
function cap(chart) {
  const said = [];
  const sets = chart.data.datasets;
  if (sets.length > MAX_SERIES) {
    said.push('shows only the first ' + MAX_SERIES + ' of ' + sets.length + ' series');
    sets.length = MAX_SERIES;
  }
  const labels = chart.data.labels;
  if (Array.isArray(labels) && labels.length > MAX_BARS) {
    said.push('shows only the first ' + MAX_BARS + ' of ' + labels.length + ' bars');
    labels.length = MAX_BARS;
    for (const d of sets) if (d.data.length > MAX_BARS) d.data.length = MAX_BARS;
  }
  if (said.length === 0) return;
  chart.update();
  const figure = chart.canvas.closest('figure');
  if (!figure) return;
  figure.dataset.capped = said.join('; ');
  figure.querySelector('figcaption')?.append(h('small', { class: 'capped' }, ' (' + said.join('; ') + ')'));
}

const box = document.getElementById('charts');
try {
  const report = JSON.parse(document.getElementById('fsbench-data').textContent);
  const charts = [];
  const panels = [...new Set(report.cells.map((c) => c.workload))].flatMap((w) => chartsOf(report, w, charts));
  const kept = panels.slice(0, MAX_PANELS);
  for (const chart of charts) {
    if (kept.includes(chart.canvas.closest('figure'))) cap(chart);
    else chart.destroy();
  }
  const more = panels.length > kept.length ? h('p', { class: 'hint capped' }, 'Only the first ' + MAX_PANELS + ' of ' + panels.length + ' charts are drawn.') : null;
  box.replaceChildren(...(kept.length > 0 ? kept : [h('p', {}, 'No successful run to draw.')]), ...(more ? [more] : []));
  document.body.dataset.ready = 'report';
} catch (err) {
  box.replaceChildren(h('p', { class: 'error' }, 'The charts could not be drawn: ' + (err instanceof Error ? err.message : String(err))));
  document.body.dataset.ready = 'error';
}
`;

export const PAGE_STYLE = `main { max-width: 110rem; }
.report-head p { margin: 0.2rem 0; }
table.cells tbody { border-top: 2px solid var(--line); }
table.cells td.verdict small { display: block; color: var(--muted); max-width: 22rem; }
table.cells tr.cell-notes td { color: var(--worse); font-size: 0.85rem; }
table.cells tr.cell-notes ul { margin: 0; padding-left: 1.2rem; }
table.fingerprint td { font-variant-numeric: tabular-nums; }
table.fingerprint th[scope=row] { color: var(--fg); font-weight: normal; font-family: ui-monospace, monospace; font-size: 0.85rem; }
.capped, p.error { color: var(--worse); }
.charts p { grid-column: 1 / -1; }
`;
