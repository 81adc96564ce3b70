/**
 * `GET /v1/matrices/:id/results`: the matrix's report (report/build.ts, the one every output
 * shares) in any exporter's format, or, as JSON, `{ matrix, report, runs, next }`: one page of
 * the stored runs. CSV is the report's long table, or every raw run with `table=runs`.
 *
 * Runs leave in chunks read from SQLite with all() (no iterator held open while waiting), each
 * written only once the client has taken the one before (the socket's 'drain'), and reading stops
 * as soon as the client goes away. So a large matrix never sits in memory, a slow or gone client
 * costs neither memory nor CPU, and the collector can store runs between two chunks. At most
 * FSBENCH_MAX_DOWNLOADS results requests are answered at once (resultsHandler); the report each
 * answer carries comes from reports/report-cache.ts, built off the event loop.
 */
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { RequestHandler, Response } from 'express';
import { z } from 'zod';
import { FsbenchError } from '../../contract/errors.js';
import { WORKLOADS } from '../../contract/workloads/index.js';
import { csvLine } from '../../report/export/csv.js';
import { CONTENT_TYPES, FORMAT_NAMES } from '../../report/export/index.js';
import { defaultOf } from '../../settings/index.js';
import { Slots } from '../http/index.js';
import { ReportCache, runJson, runView, type Rendering } from '../reports/index.js';
import type { MatrixRecord, PositionedRunRow, RunPosition, Store } from '../store/index.js';
import { summaryOf } from '../matrices/index.js';

/** Runs in one JSON page when `limit` is not given. */
export const RESULTS_PAGE_DEFAULT = 1000;
/** Most runs one JSON page may ask for: about 15 MB with histograms, a few seconds of one slot. */
export const RESULTS_PAGE_MAX = 10_000;
/** Most runs read from SQLite at a time: small enough to yield often, large enough to batch. */
const CHUNK = 200;
const MIN_CHUNK = 8;
/**
 * About how much of the stored rows one chunk holds: a download's memory does not grow with its
 * runs' histograms, and one chunk costs the event loop a millisecond or two (SQLite reads such
 * rows at about 40 us each), so that /healthz waits little behind eight downloads.
 */
const CHUNK_BYTES = 128 * 1024;
/** About how much is written at once (UTF-16 code units): a few of the socket's 16 KiB chunks. */
const FLUSH_BYTES = 64 * 1024;
/** A download slot frees when a page has been sent, usually within a second or two. */
const DOWNLOAD_RETRY_AFTER_S = 2;

const Position = z.tuple([z.number().int().nonnegative(), z.string(), z.string(), z.number().int().nonnegative()]);

/** The opaque `cursor` of the page after `p`: base64url of its position in the store's order. */
export function encodeCursor(p: RunPosition): string {
  return Buffer.from(JSON.stringify([p.position, p.machine, p.target, p.repetition])).toString('base64url');
}

function decodeCursor(text: string, ctx: z.RefinementCtx): RunPosition {
  let raw: unknown;
  try {
    raw = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    raw = undefined;
  }
  const p = Position.safeParse(raw);
  if (!p.success) {
    ctx.addIssue({ code: 'custom', message: "not a cursor this coordinator gave out: pass the previous page's `next` as it is" });
    return z.NEVER;
  }
  const [position, machine, target, repetition] = p.data;
  return { position, machine, target, repetition };
}

export const ResultsQuery = z
  .object({
    format: z.enum(FORMAT_NAMES).default('json'),
    table: z.enum(['cells', 'runs']).default('cells'),
    histograms: z.enum(['0', '1', 'false', 'true']).default('0').transform((v) => v === '1' || v === 'true'),
    /** Runs in this JSON page (RESULTS_PAGE_DEFAULT when omitted). */
    limit: z.coerce.number().int().min(1).max(RESULTS_PAGE_MAX).optional(),
    /** The previous page's `next`. */
    cursor: z.string().max(2048).transform(decodeCursor).optional(),
  })
  .strict()
  .refine((q) => q.format === 'json' || (q.limit === undefined && q.cursor === undefined), {
    error: 'limit and cursor page the JSON runs (format=json); format=csv&table=runs streams every run',
    path: ['limit'],
  });
