/**
 * HTTP routes of stored results side by side, and of uploads: `GET /v1/compare` (two stored
 * matrices, one matrix on two machines, or a matrix against its name's history), `GET /v1/gate`
 * (the regression gate over the same comparison) and `POST /v1/results` (a `.jsonl` file from
 * `fsbench run --out`, checked line by line and stored exactly once). Each is a Router the
 * coordinator mounts; errors are thrown as FsbenchErrors and leave through the one error handler.
 *
 * All bound the runs of one cell at MAX_REPETITIONS, the most a matrix may ask for: compare
 * keeps each cell's values for its rank tests, so memory grows with the runs per cell, which
 * nothing else would bound for uploaded results.
 */
import { Router, type RequestHandler } from 'express';
import { z } from 'zod';
import type { MachineFingerprint } from '../../contract/fingerprint.js';
import { MAX_REPETITIONS } from '../../contract/matrix.js';
import type { RunResult } from '../../contract/result.js';
import type { AggregatableRun } from '../../stats/aggregate.js';
import { FsbenchError } from '../../contract/errors.js';
import { compareRunSets, type CompareReport } from '../../compare/compare.js';
import { exportableCompare } from '../../compare/view.js';
import { GATE_CONTENT_TYPES, GATE_FORMATS, renderGate } from '../../gate/export.js';
import { gate, parseLimits, parseShare } from '../../gate/gate.js';
import { exportableGate } from '../../gate/view.js';
import { CONTENT_TYPES, FORMAT_NAMES, render } from '../../report/export/index.js';
import { parseRunLine, type LineProblem } from '../../report/runs-file.js';
import { canonical } from '../../compare/sides.js';
import type { History } from '../history/index.js';
import type { ResultSink, RunSource } from '../store/index.js';
import { absent, readBody, unguarded } from '../http/index.js';
import type { Reads } from './reads.js';
import { defaultOf } from '../../settings/index.js';

/**
 * A stored matrix's runs for compare, refused (400 MATRIX_TOO_LARGE) at the first cell that
 * holds more than MAX_REPETITIONS runs on one machine, which only an upload made before uploads
 * were bounded can: compare's memory stays within MAX_REPETITIONS values per cell and metric.
 */
function* bounded(runs: Iterable<AggregatableRun>, matrixId: string): Generator<AggregatableRun> {
  const counts = new Map<string, number>();
  for (const r of runs) {
    const key = `${r.cellId}\u0000${r.fingerprint.machine}`;
    const n = (counts.get(key) ?? 0) + 1;
    if (n > MAX_REPETITIONS) {
      throw new FsbenchError(
        'MATRIX_TOO_LARGE',
        `matrix ${matrixId} holds more than ${MAX_REPETITIONS} runs of cell ${r.cellId} on machine ${r.fingerprint.machine}: compare reads at most ${MAX_REPETITIONS} per cell and machine, the most repetitions a matrix may ask for`,
      );
    }
    counts.set(key, n);
    yield r;
  }
}

const list = z
  .string()
  .max(2000)
  .transform((s) => s.split(',').map((x) => x.trim()).filter((x) => x !== ''));

export const CompareQuery = z
  .object({
    /**
     * The baseline: a matrix id, `latest:NAME` (the newest finished matrix of that name) or
     * `history:NAME` (each cell's runs in the matrices of that name since its last change point).
     */
    baseline: z.string().min(1).max(200),
    /** The candidate: a matrix id or `latest:NAME`; the baseline's when omitted (then pick two machines), or with `history:NAME`, `latest:NAME`. */
    candidate: z.string().min(1).max(200).optional(),
    baselineMachine: z.string().min(1).max(200).optional(),
    candidateMachine: z.string().min(1).max(200).optional(),
    /** Comma-separated metric names; the workload's headline metrics when omitted. */
    metric: list.optional(),
    alpha: z.coerce.number().gt(0).lt(0.5).default(0.05),
    /** An exporter's format, or `document`: the comparison's document as JSON, which the dashboard renders. */
    format: z.enum([...FORMAT_NAMES, 'document']).default('json'),
  })
  .strict();

