/**
 * `GET /v1/history`: the series of the matrices of one name over time, with their change points
 * (history/history.ts), paged by series; the same answer `fsbench history` prints from files.
 */
import { Router, type RequestHandler } from 'express';
import { z } from 'zod';
import { CONTENT_TYPES, FORMAT_NAMES, render } from '../../report/export/index.js';
import { exportableHistory, History, HISTORY_PAGE, paramFilter } from '../history/index.js';
import { unguarded } from '../http/index.js';
import type { Reads } from './reads.js';

/** `files=128,bufferBytes=64KiB` as parameter values, each as a matrix would spell it. */
const params = z
  .string()
  .max(2000)
  .transform((s, ctx) => {
    const f = paramFilter(s.split(',').filter((p) => p.trim() !== ''));
    if (!f.ok) ctx.addIssue({ code: 'custom', message: `${f.bad} is not NAME=VALUE, such as files=128` });
    return f.ok ? f.params : {};
  });

export const HistoryQuery = z
  .object({
    /** The matrix name. */
    name: z.string().min(1).max(100),
    machine: z.string().min(1).max(200).optional(),
    metric: z.string().min(1).max(64).optional(),
    /** Comma-separated NAME=VALUE: only cells with these parameter values. */
    param: params.optional(),
    limit: z.coerce.number().int().min(1).max(HISTORY_PAGE.max).default(HISTORY_PAGE.default),
    /** The `next` of the previous page. */
    after: z.string().max(1000).optional(),
    /** With `table` or `md`: every point of every series, not only the series. */
    points: z.enum(['true', 'false']).transform((v) => v === 'true').optional(),
    format: z.enum([...FORMAT_NAMES, 'document']).default('json'),
  })
  .strict();

/** `GET /v1/history`'s answer, rendered as the query's format asks. */
export function historyText(history: History, q: z.infer<typeof HistoryQuery>): string {
  const page = history.series({
    name: q.name,
    limit: q.limit,
    ...(q.machine === undefined ? {} : { machine: q.machine }),
    ...(q.metric === undefined ? {} : { metric: q.metric }),
    ...(q.param === undefined ? {} : { params: q.param }),
    ...(q.after === undefined ? {} : { after: q.after }),
  });
  const out = exportableHistory(q.name, page, q.points === true);
  return q.format === 'document' ? JSON.stringify({ document: out.doc() }) : render(q.format, out);
}

export interface HistoryRouteDeps {
  readonly history: History;
  /** The coordinator's read guard (requireRead); open when omitted. */
  readonly read?: RequestHandler;
  /** Where the pages are computed, within which limits (reads.ts); on the event loop, unlimited, when omitted. */
  readonly reads?: Reads;
}

export function historyRouter(deps: HistoryRouteDeps): Router {
  const router = Router();
  const { reads } = deps;
  router.get('/v1/history', deps.read ?? unguarded, ...(reads ? [reads.limit] : []), async (req, res) => {
    const q = HistoryQuery.parse(req.query);
    const here = () => historyText(deps.history, q);
    const text = reads ? await reads.run(res, 'history', req.query, here) : here();
    if (text === undefined || res.destroyed) return;
    res.type(q.format === 'document' ? 'application/json; charset=utf-8' : CONTENT_TYPES[q.format]).send(text);
  });
  return router;
}
