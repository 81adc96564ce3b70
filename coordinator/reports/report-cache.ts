/**
 * A stored matrix's report, built off the event loop. Building it costs seconds of CPU for a
 * large matrix (2.5 s for 20,000 runs with histograms here), which on the event loop would stall
 * every other request, /healthz included. So results answers get it from one worker thread with
 * its own connection to the database (off-thread.ts), built once per matrix version however many
 * clients ask and in however many renderings: the thread keeps the latest build of each matrix,
 * and ReportCache the latest renderings.
 */
import { z } from 'zod';
import { FsbenchError } from '../../contract/errors.js';
import { adaptiveRepetitions } from '../../contract/matrix.js';
import { buildReport } from '../../report/build.js';
import { render } from '../../report/export/index.js';
import { MAX_HTML_CELLS, renderHtmlReport } from '../../report/html.js';
import { htmlAssets } from '../../report/html-assets.js';
import type { Report } from '../../report/model.js';
import { exportableReport, pageDoc } from '../../report/results-view.js';
import { storeRunSource, type MatrixRecord, type Store } from '../store/index.js';
import { OffThread, serveJobs, type Done } from './off-thread.js';

/** Bytes of rendered reports kept per coordinator (a 2,000-cell report is about 13 MB of JSON). */
const REPORT_CACHE_BYTES = 64 * 1024 ** 2;

/** The report of a stored matrix: its runs streamed through the one aggregation, cell by cell. */
export function matrixReport(store: Store, m: MatrixRecord): Report {
  const source = storeRunSource(store)(m.id);
  if (!source) throw new FsbenchError('NOT_FOUND', `no matrix ${m.id}`);
  const adaptive = adaptiveRepetitions(m.spec);
  return buildReport(source.runs, {
    title: `${m.name} (${m.id}): ${m.state}`,
    grouped: true,
    cellOrder: source.cellOrder,
    fingerprintOf: source.fingerprintOf,
    ...(adaptive ? { precision: { metric: adaptive.metric, target: adaptive.target } } : {}),
  });
}

/**
 * A report as an answer carries it: the JSON inside a results page, an exporter's text, the
 * HTML page, or the page's document as JSON (what the dashboard renders with the page's exporter).
 */
const RENDERINGS = ['fragment', 'table', 'md', 'csv', 'html', 'document'] as const;
export type Rendering = (typeof RENDERINGS)[number];

/** Estimated bytes of built reports the report thread keeps, by their size as JSON. */
const REPORT_BUILDS_BYTES = 64 * 1024 ** 2;

/**
 * The latest built report of each matrix this thread was asked for, by matrix version (stored
 * runs, state: what changes its title and numbers), the least recently used dropped past
 * REPORT_BUILDS_BYTES: every rendering of one version (the page, its CSV, its Markdown, the JSON
 * in a results page) is rendered from one build, which is what costs (seconds for 20,000 runs);
 * rendering one is a small part of that.
 */
const builtReports = new Map<string, { readonly version: string; readonly report: Report; readonly size: number }>();
let builtBytes = 0;

function keepBuilt(key: string, entry: { readonly version: string; readonly report: Report; readonly size: number }): void {
  const old = builtReports.get(key);
  if (old) {
    builtReports.delete(key);
    builtBytes -= old.size;
  }
  if (entry.size > REPORT_BUILDS_BYTES) return;
  builtReports.set(key, entry);
  builtBytes += entry.size;
  for (const [k, e] of builtReports) {
    if (builtBytes <= REPORT_BUILDS_BYTES) break;
    builtReports.delete(k);
    builtBytes -= e.size;
  }
}

/** `m`'s report, built once per matrix version on this thread; `built` says whether this call built it. */
function builtReport(store: Store, m: MatrixRecord): { readonly report: Report; readonly built: boolean } {
  const key = `${store.file}\u0000${m.id}`;
  const version = `${m.storedRuns}\u0000${m.state}`;
  const hit = builtReports.get(key);
  if (hit?.version === version) {
    builtReports.delete(key);
    builtReports.set(key, hit);
    return { report: hit.report, built: false };
  }
  const report = matrixReport(store, m);
  keepBuilt(key, { version, report, size: JSON.stringify(report).length });
  return { report, built: true };
}

