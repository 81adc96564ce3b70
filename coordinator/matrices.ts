/**
 * The `/v1/matrices` routes: submit (validate, expand, place, check the limits, store, enqueue),
 * list, show, cancel, results and progress events.
 */
import { randomBytes } from 'node:crypto';
import express, { Router, type Request } from 'express';
import YAML from 'yaml';
import { z } from 'zod';
import { FsbenchError } from '../contract/errors.js';
import { expandMatrix, parseMatrix } from '../contract/matrix.js';
import { formatDuration } from '../contract/units.js';
import { liveAgents } from '../queue/registry.js';
import { requireRead, requireWrite, type AuthConfig } from './auth.js';
import { resolveTargets, type Dispatcher } from './dispatch.js';
import { estimateMatrixMs } from './estimate.js';
import { eventsHandler, isFinal, type ProgressHub } from './events.js';
import { ANY_TARGET } from '../queue/jobs.js';
import { ResultsQuery, writeResults } from './results-format.js';
import { detailOf, summaryOf } from './views.js';
import { MATRIX_STATES, type MatrixRecord, type Store } from './store.js';
import type { Redis } from 'ioredis';

export interface Limits {
  readonly maxBody: number;
  readonly maxRuns: number;
  readonly maxDuration: number;
  readonly maxQueued: number;
}

export interface MatricesDeps {
  readonly store: Store;
  readonly dispatcher: Dispatcher;
  readonly hub: ProgressHub;
  readonly redis: Redis;
  readonly prefix: string;
  readonly auth: AuthConfig;
  readonly limits: Limits;
  readonly log: (line: string) => void;
}

const YAML_TYPES = ['application/yaml', 'application/x-yaml', 'text/yaml', 'text/x-yaml'];
/** Redis calls on a request path give up after this long rather than hang while Redis is away. */
const REDIS_DEADLINE_MS = 10_000;