export type ResultsQuery = z.infer<typeof ResultsQuery>;

/** How a results answer gets its report rendered. */
type Reports = (m: MatrixRecord, as: Rendering) => Buffer | Promise<Buffer>;

/** Writes `text`; when the socket is full, waits until it drains or the client goes away. False once the client is gone. */
async function put(res: Response, text: string | Buffer): Promise<boolean> {
  if (res.destroyed) return false;
  if (!res.write(text)) {
    await new Promise<void>((resolve) => {
      const done = () => {
        res.off('drain', done);
        res.off('close', done);
        resolve();
      };
      res.on('drain', done);
      res.on('close', done);
    });
  }
  return !res.destroyed;
}

/** A stored row's weight in bytes, near enough: its JSON columns. */
function rowBytes(row: PositionedRunRow): number {
  return 200 + row.params.length + (row.metrics?.length ?? 0) + (row.details?.length ?? 0) + (row.histograms?.length ?? 0) + (row.interference?.length ?? 0);
}

/**
 * Each chunk of up to `limit` runs after `after`, read only once the one before was written, so
 * a client that stops reading stops the reading. Chunks hold about CHUNK_BYTES: runs with large
 * histograms come fewer at a time. `last` is where the final chunk ended.
 */
async function* chunks(store: Store, m: MatrixRecord, after: RunPosition | null, limit: number, last: { at: RunPosition | null }): AsyncGenerator<PositionedRunRow[]> {
  let left = limit;
  let from = after;
  let size = CHUNK;
  while (left > 0) {
    const want = Math.min(size, left);
    const rows = store.runsPage(m.id, from, want);
    const end = rows.at(-1);
    if (end === undefined) return;
    from = { position: end.position, machine: end.machine, target: end.target, repetition: end.repetition };
    last.at = from;
    left -= rows.length;
    const bytes = rows.reduce((n, r) => n + rowBytes(r), 0);
    size = Math.max(MIN_CHUNK, Math.min(CHUNK, Math.floor((CHUNK_BYTES * rows.length) / bytes)));
    yield rows;
    if (rows.length < want) return;
    // Lets /healthz, the collector and other clients in between the chunks of a client on
    // loopback, whose writes seldom fill the socket.
    await yieldToEventLoop();
  }
}

/** Each text of `rows`, made as it is needed. */
function* texts(rows: readonly PositionedRunRow[], f: (row: PositionedRunRow) => string): Generator<string> {
  for (const row of rows) yield f(row);
}

/**
 * Writes texts joined by `sep`, in writes of about FLUSH_BYTES, each after the socket took the
 * one before: what is held per download is one write, whatever the runs weigh (a run with
 * histograms of 4096 buckets is about 100 KB). False once the client is gone.
 */
async function putAll(res: Response, parts: Iterable<string>, sep: string, first: boolean): Promise<boolean> {
  let buffer = '';
  let lead = first ? '' : sep;
  for (const t of parts) {
    buffer += lead + t;
    lead = sep;
    if (buffer.length >= FLUSH_BYTES) {
      if (!(await put(res, buffer))) return false;
      buffer = '';
    }
  }
  return buffer === '' || put(res, buffer);
}

async function writeJson(res: Response, store: Store, m: MatrixRecord, summary: unknown, q: ResultsQuery, reports: Reports): Promise<void> {
  const limit = q.limit ?? RESULTS_PAGE_DEFAULT;
  const after = q.cursor ?? null;
  // The report summarises every run, so it comes whole, once: on the first page.
  const report = after === null ? await reports(m, 'fragment') : null;
  res.type(CONTENT_TYPES.json);
  const head = `{"matrix":${JSON.stringify(summary)},`;
  for (const part of report === null ? [`${head}"runs":[`] : [`${head}"report":`, report, ',"runs":[']) {
    if (!(await put(res, part))) return;
  }
  const last: { at: RunPosition | null } = { at: null };
  let written = 0;
  for await (const rows of chunks(store, m, after, limit, last)) {
    if (!(await putAll(res, texts(rows, (row) => runJson(row, q.histograms)), ',', written === 0))) return;
    written += rows.length;
  }
  const more = written === limit && last.at !== null && store.runsPage(m.id, last.at, 1).length > 0;
  res.end(`],"next":${more && last.at !== null ? JSON.stringify(encodeCursor(last.at)) : 'null'}}`);
}

