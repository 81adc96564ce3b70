/**
 * The HTML report's script (bundled into the page, inline): draws the charts of the report
 * whose chart input the page carries in its JSON block, chosen by report/charts.ts as the
 * dashboard chooses them. The tables and notes are in the page already, rendered in Node by
 * the same exporter the dashboard uses.
 */
import type { Chart } from 'chart.js';
import { ChartInput } from '../contract/charts.js';
import { chartsOf } from '../report/charts.js';
import { h } from './dom.js';
import { drawCharts } from './draw.js';

const box = document.getElementById('charts');
try {
  if (!box) throw new Error('the page has no #charts');
  const input = ChartInput.parse(JSON.parse(document.getElementById('fsbench-data')?.textContent ?? 'null'));
  const { charts, note } = chartsOf(input);
  const drawn: Chart[] = [];
  box.replaceChildren(...drawCharts(charts, drawn), ...(note ? [h('p', { class: charts.length > 0 ? 'hint capped' : '' }, note)] : []));
  document.body.dataset['ready'] = 'report';
} catch (err) {
  box?.replaceChildren(h('p', { class: 'error' }, `The charts could not be drawn: ${err instanceof Error ? err.message : String(err)}`));
  document.body.dataset['ready'] = 'error';
}