/** What a comparison reads from: the stored runs, the history, and the most runs it may read. */
export interface CompareSources {
  readonly source: RunSource;
  /** For `latest:NAME` and `history:NAME` sides. */
  readonly history?: History | undefined;
  /** FSBENCH_MAX_READ_RUNS; the settings table's default when omitted. */
  readonly maxRuns?: number | undefined;
}

export interface CompareRouteDeps extends CompareSources {
  /** The coordinator's read guard (requireRead); open when omitted. */
  readonly read?: RequestHandler;
  /** Where the comparisons are computed, within which limits (reads.ts); on the event loop, unlimited, when omitted. */
  readonly reads?: Reads;
}

/** Runs flagged for interference left out, counted per side. */
interface Excluded {
  baseline: number;
  candidate: number;
}

function* unflagged(runs: Iterable<AggregatableRun>, excluded: Excluded, side: keyof Excluded): Generator<AggregatableRun> {
  for (const r of runs) {
    if ((r.interference?.flagged.length ?? 0) > 0) excluded[side]++;
    else yield r;
  }
}

/** A side named by its series: `latest:NAME`, the newest finished matrix of that name; `history:NAME` (baseline only), its runs since the last change. */
const SERIES_REF = /^(latest|history):([A-Za-z0-9][A-Za-z0-9._-]{0,99})$/;

/**
 * The runs of a `history:NAME` baseline: each machine's and cell's runs in the matrices since its
 * last change point, newest matrix first and at most MAX_REPETITIONS per cell and machine (older
 * runs beyond that are left out), all filed under one name so they pool into one side.
 */
function* historyRuns(source: RunSource, since: ReturnType<History['since']>, name: string): Generator<AggregatableRun> {
  const counts = new Map<string, number>();
  for (const id of since.matrices) {
    for (const r of source(id, { histograms: false })?.runs ?? []) {
      const key = `${r.fingerprint.machine}\u0000${canonical(r.params)}`;
      const n = counts.get(key) ?? 0;
      if (since.cells.get(key)?.has(id) !== true || n >= MAX_REPETITIONS) continue;
      counts.set(key, n + 1);
      yield { ...r, matrix: name };
    }
  }
}

/**
 * The cost cap: a comparison's time and memory grow with the runs it reads (about 20 us and
 * 2 KiB each), so one that would read more than `most` is refused before it reads any.
 */
function refuseTooManyRuns(reads: readonly { readonly what: string; readonly runs: number }[], most: number): void {
  const total = reads.reduce((sum, r) => sum + r.runs, 0);
  if (total <= most) return;
  throw new FsbenchError(
    'READ_TOO_LARGE',
    `this comparison would read ${total} stored runs (${reads.map((r) => `${r.what}: ${r.runs}`).join(', ')}), more than the ${most} one comparison or gate may read (FSBENCH_MAX_READ_RUNS on the coordinator): compare smaller matrices or fewer machines, or raise FSBENCH_MAX_READ_RUNS`,
  );
}

/** A `latest:NAME` or `history:NAME` side asked of a compare router mounted without the history. */
function noHistory(side: string): FsbenchError {
  return absent(
    'history of matrices by name',
    `the side ${side}`,
    '`fsbench coordinator` keeps it in its database (FSBENCH_DATA_DIR); a compare router built alone is given one as its `history`, or name matrices by id',
  );
}

/** One side of a stored comparison, however it was named. */
interface StoredSide {
  readonly runs: Iterable<AggregatableRun>;
  readonly name: string;
  readonly fingerprintOf: (machine: string) => MachineFingerprint | null;
}

