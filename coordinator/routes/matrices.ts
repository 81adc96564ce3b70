/**
 * The `/v1/matrices` routes: submit (validate, expand, place, check the limits, store, enqueue),
 * list, show, cancel, results and progress events.
 */
import { Router } from 'express';
import { z } from 'zod';
import { FsbenchError } from '../../contract/errors.js';
import { matrixOf, readBody, requireRead, requireWrite, withDeadline, type AuthConfig } from '../http/index.js';
import type { Log } from '../../log/index.js';
import {
  detailOf, isFinal, requestOf, Submissions, summaryOf, type Cancelled, type CoordinatorParts, type Limits, type MatrixList, type ProgressHub,
} from '../matrices/index.js';
import { eventsHandler } from './events.js';
import { downloads, resultsHandler, takeDownloadSlot } from './results.js';
import { htmlAssets } from '../../report/html-assets.js';
import { reportCsp } from '../../report/html.js';
export type { Limits } from '../matrices/index.js';
import { MATRIX_STATES, type MatrixRecord } from '../store/index.js';
import type { Enrollment } from '../enrollment/index.js';


export interface MatricesDeps extends CoordinatorParts {
  readonly hub: ProgressHub;
  readonly auth: AuthConfig;
  readonly limits: Limits;
  /** Enrolled agent keys: placements choose among their hosts only. Every host counts when omitted (tests of the API alone). */
  readonly enrollment?: Enrollment | undefined;
  /** Inside a request the line carries its id, path and principal; `fields` are for log pipelines. */
  readonly log: Log;
}

const ListQuery = z
  .object({
    state: z.enum(MATRIX_STATES).optional(),
    limit: z.coerce.number().int().min(1).max(1000).default(100),
  })
  .strict();

export function matricesRouter(d: MatricesDeps): Router {
  const { store, dispatcher, hub, limits } = d;
  const router = Router();
  const read = requireRead(d.auth);
  const write = requireWrite(d.auth);
  const submissions = new Submissions(d);
  const { enqueueing } = submissions;

  const find = (id: unknown): MatrixRecord => {
    const m = typeof id === 'string' ? store.getMatrix(id) : undefined;
    if (!m) throw new FsbenchError('NOT_FOUND', `no matrix ${String(id)}`);
    return m;
  };

  router.post('/', write, ...readBody('matrix', limits.maxBody), async (req, res) => {
    const key = Submissions.key(req.get('idempotency-key'));
    const answer = await submissions.submit(matrixOf(req), key);
    res.status(answer.status).location(answer.location).json(answer.body);
  });

  router.get('/', read, (req, res) => {
    const q = ListQuery.parse(req.query);
    const list: MatrixList = { matrices: store.listMatrices(q.limit, q.state).map(summaryOf) };
    res.json(list);
  });

  router.get('/:id', read, (req, res) => {
    res.json(detailOf(store, find(req.params.id)));
  });

  router.delete('/:id', write, async (req, res) => {
    const m = find(req.params.id);
    if (isFinal(m.state)) throw new FsbenchError('CONFLICT', `matrix ${m.id} is already ${m.state}`);
    store.cancel(m.id);
    await enqueueing.get(m.id)?.catch(() => undefined);
    const request = requestOf(store, m);
    const removed = await withDeadline(dispatcher.cancel(request), 'removing the queued runs');
    hub.changed([m.id]);
    d.log(`matrix ${m.id} cancelled: ${removed} queued runs removed`, { event: 'matrix.cancelled', matrixId: m.id, removedRuns: removed });
    const cancelled: Cancelled = { ...summaryOf(find(m.id)), removedRuns: removed };
    res.json(cancelled);
  });

  // The results and the HTML report are downloads alike: FSBENCH_MAX_DOWNLOADS at once between
  // them, reports built in the report thread and cached per matrix version.
  const shared = downloads(store, d.limits.maxDownloads);
  router.get('/:id/results', read, resultsHandler(store, shared));
  router.get('/:id/events', read, eventsHandler(store, hub, d.limits.maxStreams));

  // The report's document, as the HTML page shows it: the dashboard renders it with the page's exporter.
  router.get('/:id/document', read, async (req, res) => {
    const m = find(req.params.id);
    takeDownloadSlot(shared.slots, res);
    const bytes = await shared.reports.get(m, 'document');
    if (res.destroyed) return;
    res.type('application/json; charset=utf-8').send(bytes);
  });

  router.get('/:id/report.html', read, async (req, res) => {
    const m = find(req.params.id);
    takeDownloadSlot(shared.slots, res);
    const bytes = await shared.reports.get(m, 'html');
    if (res.destroyed) return;
    // The page carries its scripts and style inline: the policy helmet set, plus their hashes.
    const base = res.getHeader('Content-Security-Policy');
    res
      .set('Content-Security-Policy', reportCsp(typeof base === 'string' ? base : "default-src 'self'", htmlAssets()))
      .set('Content-Disposition', `inline; filename="${m.spec.name.replace(/[^A-Za-z0-9._-]/g, '_')}.html"`)
      .type('text/html; charset=utf-8')
      .send(bytes);
  });
  return router;
}
