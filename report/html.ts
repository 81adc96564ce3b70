/**
 * A report as one self-contained HTML page: it opens offline (no URL outside the file, not even
 * a font), renders under `default-src 'self'` with the hashes `reportCsp` adds, and shows what
 * the dashboard's matrix view shows (its charts, drawn by its own chart code), the per-cell
 * tables with medians, CIs, CV and noise verdicts, each cell's notes, the knees and every field
 * of each machine's fingerprint.
 *
 * Built from the report model, so its size follows the cells, not the runs; every text from the
 * results (a matrix name, a label, a CPU model, a note) is escaped, and the chart data sits in a
 * JSON block whose `<` are escaped, so no value can end an element or start one.
 */
import { formatParam } from '../contract/params.js';
import { WORKLOADS } from '../contract/workloads/index.js';
import { formatCv, formatInterval, formatNumber, formatSize } from './format.js';
import type { CellReport, KneeReport, MachineReport, Report } from './model.js';
import { reportDoc } from './results-view.js';
import type { HtmlAssets } from './html-bundle.js';

/** Cells listed in the tables: a matrix's maximum; a larger report says it lists only these. */
export const MAX_HTML_CELLS = 10_000;
/** Cells the charts get: enough for any chart one can read, and it keeps the page's data block a few MB at most. */
export const MAX_CHART_CELLS = 2_000;
/** Notes listed at the top (each cell's own notes stay in its table row). */
const MAX_LISTED_NOTES = 1_000;

export interface HtmlOptions {
  /** The matrix's description, where the source has it (a coordinator). */
  readonly description?: string | undefined;
  /** Where the results came from (a file, a coordinator's matrix). */
  readonly source?: string | undefined;
  /** fsbench's version, shown with the source. */
  readonly version?: string | undefined;
}

const ESCAPES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text for element content and double-quoted attribute values alike. */
export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);
}

type Attrs = Readonly<Record<string, string | number | undefined>>;

function attrs(a: Attrs): string {
  return Object.entries(a)
    .filter((e): e is [string, string | number] => e[1] !== undefined)
    .map(([k, v]) => ` ${k}="${escapeHtml(String(v))}"`)
    .join('');
}

/** An element whose children are markup already made by these functions; `text` escapes. */
const el = (tag: string, a: Attrs, ...children: string[]) => `<${tag}${attrs(a)}>${children.join('')}</${tag}>`;
const text = (tag: string, a: Attrs, content: string) => el(tag, a, escapeHtml(content));