export async function withDeadline<T>(p: Promise<T>, what: string, ms = REDIS_DEADLINE_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      reject(new FsbenchError('UNAVAILABLE', `${what}: Redis did not answer within ${formatDuration(ms)}`, [], { 'Retry-After': '10' }));
    }, ms);
  });
  try {
    return await Promise.race([p, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

const ListQuery = z
  .object({
    state: z.enum(MATRIX_STATES).optional(),
    limit: z.coerce.number().int().min(1).max(1000).default(100),
  })
  .strict();

function matrixBody(req: Request): unknown {
  const body: unknown = req.body;
  if (req.is(YAML_TYPES)) {
    if (typeof body !== 'string' || body.trim() === '') throw new FsbenchError('BODY_INVALID', 'the body is empty: send a matrix');
    try {
      return YAML.parse(body, { maxAliasCount: 100 });
    } catch (err) {
      throw new FsbenchError('BODY_INVALID', `the body is not valid YAML: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  if (!req.is('application/json')) {
    throw new FsbenchError('UNSUPPORTED_MEDIA_TYPE', `send the matrix as application/json or application/yaml, not ${req.get('content-type') ?? 'no Content-Type'}`);
  }
  if (body === undefined) throw new FsbenchError('BODY_INVALID', 'the body is empty: send a matrix');
  return body;
}

export function matricesRouter(d: MatricesDeps): Router {
  const { store, dispatcher, hub, limits } = d;
  const router = Router();
  const read = requireRead(d.auth);
  const write = requireWrite(d.auth);
  /** Enqueueing in progress per matrix, so a cancel waits for it before removing jobs. */
  const enqueueing = new Map<string, Promise<unknown>>();

  const find = (id: unknown): MatrixRecord => {
    const m = typeof id === 'string' ? store.getMatrix(id) : undefined;
    if (!m) throw new FsbenchError('NOT_FOUND', `no matrix ${String(id)}`);
    return m;
  };

  router.post(
    '/',
    write,
    express.json({ limit: limits.maxBody, strict: false }),
    express.text({ type: YAML_TYPES, limit: limits.maxBody }),
    async (req, res) => {
      const matrix = parseMatrix(matrixBody(req));
      const cells = expandMatrix(matrix);
      const agents = await withDeadline(liveAgents(d.redis, d.prefix), 'reading the live agents');
      const targets = resolveTargets(matrix.placement, agents);
      const runs = cells.length * matrix.repetitions * targets.length;
      if (runs > limits.maxRuns) {
        throw new FsbenchError(
          'MATRIX_TOO_LARGE',
          `the matrix asks for ${runs} runs (${cells.length} cells x ${matrix.repetitions} repetitions x ${targets.length} hosts), more than this coordinator's limit of ${limits.maxRuns} (FSBENCH_MAX_RUNS)`,
        );
      }
      const hosts = new Set(agents.map((a) => a.hostId)).size;
      const parallel = targets[0]?.target === ANY_TARGET ? hosts : 1;
      const estimatedMs = estimateMatrixMs(cells, matrix.repetitions + matrix.warmup, parallel);
      if (estimatedMs > limits.maxDuration) {
        throw new FsbenchError(
          'MATRIX_TOO_LONG',
          `the matrix would take about ${formatDuration(estimatedMs)}, more than this coordinator's limit of ${formatDuration(limits.maxDuration)} (FSBENCH_MAX_DURATION): split it or shorten its runs`,
        );
      }
      const waiting = await withDeadline(dispatcher.waiting([ANY_TARGET, ...targets.map((t) => t.target)]), 'counting the queued runs');
      if (waiting + runs > limits.maxQueued) {
        throw new FsbenchError(
          'QUEUE_FULL',
          `${waiting} runs are waiting and this matrix adds ${runs}, more than the limit of ${limits.maxQueued} (FSBENCH_MAX_QUEUED): try again later`,
          [],
          { 'Retry-After': '60' },
        );
      }
      const id = randomBytes(8).toString('hex');
      store.createMatrix({ id, spec: matrix, targets, cells, expectedRuns: runs, estimatedMs });
      const request = { matrixId: id, cells, repetitions: matrix.repetitions, warmup: matrix.warmup, targets };
      const enqueue = dispatcher.enqueue({ ...request, stillWanted: () => store.getMatrix(id)?.state !== 'cancelled' });
      enqueueing.set(id, enqueue);
      try {
        await withDeadline(enqueue, 'enqueueing the runs');
        store.markEnqueued(id);
      } catch (err) {
        store.deleteMatrix(id);
        void dispatcher.cancel(request).catch(() => undefined);
        throw err;
      } finally {
        enqueueing.delete(id);
      }
      const m = find(id);
      d.log(`matrix ${id} (${matrix.name}): ${cells.length} cells, ${runs} runs on ${targets.map((t) => t.machine ?? t.target).join(', ')}`);
      res.status(202).location(`/v1/matrices/${id}`).json({
        ...summaryOf(m),
        estimatedDurationMs: estimatedMs,
        estimatedDuration: formatDuration(estimatedMs),
        ...(agents.length === 0 ? { warnings: ['no agent is live: the runs wait in the queue until one starts'] } : {}),
      });
    },
  );

  router.get('/', read, (req, res) => {
    const q = ListQuery.parse(req.query);
    res.json({ matrices: store.listMatrices(q.limit, q.state).map(summaryOf) });
  });

  router.get('/:id', read, (req, res) => {
    res.json(detailOf(store, find(req.params.id)));
  });

  router.delete('/:id', write, async (req, res) => {
    const m = find(req.params.id);
    if (isFinal(m.state)) throw new FsbenchError('CONFLICT', `matrix ${m.id} is already ${m.state}`);
    store.cancel(m.id);
    await enqueueing.get(m.id)?.catch(() => undefined);
    const request = { matrixId: m.id, cells: store.cells(m.id), repetitions: m.spec.repetitions, warmup: m.spec.warmup, targets: m.targets };
    const removed = await withDeadline(dispatcher.cancel(request), 'removing the queued runs');
    hub.changed([m.id]);
    d.log(`matrix ${m.id} cancelled: ${removed} queued runs removed`);
    res.json({ ...summaryOf(find(m.id)), removedRuns: removed });
  });

  router.get('/:id/results', read, (req, res) => {
    const q = ResultsQuery.parse(req.query);
    const m = find(req.params.id);
    writeResults(res, store, m, summaryOf(m), q);
  });

  router.get('/:id/events', read, eventsHandler(store, hub));
  return router;
}
