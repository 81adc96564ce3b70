/**
 * A stored matrix's report, built off the event loop. Building it costs seconds of CPU for a
 * large matrix (2.5 s for 20,000 runs with histograms here), which on the event loop would stall
 * every other request, /healthz included. So results answers get it from one worker thread with
 * its own connection to the database, once per matrix version however many clients ask
 * (ReportCache), which keeps the latest renderings.
 */
import path from 'node:path';
import { parentPort, Worker } from 'node:worker_threads';
import { z } from 'zod';
import { FsbenchError, isErrorCode, toFsbenchError, messageOf } from '../../contract/errors.js';
import { adaptiveRepetitions } from '../../contract/matrix.js';
import { buildReport } from '../../report/build.js';
import { render } from '../../report/export/index.js';
import { MAX_HTML_CELLS, renderHtmlReport } from '../../report/html.js';
import { htmlAssets } from '../../report/html-assets.js';
import type { Report } from '../../report/model.js';
import { exportableReport, pageDoc } from '../../report/results-view.js';
import { Store, storeRunSource, type MatrixRecord } from '../store/index.js';

/**
 * The report thread ends after this long without work: its heap, a few hundred MB after a large
 * report, goes back to the system, for about 0.3 s of start-up the next time.
 */
const REPORT_THREAD_IDLE_MS = 5000;

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

export function renderReport(store: Store, m: MatrixRecord, as: Rendering): string {
  if (as === 'html') return renderHtmlReport(matrixReport(store, m), htmlAssets(), { description: m.spec.description, source: `matrix ${m.id} on the coordinator` });
  if (as === 'document') return JSON.stringify({ document: pageDoc(matrixReport(store, m), MAX_HTML_CELLS) });
  const report = exportableReport(matrixReport(store, m));
  return as === 'fragment' ? JSON.stringify(report.json()) : render(as, report);
}

/**
 * As bytes: every answer that carries the report writes this one buffer (a string would be
 * encoded again for each), and the report thread hands it over without a copy.
 */
function reportBytes(store: Store, m: MatrixRecord, as: Rendering): Uint8Array {
  return new TextEncoder().encode(renderReport(store, m, as));
}

const ReportJob = z.object({ seq: z.number().int(), dataDir: z.string(), id: z.string(), as: z.enum(RENDERINGS) }).strict();
const ReportAnswer = z.union([
  z.object({ ready: z.literal(true) }).strict(),
  z.object({ seq: z.number().int(), bytes: z.instanceof(Uint8Array) }).strict(),
  z.object({ seq: z.number().int(), code: z.string(), message: z.string() }).strict(),
]);

/** The report thread's side: each report asked for, built from its own connection to the database. */
export function serveReports(): void {
  const port = parentPort;
  if (port === null) throw new Error('serveReports runs in a worker thread');
  const stores = new Map<string, Store>();
  port.on('message', (raw: unknown) => {
    const job = ReportJob.parse(raw);
    try {
      let store = stores.get(job.dataDir);
      if (store === undefined) {
        store = Store.open(job.dataDir);
        stores.set(job.dataDir, store);
      }
      const m = store.getMatrix(job.id);
      if (!m) throw new FsbenchError('NOT_FOUND', `no matrix ${job.id}`);
      const bytes = reportBytes(store, m, job.as);
      port.postMessage({ seq: job.seq, bytes }, bytes.buffer instanceof ArrayBuffer ? [bytes.buffer] : []);
    } catch (err) {
      const e = toFsbenchError(err);
      port.postMessage({ seq: job.seq, code: e.code, message: e.message });
    }
  });
  port.postMessage({ ready: true });
}

interface Pending {
  readonly resolve: (bytes: Buffer) => void;
  readonly reject: (err: Error) => void;
  /** Builds it on this thread instead, when no report thread can start. */
  readonly here: () => void;
}