/** The comparison a compare or gate query asks for, of stored matrices; with `excluded`, flagged runs left out and counted. */
async function compareStored(d: CompareSources, q: z.infer<typeof CompareQuery>, excluded?: Excluded): Promise<CompareReport> {
  const { source, history } = d;
  const load = (ref: string) => {
    const series = SERIES_REF.exec(ref);
    let id = ref;
    if (series?.[1] === 'latest' && series[2] !== undefined) {
      if (!history) throw noHistory(ref);
      id = history.latest(series[2]) ?? '';
      if (id === '') throw new FsbenchError('NOT_FOUND', `no finished matrix named ${series[2]}`);
    }
    const m = source(id, { histograms: false });
    if (!m) throw new FsbenchError('NOT_FOUND', `no matrix ${ref}`);
    return m;
  };
  const stored = (m: NonNullable<ReturnType<RunSource>>): StoredSide => ({ runs: bounded(m.runs, m.id), name: `${m.name} (${m.id})`, fingerprintOf: m.fingerprintOf });
  // The runs each side reads, checked against the limit before any is read.
  let reads: { readonly what: string; readonly runs: number }[];
  let a: StoredSide;
  let b: StoredSide;
  let cellOrder: ReadonlyMap<string, number>;
  // Runs from several matrices are not grouped by cell: then both sides are kept whole.
  let grouped = true;
  const fromHistory = SERIES_REF.exec(q.baseline);
  if (fromHistory?.[1] === 'history' && fromHistory[2] !== undefined) {
    const name = fromHistory[2];
    if (!history) throw noHistory(q.baseline);
    const candidate = load(q.candidate ?? `latest:${name}`);
    const since = history.since(name, candidate.id);
    if (since.matrices.length === 0) throw new FsbenchError('NOT_FOUND', `no finished matrix named ${name} besides ${candidate.id} to compare with`);
    const n = since.matrices.length;
    a = {
      runs: historyRuns(source, since, `history:${name}`),
      name: `${name} since its last change (${String(n)} matri${n === 1 ? 'x' : 'ces'})`,
      fingerprintOf: source(since.matrices[0] ?? '', { histograms: false })?.fingerprintOf ?? (() => null),
    };
    b = stored(candidate);
    cellOrder = candidate.cellOrder;
    grouped = false;
    const older = since.matrices.reduce((sum, id) => sum + (source(id, { histograms: false })?.stored ?? 0), 0);
    reads = [
      { what: `history:${name} (${String(n)} matri${n === 1 ? 'x' : 'ces'})`, runs: older },
      { what: candidate.id, runs: candidate.stored },
    ];
  } else {
    const baseline = load(q.baseline);
    const candidate = q.candidate === undefined || q.candidate === q.baseline ? undefined : load(q.candidate);
    if (!candidate && (q.baselineMachine === undefined || q.candidateMachine === undefined || q.baselineMachine === q.candidateMachine)) {
      throw new FsbenchError('BODY_INVALID', 'comparing a matrix with itself needs two different machines: set baselineMachine and candidateMachine');
    }
    a = stored(baseline);
    // One matrix against itself: the same rows, read twice, once per machine.
    const other = candidate ?? load(q.baseline);
    b = stored(other);
    cellOrder = baseline.cellOrder;
    reads = [
      { what: baseline.id, runs: baseline.stored },
      { what: candidate ? other.id : `${other.id} again`, runs: other.stored },
    ];
  }
  refuseTooManyRuns(reads, d.maxRuns ?? defaultOf('maxReadRuns'));
  const runs = (side: StoredSide, which: keyof Excluded) => (excluded ? unflagged(side.runs, excluded, which) : side.runs);
  return compareRunSets(runs(a, 'baseline'), runs(b, 'candidate'), {
    ...(q.metric && q.metric.length > 0 ? { metrics: q.metric } : {}),
    alpha: q.alpha,
    ...(grouped ? { grouped: true } : {}),
    cellOrder,
    ...(q.baselineMachine === undefined ? {} : { baselineMachine: q.baselineMachine }),
    ...(q.candidateMachine === undefined ? {} : { candidateMachine: q.candidateMachine }),
    baselineName: a.name,
    candidateName: b.name,
    // Stored runs carry only the facts aggregation keeps: the facts that differ come from the whole fingerprints.
    baselineFingerprintOf: a.fingerprintOf,
    candidateFingerprintOf: b.fingerprintOf,
  });
}