/** A rendering of `report`: the work after the build. */
function renderBuilt(report: Report, m: MatrixRecord, as: Rendering): string {
  if (as === 'html') return renderHtmlReport(report, htmlAssets(), { description: m.spec.description, source: `matrix ${m.id} on the coordinator` });
  if (as === 'document') return JSON.stringify({ document: pageDoc(report, MAX_HTML_CELLS) });
  const exportable = exportableReport(report);
  return as === 'fragment' ? JSON.stringify(exportable.json()) : render(as, exportable);
}

/** A rendering of `m` built afresh, as a results answer carries it (without the cache). */
export function renderReport(store: Store, m: MatrixRecord, as: Rendering): string {
  return renderBuilt(matrixReport(store, m), m, as);
}

/**
 * As bytes: every answer that carries the report writes this one buffer (a string would be
 * encoded again for each), and the report thread hands it over without a copy. Rendered from the
 * version's one build.
 */
function reportBytes(store: Store, m: MatrixRecord, as: Rendering): Done {
  const { report, built } = builtReport(store, m);
  return { bytes: new TextEncoder().encode(renderBuilt(report, m, as)), builds: built ? 1 : 0 };
}

const ReportJob = z.object({ id: z.string(), as: z.enum(RENDERINGS) }).strict();

/** The report thread's side: each rendering asked for, from its own connection to the database. */
export function serveReports(): void {
  serveJobs({
    report: (store, args) => {
      const job = ReportJob.parse(args);
      const m = store.getMatrix(job.id);
      if (!m) throw new FsbenchError('NOT_FOUND', `no matrix ${job.id}`);
      return reportBytes(store, m, job.as);
    },
  });
}

/**
 * One thread per process building reports, so that it keeps their builds; started when first
 * needed, ended after a minute without work (its heap, with the builds it keeps, goes back to the
 * system), so that the renderings a reader asks for one after another share one build.
 */
const reportThread = new OffThread({ module: import.meta.url, serve: 'serveReports', threads: 1, idleMs: 60_000, what: 'building the report' });

/**
 * The renderings of one coordinator's reports by matrix version (id, stored runs, state): the
 * clients of one matrix share one rendering, pending or done, and the most recent renderings are
 * kept up to REPORT_CACHE_BYTES; every rendering of a version is rendered from one build of its
 * report, which the report thread keeps. A report that changed since is a new version, built afresh.
 */
export class ReportCache {
  private readonly entries = new Map<string, { readonly bytes: Promise<Buffer>; size: number }>();
  private size = 0;
  private builds = 0;

  constructor(private readonly store: Store) {}

  /** How many times answers of this cache built a report (a version's first rendering, or one whose build was dropped). */
  get reportsBuilt(): number {
    return this.builds;
  }

  get(m: MatrixRecord, as: Rendering): Promise<Buffer> {
    const key = [m.id, m.storedRuns, m.state, as].join('\u0000');
    const hit = this.entries.get(key);
    if (hit) {
      this.entries.delete(key);
      this.entries.set(key, hit);
      return hit.bytes;
    }
    const rendered = reportThread.run(this.store, 'report', { id: m.id, as }, () => reportBytes(this.store, m, as)).then((d) => {
      this.builds += d.builds;
      return d.bytes;
    });
    const entry = { bytes: rendered, size: 0 };
    this.entries.set(key, entry);
    entry.bytes.then(
      (bytes) => {
        if (this.entries.get(key) !== entry) return;
        entry.size = bytes.length;
        this.size += bytes.length;
        for (const [k, e] of this.entries) {
          if (this.size <= REPORT_CACHE_BYTES) break;
          this.entries.delete(k);
          this.size -= e.size;
        }
      },
      () => {
        if (this.entries.get(key) === entry) this.entries.delete(key);
      },
    );
    return entry.bytes;
  }
}
