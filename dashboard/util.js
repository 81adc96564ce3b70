// DOM helpers shared by the dashboard's views. Numbers are formatted by the project's one
// formatter (report/format.ts, served compiled at /lib/), and every statistic shown comes from
// the coordinator's report: nothing here computes one.
export { formatCompact, formatCv, formatDelta, formatInterval, formatNumber, formatPercent, formatPValue, formatRatio, formatSize } from '/lib/report/format.js';

/** h('div', { class: 'x', onclick: fn }, child, 'text') — text is always set as text, never parsed as HTML. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function groupBy(items, keyOf) {
  const groups = new Map();
  for (const item of items) {
    const key = keyOf(item);
    const list = groups.get(key);
    if (list) list.push(item);
    else groups.set(key, [item]);
  }
  return groups;
}

/** The report's headline metrics of a workload, in order. */
export function headlineMetrics(report, workload) {
  return (report.metrics.find((m) => m.workload === workload)?.metrics ?? []).filter((m) => m.headline);
}

/** A cell's median of a metric, as the report states it; null when the metric was not observed. */
export function medianOf(cell, metric) {
  const s = cell.metrics?.[metric];
  return s && Number.isFinite(s.median) ? s.median : null;
}