const share = (what: string) =>
  z
    .string()
    .max(20)
    .transform((t, ctx) => {
      const v = parseShare(t);
      if (v === null) ctx.addIssue({ code: 'custom', message: `${what} must be a share such as 5% or 0.05` });
      return v ?? 0;
    });

export const GateQuery = CompareQuery.extend({
  /** Largest move in a metric's bad direction that passes (default 5%). */
  maxRegression: share('maxRegression').optional(),
  /** Comma-separated METRIC=SHARE limits overriding maxRegression for those metrics. */
  limit: list.optional(),
  /** Leave out runs flagged for interference on both sides (`true`), and say how many. */
  excludeFlagged: z.enum(['true', 'false']).transform((v) => v === 'true').optional(),
  /** Let cell-metrics that could not be judged pass (`true`); by default they make the verdict `inconclusive`. */
  allowInconclusive: z.enum(['true', 'false']).transform((v) => v === 'true').optional(),
  format: z.enum([...GATE_FORMATS, 'document']).default('json'),
}).strict();

/** `GET /v1/compare`'s answer, rendered as the query's format asks. */
export async function compareText(d: CompareSources, q: z.infer<typeof CompareQuery>): Promise<string> {
  const out = exportableCompare(await compareStored(d, q));
  return q.format === 'document' ? JSON.stringify({ document: out.doc() }) : render(q.format, out);
}

/** `GET /v1/gate`'s answer, rendered as the query's format asks. */
export async function gateText(d: CompareSources, q: z.infer<typeof GateQuery>): Promise<string> {
  const limits = parseLimits(q.limit ?? []);
  if (!limits.ok) throw new FsbenchError('BODY_INVALID', `limit ${limits.bad} is not METRIC=SHARE, such as eventsPerSec=10%`);
  const excluded = q.excludeFlagged === true ? { baseline: 0, candidate: 0 } : undefined;
  const report = await compareStored(d, { ...q, format: 'json' }, excluded);
  const g = gate(report, {
    ...(q.maxRegression === undefined ? {} : { maxRegression: q.maxRegression }),
    perMetric: limits.limits,
    ...(excluded ? { excluded } : {}),
    allowInconclusive: q.allowInconclusive === true,
  });
  return q.format === 'document' ? JSON.stringify({ document: exportableGate(g).doc() }) : renderGate(q.format, g);
}