/** JSON inside a `<script type="application/json">`: no `<` can close the element. */
function jsonBlock(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

function headlineOf(report: Report, c: CellReport): readonly string[] {
  return report.metrics.find((m) => m.workload === c.workload)?.metrics.filter((m) => m.headline).map((m) => m.name) ?? WORKLOADS[c.workload].headline;
}

function cellRows(report: Report, c: CellReport): string {
  const metrics = c.ok === 0 ? [] : headlineOf(report, c);
  const notes = c.findings.length > 0 ? el('tr', { class: 'cell-notes' }, el('td', { colspan: 11 }, el('ul', {}, ...c.findings.map((n) => text('li', { 'data-kind': n.kind }, n.text))))) : '';
  const verdict = c.ok === 0 ? (c.problem ?? 'no result') : c.noise.noisy ? 'too noisy' : 'ok';
  const span = Math.max(1, metrics.length);
  const head = [
    text('td', { class: 'label', rowspan: span }, c.label),
    text('td', { class: 'machine', rowspan: span }, c.machine),
    text('td', { class: 'num', rowspan: span }, `${c.ok}/${c.runs}`),
    el('td', { class: c.noise.noisy ? 'verdict noisy' : 'verdict', rowspan: span }, escapeHtml(verdict), c.noise.reasons.length > 0 ? text('small', {}, c.noise.reasons.join('; ')) : ''),
  ].join('');
  if (metrics.length === 0) return el('tbody', { 'data-cell': c.cellId, 'data-machine': c.machine }, el('tr', {}, head, el('td', { colspan: 7 }, '')), notes);
  const rows = metrics.map((name, i) => {
    const s = c.metrics[name];
    const stats = s
      ? [String(s.n), formatNumber(s.median), formatInterval(s.ciLow, s.ciHigh), formatCv(s.cv), formatNumber(s.min), formatNumber(s.max)]
      : ['0', 'n/a', '', '', '', ''];
    return el('tr', { 'data-metric': name }, i === 0 ? head : '', text('td', { class: 'metric' }, name), ...stats.map((v, j) => text('td', { class: j === 1 ? 'num median' : 'num' }, v)));
  });
  return el('tbody', { 'data-cell': c.cellId, 'data-machine': c.machine }, ...rows, notes);
}

function cellsSection(report: Report): string {
  const cells = report.cells.slice(0, MAX_HTML_CELLS);
  const head = el('thead', {}, el('tr', {}, ...['cell', 'machine', 'ok/runs', 'verdict', 'metric', 'n', 'median', '95% CI', 'CV', 'min', 'max'].map((t) => text('th', {}, t))));
  const cut = report.cells.length > cells.length ? text('p', { class: 'hint capped' }, `Only the first ${cells.length} of ${report.cells.length} cells are listed; the CSV export has every cell.`) : '';
  return el(
    'section',
    { id: 'cells' },
    text('h3', {}, `Cells (${report.cells.length})`),
    text('p', { class: 'hint' }, "Each cell's headline metrics: median over its ok runs, the median's 95% confidence interval, coefficient of variation, min and max; the verdict says whether the spread supports a conclusion, and the cell's notes follow its rows."),
    cut,
    el('table', { class: 'cells' }, head, ...cells.map((c) => cellRows(report, c))),
  );
}

function formatX(k: KneeReport, x: number): string {
  const spec = WORKLOADS[k.workload].params[k.param];
  return spec ? formatParam(spec, x) : formatNumber(x);
}

function kneesSection(report: Report): string {
  if (report.knees.length === 0) return '';
  const several = report.machines.length > 1;
  const heading = ['machine', 'sweep', 'metric', 'knee', 'best at', 'best', 'L2', 'L3', 'knee/L3'].filter((t) => several || t !== 'machine');
  const rows = report.knees.map((k) =>
    el(
      'tr',
      { 'data-machine': k.machine, 'data-param': k.param },
      several ? text('td', {}, k.machine) : '',
      text('td', { class: 'label' }, `${k.label || '(all)'} (${k.param})`),
      text('td', {}, k.metric),
      text('td', { class: 'num knee' }, k.knee ? formatX(k, k.knee.x) : 'n/a'),
      text('td', { class: 'num' }, k.knee ? formatX(k, k.knee.bestX) : 'n/a'),
      text('td', { class: 'num' }, formatNumber(k.knee?.best)),
      text('td', { class: 'num' }, k.l2Bytes === null ? 'n/a' : formatSize(k.l2Bytes)),
      text('td', { class: 'num l3' }, k.l3Bytes === null ? 'n/a' : formatSize(k.l3Bytes)),
      text('td', { class: 'num' }, formatNumber(k.kneeOverL3)),
    ),
  );
  return el(
    'section',
    { id: 'knees' },
    text('h3', {}, 'Knees of the sweeps'),
    text('p', { class: 'hint' }, "The smallest value of the swept parameter whose median is within 5% of the best, next to the machine's cache sizes (seed 000 claims the best read buffer is about the L3 size: knee/L3 near 1)."),
    el('table', { class: 'knees' }, el('thead', {}, el('tr', {}, ...heading.map((t) => text('th', {}, t)))), el('tbody', {}, ...rows)),
  );
}

/** A fingerprint value in one line: sizes in their units, nested objects as `key=value`. */
function inline(key: string, v: unknown): string {
  if (v === null || v === undefined) return 'n/a';
  if (typeof v === 'number') return /Bytes$/.test(key) && Number.isInteger(v) && v >= 0 ? formatSize(v) : String(v);
  if (typeof v === 'string') return v === '' ? '""' : v;
  if (typeof v === 'boolean' || typeof v === 'bigint') return String(v);
  if (Array.isArray(v)) return v.length === 0 ? 'none' : v.map((x) => inline(key, x)).join(', ');
  if (typeof v === 'object') return Object.entries(v).map(([k, x]) => `${k}=${typeof x === 'object' && x !== null ? `{${inline(k, x)}}` : inline(k, x)}`).join(' ');
  // Parsed JSON holds nothing else; a function or symbol here is not a fact to show.
  return typeof v;
}

/**
 * Every field of a fingerprint as dotted key -> text, whatever fields it has: nested objects
 * become rows of their own, lists of objects one row per element.
 */
function flatten(v: unknown, key: string, out: Map<string, string>): void {
  if (Array.isArray(v) && v.some((x) => typeof x === 'object' && x !== null)) {
    v.forEach((x, i) => {
      out.set(`${key}[${i}]`, inline(key, x));
    });
    if (v.length === 0) out.set(key, 'none');
    return;
  }
  if (typeof v === 'object' && v !== null && !Array.isArray(v)) {
    const entries = Object.entries(v);
    if (entries.length === 0) out.set(key, 'none');
    for (const [k, x] of entries) flatten(x, key === '' ? k : `${key}.${k}`, out);
    return;
  }
  out.set(key, inline(key.split('.').at(-1) ?? key, v));
}

function machinesSection(machines: readonly MachineReport[]): string {
  if (machines.length === 0) return '';
  const columns = machines.map((m) => {
    const out = new Map<string, string>();
    flatten(m.fingerprint ?? { machine: m.machine, cpu: m.caches }, '', out);
    return out;
  });
  const keys = [...new Set(columns.flatMap((c) => [...c.keys()]))];
  const head = el('thead', {}, el('tr', {}, text('th', {}, 'field'), ...machines.map((m) => text('th', { 'data-machine': m.machine }, m.machine))));
  const rows = keys.map((k) => el('tr', { 'data-field': k }, text('th', { scope: 'row' }, k), ...columns.map((c) => text('td', {}, c.get(k) ?? ''))));
  return el(
    'section',
    { id: 'machines' },
    text('h3', {}, machines.length > 1 ? `Machines (${machines.length})` : 'Machine'),
    text('p', { class: 'hint' }, 'Every field of each machine\'s fingerprint, as recorded with its runs.'),
    el('table', { class: 'fingerprint' }, head, el('tbody', {}, ...rows)),
  );
}

/** One item per kind of note, summarised over its cells (each cell's own sentences stay in its rows). */
function notesSection(report: Report): string {
  if (report.notes.length === 0) return '';
  const listed = report.notes.slice(0, MAX_LISTED_NOTES);
  const more = report.notes.length > listed.length ? text('p', { class: 'hint capped' }, `… and ${report.notes.length - listed.length} more notes, each in its cell's rows below.`) : '';
  const items = listed.map((g) => text('li', { class: `note ${g.severity}`, 'data-kind': g.kind, 'data-cells': g.cells.length }, g.text));
  return el(
    'section',
    { id: 'notes' },
    text('h3', {}, 'Notes'),
    text('p', { class: 'hint' }, "Each kind of note once, with the cells that have it and the range of its figure; each cell's own notes follow its rows in the table of cells."),
    el('ul', { class: 'notes report-notes' }, ...items),
    more,
  );
}

/** What the charts read of a report: the dashboard's chart code, fed a report cut to the medians. */
function chartData(report: Report) {
  const cells = report.cells.slice(0, MAX_CHART_CELLS).map((c) => ({
    matrix: c.matrix,
    cellId: c.cellId,
    machine: c.machine,
    workload: c.workload,
    params: c.params,
    label: c.label,
    ok: c.ok,
    metrics: Object.fromEntries(Object.entries(c.metrics).map(([name, s]) => [name, { median: s.median }])),
  }));
  return {
    title: report.title,
    metrics: report.metrics,
    machines: report.machines.map((m) => ({ machine: m.machine, caches: m.caches })),
    knees: report.knees,
    cells,
  };
}

function chartsSection(report: Report): string {
  const cut = report.cells.length > MAX_CHART_CELLS ? text('p', { class: 'hint capped' }, `The charts draw the first ${MAX_CHART_CELLS} of ${report.cells.length} cells.`) : '';
  return el(
    'section',
    { id: 'charts-section' },
    text('h3', {}, 'Charts'),
    cut,
    el('div', { class: 'charts', id: 'charts' }, el('noscript', {}, text('p', {}, 'The charts need JavaScript; the tables below hold every number they draw.'))),
  );
}

/** The whole page. `assets` from htmlAssets(): the inline scripts and style whose hashes reportCsp allows. */
export function renderHtmlReport(report: Report, assets: HtmlAssets, options: HtmlOptions = {}): string {
  const doc = reportDoc(report);
  const made = `Made by fsbench${options.version ? ` ${options.version}` : ''}${options.source ? ` from ${options.source}` : ''}. This file needs no network: the charts, their data and Chart.js are inside it.`;
  const head = el(
    'div',
    { class: 'report-head' },
    text('h2', {}, report.title),
    options.description ? text('p', { class: 'hint description' }, options.description) : '',
    ...doc.preamble.map((l) => text('p', { class: 'preamble' }, l)),
    text('p', { class: 'hint' }, made),
  );
  return [
    '<!doctype html>',
    '<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">',
    text('title', {}, `fsbench: ${report.title}`),
    // Browsers ask for /favicon.ico without one; a data: URL keeps the page off the network.
    '<link rel="icon" href="data:,">',
    `<style>${assets.style}</style>`,
    '</head><body data-ready="static">',
    el('header', {}, el('h1', {}, 'fsbench report')),
    // The charts first: the notes explain what they show.
    el('main', {}, head, chartsSection(report), notesSection(report), kneesSection(report), cellsSection(report), machinesSection(report.machines)),
    `<script type="application/json" id="fsbench-data">${jsonBlock(chartData(report))}</script>`,
    `<script>${assets.chartJs}</script>`,
    `<script type="module">${assets.script}</script>`,
    '</body></html>',
    '',
  ].join('\n');
}

/**
 * The served page's Content-Security-Policy: the coordinator's own, with the page's inline
 * scripts and style allowed by hash and nothing else added (no 'unsafe-inline', no
 * 'unsafe-eval'). Hashes rather than a nonce: the page is cached as bytes and served to many.
 */
export function reportCsp(base: string, assets: HtmlAssets): string {
  const directives = base
    .split(';')
    .map((d) => d.trim())
    .filter((d) => d !== '');
  const add = (name: string, hashes: readonly string[]) => {
    const i = directives.findIndex((d) => d.split(/\s+/)[0]?.toLowerCase() === name);
    const own = i < 0 ? `${name} 'self'` : (directives[i] ?? name);
    const next = `${own.split(/\s+/).filter((s) => s !== "'none'").join(' ')} ${hashes.join(' ')}`;
    if (i < 0) directives.push(next);
    else directives[i] = next;
  };
  add('script-src', assets.scriptHashes);
  add('style-src', assets.styleHashes);
  return directives.join('; ');
}
