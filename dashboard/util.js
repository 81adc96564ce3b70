// Small helpers shared by the dashboard's views: DOM building, number and size formatting,
// and the same median and knee rules as stats/ (summary.ts, knee.ts), for the browser.

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

const SIZE_UNITS = [['TiB', 1024 ** 4], ['GiB', 1024 ** 3], ['MiB', 1024 ** 2], ['KiB', 1024]];

/** The shortest exact IEC spelling, as contract/units.ts formatSize: 8388608 -> 8MiB. */
export function formatSize(bytes) {
  for (const [unit, f] of SIZE_UNITS) if (bytes >= f && bytes % f === 0) return `${bytes / f}${unit}`;
  return `${bytes}B`;
}

/** 385229 -> 385k, 1234567 -> 1.23M. */
export function formatNumber(x) {
  if (x === null || x === undefined || !Number.isFinite(x)) return 'n/a';
  const abs = Math.abs(x);
  if (abs >= 1e9) return `${(x / 1e9).toPrecision(3)}G`;
  if (abs >= 1e6) return `${(x / 1e6).toPrecision(3)}M`;
  if (abs >= 1e4) return `${(x / 1e3).toPrecision(3)}k`;
  if (Number.isInteger(x)) return String(x);
  return abs >= 1 ? x.toFixed(2) : x.toPrecision(3);
}

export function formatPercent(fraction, digits = 0) {
  return `${(fraction * 100).toFixed(digits)}%`;
}

export function median(values) {
  const s = [...values].sort((a, b) => a - b);
  const n = s.length;
  if (n === 0) return NaN;
  const mid = Math.floor(n / 2);
  return n % 2 === 1 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/** stats/knee.ts findKnee: the smallest x whose median is within `tolerance` of the best. */
export function findKnee(points, tolerance = 0.05, higherIsBetter = true) {
  const usable = points.filter((p) => Number.isFinite(p.y)).sort((a, b) => a.x - b.x);
  if (usable.length === 0) return null;
  let best = usable[0];
  for (const p of usable) if (higherIsBetter ? p.y > best.y : p.y < best.y) best = p;
  const good = (p) => (higherIsBetter ? p.y >= (1 - tolerance) * best.y : p.y <= (1 + tolerance) * best.y);
  const knee = usable.find(good) ?? best;
  return { x: knee.x, y: knee.y, bestX: best.x, best: best.y };
}

/** The parameters whose value differs between cells. */
export function varyingParams(cells) {
  const first = cells[0];
  if (!first) return [];
  return Object.keys(first.params).filter((k) => cells.some((c) => c.params[k] !== first.params[k]));
}

export function describeParams(params, names) {
  return names.map((n) => `${n}=${formatParam(n, params[n])}`).join(' ');
}

const SIZE_PARAMS = new Set(['bufferBytes', 'writeBytes', 'fsSize', 'inodeSize', 'fileSize', 'container.memory']);

export function formatParam(name, value) {
  if (typeof value === 'number' && SIZE_PARAMS.has(name)) return formatSize(value);
  if (value === '') return 'none';
  return String(value);
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