/** `GET /v1/compare?baseline=ID[&candidate=ID][&baselineMachine=M][&candidateMachine=M][&metric=a,b][&alpha=0.05][&format=json|csv|md|table|document]` */
export function compareRouter(deps: CompareRouteDeps): Router {
  const router = Router();
  const { reads } = deps;
  const sources: CompareSources = { source: deps.source, history: deps.history, maxRuns: reads?.maxRuns ?? deps.maxRuns };
  const guards = [deps.read ?? unguarded, ...(reads ? [reads.limit] : [])];
  router.get('/v1/compare', ...guards, async (req, res) => {
    const q = CompareQuery.parse(req.query);
    const here = () => compareText(sources, q);
    const text = reads ? await reads.run(res, 'compare', req.query, here) : await here();
    if (text === undefined || res.destroyed) return;
    res.type(q.format === 'document' ? 'application/json; charset=utf-8' : CONTENT_TYPES[q.format]).send(text);
  });
  /**
   * `GET /v1/gate?baseline=ID[&candidate=ID]...[&maxRegression=5%][&limit=m=10%][&excludeFlagged=true][&format=...]`:
   * the regression gate of `fsbench gate`; a regression is a 200 answer whose verdict is `fail`,
   * a gate that could not judge every gated cell-metric one whose verdict is `inconclusive`.
   */
  router.get('/v1/gate', ...guards, async (req, res) => {
    const q = GateQuery.parse(req.query);
    const here = () => gateText(sources, q);
    const text = reads ? await reads.run(res, 'gate', req.query, here) : await here();
    if (text === undefined || res.destroyed) return;
    res.type(q.format === 'document' ? 'application/json; charset=utf-8' : GATE_CONTENT_TYPES[q.format]).send(text);
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

function parseUpload(body: unknown): RunResult[] {
  const problems: LineProblem[] = [];
  let bad = 0;
  const runs: RunResult[] = [];
  /** The line each run came from, to name it. */
  const lines: number[] = [];
  if (typeof body !== 'string') throw new FsbenchError('BODY_INVALID', 'the body is empty: send the lines of a .jsonl file');
  body.split('\n').forEach((text, i) => {
    if (text.trim() === '') return;
    const r = parseRunLine(text);
    if (r.ok) {
      runs.push(r.run);
      lines.push(i + 1);
    } else {
      bad++;
      if (problems.length < MAX_ISSUES) problems.push({ line: i + 1, message: r.message });
    }
  });
  if (bad > 0) {
    const what = 'line';
    throw new FsbenchError(
      'BODY_INVALID',
      `${bad} ${what}${bad === 1 ? ' is' : 's are'} not fsbench results; nothing was stored`,
      problems.map((p) => ({ path: `${what} ${p.line}`, message: p.message })),
    );
  }
  if (runs.length === 0) throw new FsbenchError('BODY_INVALID', 'the body holds no runs');
  refuseTooManyRepetitions(runs, 'line', lines);
  return runs;
}

/**
 * Repetitions are numbered from 0 and stored once each, so a run numbered MAX_REPETITIONS or
 * more is the only way an upload can hold more than MAX_REPETITIONS runs of one cell.
 */
function refuseTooManyRepetitions(runs: readonly RunResult[], what: string, lines: readonly number[]): void {
  const issues: { path: string; message: string }[] = [];
  const cells = new Set<string>();
  let bad = 0;
  runs.forEach((r, i) => {
    if (r.repetition < MAX_REPETITIONS) return;
    bad++;
    cells.add(r.cellId);
    if (issues.length < MAX_ISSUES) {
      issues.push({ path: `${what} ${lines[i] ?? i + 1}`, message: `cell ${r.cellId} of matrix ${r.matrix} on ${r.fingerprint.machine}: repetition ${r.repetition}` });
    }
  });
  if (bad === 0) return;
  const named = [...cells].slice(0, 5).join(', ');
  throw new FsbenchError(
    'BODY_INVALID',
    `more than ${MAX_REPETITIONS} repetitions of cell${cells.size === 1 ? '' : 's'} ${named}${cells.size > 5 ? ' ...' : ''}: an upload may hold repetitions 0-${MAX_REPETITIONS - 1} of a cell, the most a matrix may ask for; nothing was stored`,
    issues,
  );
}

/**
 * `POST /v1/results`: the body is a `.jsonl` file, Content-Type application/x-ndjson (or
 * application/jsonl), and nothing else. Every run is checked by the `RunResult` schema before
 * anything is stored; any bad one refuses the whole upload (400, each bad line named). Answers
 * 201 with what was stored, or 200 when every run was already there.
 */
export function resultsUploadRouter(deps: UploadRouteDeps): Router {
  const router = Router();
  const limit = deps.maxBody ?? '64mb';
  router.post('/v1/results', deps.write ?? unguarded, ...readBody('jsonl', limit), (req, res) => {
    const runs = parseUpload(req.body);
    const result = deps.sink.importRuns(runs);
    res.status(result.stored > 0 ? 201 : 200).json(result);
  });
  return router;
}
