/**
 * HTTP routes of compare: `GET /v1/compare` (two stored matrices, or one matrix on two
 * machines) and `POST /v1/results` (a `.jsonl` file from `fsbench run --out`, checked line by
 * line and stored exactly once). Each is a Router the coordinator mounts; errors are thrown as
 * FsbenchErrors and leave through the coordinator's one error handler.
 */
import express, { Router, type RequestHandler } from 'express';
import { z } from 'zod';
import type { RunResult } from '../contract/result.js';
import { FsbenchError } from '../contract/errors.js';
import { compareRunSets } from '../compare/compare.js';
import { exportableCompare } from '../compare/view.js';
import { CONTENT_TYPES, FORMAT_NAMES, render } from '../report/export/index.js';
import { parseRunLine, type LineProblem } from '../report/runs-file.js';
import type { ResultSink, RunSource } from './store-adapter.js';

const pass: RequestHandler = (_req, _res, next) => {
  next();
};

const list = z
  .string()
  .max(2000)
  .transform((s) => s.split(',').map((x) => x.trim()).filter((x) => x !== ''));

export const CompareQuery = z
  .object({
    /** The baseline matrix id. */
    baseline: z.string().min(1).max(200),
    /** The candidate matrix id; the baseline's when omitted (then pick two machines). */
    candidate: z.string().min(1).max(200).optional(),
    baselineMachine: z.string().min(1).max(200).optional(),
    candidateMachine: z.string().min(1).max(200).optional(),
    /** Comma-separated metric names; the workload's headline metrics when omitted. */
    metric: list.optional(),
    alpha: z.coerce.number().gt(0).lt(0.5).default(0.05),
    format: z.enum(FORMAT_NAMES).default('json'),
  })
  .strict();

export interface CompareRouteDeps {
  readonly source: RunSource;
  /** The coordinator's read guard (requireRead); open when omitted. */
  readonly read?: RequestHandler;
}

/** `GET /v1/compare?baseline=ID[&candidate=ID][&baselineMachine=M][&candidateMachine=M][&metric=a,b][&alpha=0.05][&format=json|csv|md|table]` */
export function compareRouter(deps: CompareRouteDeps): Router {
  const router = Router();
  router.get('/v1/compare', deps.read ?? pass, async (req, res) => {
    const q = CompareQuery.parse(req.query);
    const load = (id: string) => {
      const m = deps.source(id);
      if (!m) throw new FsbenchError('NOT_FOUND', `no matrix ${id}`);
      return m;
    };
    const a = load(q.baseline);
    const b = q.candidate === undefined || q.candidate === q.baseline ? undefined : load(q.candidate);
    // One matrix against itself: the same rows, read twice, once per machine.
    const candidateRuns = b ? b.runs : (deps.source(q.baseline)?.runs ?? []);
    if (!b && (q.baselineMachine === undefined || q.candidateMachine === undefined || q.baselineMachine === q.candidateMachine)) {
      throw new FsbenchError('BODY_INVALID', 'comparing a matrix with itself needs two different machines: set baselineMachine and candidateMachine');
    }
    const report = await compareRunSets(a.runs, candidateRuns, {
      ...(q.metric && q.metric.length > 0 ? { metrics: q.metric } : {}),
      alpha: q.alpha,
      grouped: true,
      cellOrder: a.cellOrder,
      ...(q.baselineMachine === undefined ? {} : { baselineMachine: q.baselineMachine }),
      ...(q.candidateMachine === undefined ? {} : { candidateMachine: q.candidateMachine }),
      baselineName: `${a.name} (${a.id})`,
      candidateName: b ? `${b.name} (${b.id})` : `${a.name} (${a.id})`,
    });
    res.type(CONTENT_TYPES[q.format]).send(render(q.format, exportableCompare(report)));
  });
  return router;
}

export interface UploadRouteDeps {
  readonly sink: ResultSink;
  /** The coordinator's write guard (requireWrite); open when omitted. */
  readonly write?: RequestHandler;
  /** Largest body accepted (FSBENCH_MAX_BODY); bytes or an express size string. */
  readonly maxBody?: number | string;
}

/** Most bad lines named in one 400 answer. */
const MAX_ISSUES = 20;

function parseUpload(body: unknown, ndjson: boolean): RunResult[] {
  const problems: LineProblem[] = [];
  let bad = 0;
  const runs: RunResult[] = [];
  const take = (line: number, text: string) => {
    const r = parseRunLine(text);
    if (r.ok) runs.push(r.run);
    else {
      bad++;
      if (problems.length < MAX_ISSUES) problems.push({ line, message: r.message });
    }
  };
  if (ndjson) {
    if (typeof body !== 'string') throw new FsbenchError('BODY_INVALID', 'the body is empty: send the lines of a .jsonl file');
    body.split('\n').forEach((text, i) => {
      if (text.trim() !== '') take(i + 1, text);
    });
  } else {
    const items: unknown = typeof body === 'object' && body !== null && 'runs' in body ? body.runs : body;
    if (!Array.isArray(items)) throw new FsbenchError('BODY_INVALID', 'send { "runs": [RunResult, ...] } as JSON, or the .jsonl file as application/x-ndjson');
    items.forEach((item: unknown, i) => {
      take(i + 1, JSON.stringify(item));
    });
  }
  if (bad > 0) {
    const what = ndjson ? 'line' : 'run';
    throw new FsbenchError(
      'BODY_INVALID',
      `${bad} ${what}${bad === 1 ? ' is' : 's are'} not fsbench results; nothing was stored`,
      problems.map((p) => ({ path: `${what} ${p.line}`, message: p.message })),
    );
  }
  if (runs.length === 0) throw new FsbenchError('BODY_INVALID', 'the body holds no runs');
  return runs;
}

/**
 * `POST /v1/results`: the body is a `.jsonl` file (Content-Type application/x-ndjson) or JSON
 * `{ "runs": [...] }`. Every run is checked by the `RunResult` schema before anything is stored;
 * any bad one refuses the whole upload (400, each bad line named). Answers 201 with what was
 * stored, or 200 when every run was already there.
 */
export function resultsUploadRouter(deps: UploadRouteDeps): Router {
  const router = Router();
  const limit = deps.maxBody ?? '64mb';
  router.post(
    '/v1/results',
    deps.write ?? pass,
    express.json({ limit, strict: false }),
    express.text({ type: ['application/x-ndjson', 'application/jsonl', 'text/plain'], limit }),
    (req, res) => {
      const ndjson = req.is(['application/x-ndjson', 'application/jsonl', 'text/plain']) !== false;
      if (!ndjson && !req.is('application/json')) {
        throw new FsbenchError('UNSUPPORTED_MEDIA_TYPE', `send application/x-ndjson (a .jsonl file) or application/json, not ${req.get('content-type') ?? 'no Content-Type'}`);
      }
      const runs = parseUpload(req.body, ndjson);
      const result = deps.sink.importRuns(runs);
      res.status(result.stored > 0 ? 201 : 200).json(result);
    },
  );
  return router;
}
