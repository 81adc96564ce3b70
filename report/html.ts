/**
 * A report as one self-contained HTML page: it opens offline (no URL outside the file, not even
 * a font), renders under `default-src 'self'` with the hashes `reportCsp` adds, and shows what
 * the dashboard's matrix view shows: the charts (chosen by report/charts.ts and drawn by the
 * dashboard's own code, bundled), then the report's document (results-view.ts pageDoc: notes,
 * knees, cells with each cell's notes, every field of each machine's fingerprint) rendered by
 * the HTML exporter the dashboard renders it with.
 *
 * Built from the report model, so its size follows the cells, not the runs; every text from the
 * results is escaped by the exporter, and the charts (their specs, chosen here) sit in a JSON
 * block whose `<` are escaped, so no value can end an element or start one.
 */
import { chartInput, chartsOf, MAX_CHART_CELLS, type Charts } from './charts.js';
import { docHtml, el, preambleHtml, text } from './export/html.js';
import type { Doc } from './export/index.js';
import type { Report } from './model.js';
import { pageDoc } from './results-view.js';
import type { HtmlAssets } from './html-assets.js';

/** Cells listed in the tables: a matrix's maximum; a larger report says it lists only these. */
export const MAX_HTML_CELLS = 10_000;

export interface HtmlOptions {
  /** The matrix's description, where the source has it (a coordinator). */
  readonly description?: string | undefined;
  /** Where the results came from (a file, a coordinator's matrix). */
  readonly source?: string | undefined;
  /** fsbench's version, shown with the source. */
  readonly version?: string | undefined;
}

/** JSON inside a `<script type="application/json">`: no `<` can close the element. */
function jsonBlock(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

function chartsSection(capped: string | null): string {
  return el(
    'section',
    { id: 'charts-section' },
    text('h3', {}, 'Charts'),
    capped === null ? '' : text('p', { class: 'hint capped' }, capped),
    el('div', { class: 'charts', id: 'charts' }, el('noscript', {}, text('p', {}, 'The charts need JavaScript; the tables below hold every number they draw.'))),
  );
}

/** What one page shows: a document, with the charts above it. */
export interface HtmlPage {
  readonly title: string;
  /** The page's heading, above the title: `fsbench report`, `fsbench history`. */
  readonly heading: string;
  readonly doc: Doc;
  readonly charts: Charts;
  /** Said above the charts when they draw only part of what the tables list. */
  readonly capped?: string | null;
}

/**
 * A whole page. `assets` from htmlAssets(): the inline scripts and style whose hashes reportCsp
 * allows. The charts first: the notes (the document's first section) explain what they show.
 */
export function renderHtmlPage(page: HtmlPage, assets: HtmlAssets, options: HtmlOptions = {}): string {
  const made = `Made by fsbench${options.version ? ` ${options.version}` : ''}${options.source ? ` from ${options.source}` : ''}. This file needs no network: the charts, their data and Chart.js are inside it.`;
  const head = el(
    'div',
    { class: 'report-head' },
    text('h2', {}, page.title),
    options.description ? text('p', { class: 'hint description' }, options.description) : '',
    preambleHtml(page.doc),
    text('p', { class: 'hint' }, made),
  );
  return [
    '<!doctype html>',
    '<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">',
    text('title', {}, `fsbench: ${page.title}`),
    // Browsers ask for /favicon.ico without one; a data: URL keeps the page off the network.
    '<link rel="icon" href="data:,">',
    `<style>${assets.style}</style>`,
    '</head><body data-ready="static">',
    el('header', {}, text('h1', {}, page.heading)),
    el('main', {}, head, chartsSection(page.capped ?? null), docHtml(page.doc)),
    `<script type="application/json" id="fsbench-data">${jsonBlock(page.charts)}</script>`,
    `<script>${assets.chartJs}</script>`,
    `<script type="module">${assets.script}</script>`,
    '</body></html>',
    '',
  ].join('\n');
}

/** A matrix's report as a page: what the dashboard's matrix view shows. */
export function renderHtmlReport(report: Report, assets: HtmlAssets, options: HtmlOptions = {}): string {
  const capped = report.cells.length > MAX_CHART_CELLS ? `The charts draw the first ${MAX_CHART_CELLS} of ${report.cells.length} cells.` : null;
  return renderHtmlPage({ title: report.title, heading: 'fsbench report', doc: pageDoc(report, MAX_HTML_CELLS), charts: chartsOf(chartInput(report)), capped }, assets, options);
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