/**
 * One worker thread per process building reports, started when first needed and ended when idle.
 * It loads this module compiled (dist/); from the TypeScript sources (the tests), or when it
 * cannot start, or for an in-memory database it cannot open, reports are built on the calling
 * thread as before.
 */
class ReportThread {
  private worker: Worker | undefined;
  private ready = false;
  private unavailable = !import.meta.url.endsWith('.js');
  private seq = 0;
  private readonly pending = new Map<number, Pending>();
  private idle: NodeJS.Timeout | undefined;

  render(store: Store, m: MatrixRecord, as: Rendering): Promise<Buffer> {
    const here = () => asBuffer(reportBytes(store, m, as));
    const file = store.file;
    if (this.unavailable || file === ':memory:' || file === '') return Promise.resolve().then(here);
    const seq = ++this.seq;
    return new Promise<Buffer>((resolve, reject) => {
      const fallback = () => {
        try {
          resolve(here());
        } catch (err) {
          reject(err instanceof Error ? err : new Error(String(err)));
        }
      };
      this.pending.set(seq, { resolve, reject, here: fallback });
      clearTimeout(this.idle);
      this.start().postMessage({ seq, dataDir: path.dirname(file), id: m.id, as });
    });
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    const w = new Worker(`import(${JSON.stringify(import.meta.url)}).then((m) => m.serveReports());`, { eval: true });
    w.on('message', (raw: unknown) => {
      this.answer(raw);
    });
    w.on('error', (err) => {
      this.lost(w, err);
    });
    w.on('exit', () => {
      this.lost(w, new Error('the report thread exited'));
    });
    // After the listeners: adding a 'message' listener refs the thread again, and an idle report
    // thread must not keep a stopping coordinator alive.
    w.unref();
    this.worker = w;
    this.ready = false;
    return w;
  }

  private answer(raw: unknown): void {
    const parsed = ReportAnswer.safeParse(raw);
    if (!parsed.success) return;
    const a = parsed.data;
    if ('ready' in a) {
      this.ready = true;
      return;
    }
    const p = this.pending.get(a.seq);
    this.pending.delete(a.seq);
    if ('bytes' in a) p?.resolve(asBuffer(a.bytes));
    else p?.reject(new FsbenchError(isErrorCode(a.code) ? a.code : 'INTERNAL', a.message));
    if (this.pending.size === 0) {
      clearTimeout(this.idle);
      this.idle = setTimeout(() => {
        const w = this.worker;
        this.worker = undefined;
        void w?.terminate();
      }, REPORT_THREAD_IDLE_MS).unref();
    }
  }

  /** The thread failed or ended: what it was building is built here if it never started, else refused. */
  private lost(w: Worker, err: unknown): void {
    if (this.worker !== w) return;
    this.worker = undefined;
    if (!this.ready) this.unavailable = true;
    const jobs = [...this.pending.values()];
    this.pending.clear();
    for (const j of jobs) {
      if (this.unavailable) j.here();
      else j.reject(new FsbenchError('INTERNAL', `building the report failed: ${messageOf(err)}`));
    }
  }
}

const reportThread = new ReportThread();

/**
 * The renderings of one coordinator's reports by matrix version (id, stored runs, state): the
 * clients of one matrix share one build, pending or done, and the most recent renderings are kept
 * up to REPORT_CACHE_BYTES. A report that changed since is a new version, built afresh.
 */
export class ReportCache {
  private readonly entries = new Map<string, { readonly bytes: Promise<Buffer>; size: number }>();
  private size = 0;

  constructor(private readonly store: Store) {}

  get(m: MatrixRecord, as: Rendering): Promise<Buffer> {
    const key = [m.id, m.storedRuns, m.state, as].join('\u0000');
    const hit = this.entries.get(key);
    if (hit) {
      this.entries.delete(key);
      this.entries.set(key, hit);
      return hit.bytes;
    }
    const entry = { bytes: reportThread.render(this.store, m, as), size: 0 };
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

export const asBuffer = (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength);

