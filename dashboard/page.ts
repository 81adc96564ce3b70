/**
 * The HTML report's script (bundled into the page, inline): draws the charts the page carries in
 * its JSON block. report/charts.ts chose them when the page was made, in Node, as the dashboard
 * chooses them in the browser; this script only draws, so the page carries neither zod nor the
 * workloads' contracts. The tables and notes are in the page already, rendered by the exporter
 * the dashboard renders them with.
 */
import type { Chart } from 'chart.js';
import type { Charts } from '../report/charts.js';
import { h } from './dom.js';
import { drawCharts } from './draw.js';

/**
 * The block is written with the page by report/html.ts, never fetched: a shape check, not a
 * parse, guards against a page edited by hand.
 */
function isCharts(v: unknown): v is Charts {
  return typeof v === 'object' && v !== null && 'charts' in v && Array.isArray(v.charts) && 'note' in v && (v.note === null || typeof v.note === 'string');
}

const box = document.getElementById('charts');
try {
  if (!box) throw new Error('the page has no #charts');
  const data: unknown = JSON.parse(document.getElementById('fsbench-data')?.textContent ?? 'null');
  if (!isCharts(data)) throw new Error('the page holds no chart data');
  const drawn: Chart[] = [];
  box.replaceChildren(...drawCharts(data.charts, drawn), ...(data.note ? [h('p', { class: data.charts.length > 0 ? 'hint capped' : '' }, data.note)] : []));
  document.body.dataset['ready'] = 'report';
} catch (err) {
  box?.replaceChildren(h('p', { class: 'error' }, `The charts could not be drawn: ${err instanceof Error ? err.message : String(err)}`));
  document.body.dataset['ready'] = 'error';
}