function csvRow(params: readonly string[], metrics: readonly string[], row: PositionedRunRow): string {
  const r = runView(row, false);
  return csvLine([r.cellId, r.repetition, r.machine, r.state, ...params.map((p) => r.params[p]),
    ...metrics.map((k) => r.metrics?.[k]), r.error?.code, r.error?.message, r.reason]);
}

async function writeRunsCsv(res: Response, store: Store, m: MatrixRecord): Promise<void> {
  const params = Object.keys(WORKLOADS[m.spec.workload].params);
  const metrics = Object.keys(WORKLOADS[m.spec.workload].metricDocs);
  res.type(CONTENT_TYPES.csv);
  if (!(await put(res, csvLine(['cellId', 'repetition', 'machine', 'state', ...params, ...metrics, 'errorCode', 'errorMessage', 'reason'])))) return;
  for await (const rows of chunks(store, m, null, Number.POSITIVE_INFINITY, { at: null })) {
    if (!(await putAll(res, texts(rows, (row) => csvRow(params, metrics, row)), '', true))) return;
  }
  res.end();
}

/** Answers one results request; rejects like a route (before the first byte, the error handler answers; after, the connection is cut). */
export async function streamResults(res: Response, store: Store, m: MatrixRecord, summary: unknown, q: ResultsQuery, reports: Reports): Promise<void> {
  if (q.format === 'json') {
    await writeJson(res, store, m, summary, q, reports);
  } else if (q.format === 'csv' && q.table === 'runs') {
    await writeRunsCsv(res, store, m);
  } else {
    const bytes = await reports(m, q.format);
    if (!res.destroyed) res.type(CONTENT_TYPES[q.format]).send(bytes);
  }
}

const IdParam = z.object({ id: z.string() });

/** What the downloads of one coordinator share: FSBENCH_MAX_DOWNLOADS slots and the report cache. */
export interface Downloads {
  readonly slots: Slots;
  readonly reports: ReportCache;
}

export function downloads(store: Store, maxDownloads = defaultOf('maxDownloads')): Downloads {
  return { slots: new Slots(maxDownloads), reports: new ReportCache(store) };
}

/** A download slot for `res`, held until it closes; 503 with Retry-After when all are taken. */
export function takeDownloadSlot(slots: Slots, res: Response): void {
  if (slots.take(res)) return;
  throw new FsbenchError(
    'UNAVAILABLE',
    `${slots.capacity} downloads are in progress, the most this coordinator serves at once (FSBENCH_MAX_DOWNLOADS): try again in ${DOWNLOAD_RETRY_AFTER_S} s`,
    [],
    { 'Retry-After': String(DOWNLOAD_RETRY_AFTER_S) },
  );
}

/**
 * The route: at most `maxDownloads` answers at once (shared with the HTML report), each holding
 * its slot until its response closes (sent, failed or abandoned by the client); more are refused
 * with 503 and Retry-After.
 */
export function resultsHandler(store: Store, shared: Downloads = downloads(store)): RequestHandler {
  const { slots, reports } = shared;
  return async (req, res) => {
    const q = ResultsQuery.parse(req.query);
    const { id } = IdParam.parse(req.params);
    const m = store.getMatrix(id);
    if (!m) throw new FsbenchError('NOT_FOUND', `no matrix ${id}`);
    takeDownloadSlot(slots, res);
    await streamResults(res, store, m, summaryOf(m), q, (matrix, as) => reports.get(matrix, as));
  };
}
