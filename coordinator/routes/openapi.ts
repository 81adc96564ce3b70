/**
 * `GET /openapi.json`: the coordinator's API described in OpenAPI 3.1, whose schemas are
 * generated from the same zod schemas that validate requests and results (zod 4's
 * z.toJSONSchema), so the document cannot drift from what the server accepts. Every status a
 * route can answer is listed, each error status with the codes of the catalog that carry it;
 * tests/openapi-conformance.test.ts holds real answers of every route to this document.
 */
import { FORMAT_NAMES } from '../../report/export/index.js';
import { GATE_FORMATS } from '../../gate/export.js';
import { MAX_TOKENS_PER_REQUEST } from '../enrollment/index.js';
import { HISTORY_PAGE } from '../history/index.js';
import { MATRIX_STATES } from '../store/index.js';
import { RenameBody } from './agents.js';
import { components, ERROR_RESPONSES, json, ref, schema, text, type JsonSchema } from './openapi-components.js';
import { RESULTS_PAGE_DEFAULT, RESULTS_PAGE_MAX } from './results.js';

/** The text renderings of a report (format=table|md|csv), besides its JSON. */
const renderings = { 'text/plain': text, 'text/markdown': text, 'text/csv': text };
/** The query parameters naming the two sides of a comparison: /v1/compare's and /v1/gate's. */
const SIDES_PARAMS = [
  { name: 'baseline', in: 'query', required: true, schema: { type: 'string' }, description: 'matrix id' },
  { name: 'candidate', in: 'query', schema: { type: 'string' }, description: "matrix id (the baseline's when omitted)" },
  { name: 'baselineMachine', in: 'query', schema: { type: 'string' } },
  { name: 'candidateMachine', in: 'query', schema: { type: 'string' } },
  { name: 'metric', in: 'query', schema: { type: 'string' }, description: 'comma-separated metric names' },
  { name: 'alpha', in: 'query', schema: { type: 'number', exclusiveMinimum: 0, exclusiveMaximum: 0.5 } },
];
const idParam = { name: 'id', in: 'path', required: true, schema: { type: 'string' } };

const errors = (...statuses: number[]) => Object.fromEntries(statuses.map((s) => [String(s), { $ref: `#/components/responses/${ERROR_RESPONSES[s]?.name ?? s}` }]));
/** Every read but the probes: 401 and 403 by the token (FSBENCH_READ_AUTH=token), 403 by the Host (open reads), 500 for a bug. */
const readErrors = (...statuses: number[]) => errors(...[...new Set([401, 403, ...statuses, 500])].sort());
/** Every write: 401 and 403 by the token or the local-only rule, 429 past FSBENCH_WRITE_LIMIT, 500 for a bug. */
const writeErrors = (...statuses: number[]) => errors(...[...new Set([401, 403, 429, ...statuses, 500])].sort());
/** A write naming one agent key (`{ agent }`: its fingerprint, or the machine name or host id of exactly one key), answered with that key. */
const agentKeyAction = (summary: string, answered: string, ...statuses: number[]) => ({
  post: {
    summary,
    security: [{ bearer: [] }],
    requestBody: { required: true, content: json({ type: 'object', required: ['agent'], additionalProperties: false, properties: { agent: { type: 'string', minLength: 1, maxLength: 200 } } }) },
    responses: { '200': { description: answered, content: json(ref('AgentKey')) }, ...writeErrors(...statuses) },
  },
});

const READY = {
  type: 'object',
  required: ['ready', 'checks'],
  additionalProperties: false,
  properties: { ready: { type: 'boolean' }, checks: { type: 'object', additionalProperties: { type: 'string' } } },
};

/** The rename route: an agent key action whose body names the new machine name too. */
function renameAction() {
  const action = agentKeyAction(
    "Rename the machine of the enrolled agent key a key fingerprint (or the machine name or host id of exactly one key) names: its stored runs and history series move to the new name, and its agent reports under it",
    'the renamed key', 400, 404, 409, 413, 415,
  );
  return { post: { ...action.post, requestBody: { required: true, content: json(schema(RenameBody, 'input')) } } };
}

export function openApiDocument(version: string): JsonSchema {
  return {
    openapi: '3.1.0',
    info: {
      title: 'fsbench coordinator',
      version,
      description: 'Matrices of filesystem benchmarks run by agents; results, comparisons and progress.',
    },
    components: components(),
    paths: {
      '/v1/matrices': {
        post: {
          summary: 'Submit a matrix (JSON or YAML); its runs are queued for the agents',
          security: [{ bearer: [] }],
          parameters: [{ name: 'Idempotency-Key', in: 'header', schema: { type: 'string', minLength: 1, maxLength: 200 }, description: 'a retry with the same key within 24 hours gets the first answer' }],
          requestBody: { required: true, content: { ...json(ref('Matrix')), 'application/yaml': { schema: ref('Matrix') } } },
          responses: {
            '202': { description: 'queued', headers: { Location: { schema: { type: 'string' } } }, content: json(ref('Submitted')) },
            ...writeErrors(400, 409, 413, 415, 422, 503),
          },
        },
        get: {
          summary: 'List matrices with their progress',
          parameters: [
            { name: 'state', in: 'query', schema: { enum: [...MATRIX_STATES] } },
            { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 1000 } },
          ],
          responses: {
            '200': { description: '{ matrices: [...] }', content: json({ type: 'object', required: ['matrices'], additionalProperties: false, properties: { matrices: { type: 'array', items: ref('MatrixSummary') } } }) },
            ...readErrors(400),
          },
        },
      },
      '/v1/matrices/{id}': {
        parameters: [idParam],
        get: { summary: 'One matrix with progress per machine', responses: { '200': { description: 'the matrix', content: json(ref('MatrixDetail')) }, ...readErrors(404) } },
        delete: {
          summary: 'Cancel a matrix',
          security: [{ bearer: [] }],
          responses: { '200': { description: 'cancelled', content: json(ref('Cancelled')) }, ...writeErrors(404, 409, 503) },
        },
      },
      '/v1/matrices/{id}/results': {
        parameters: [idParam],
        get: {
          summary: "The matrix's report (statistics per cell and machine, notes, noise verdicts, knees) and its runs (JSON), or the report as a table, Markdown or CSV",
          parameters: [
            { name: 'format', in: 'query', schema: { enum: FORMAT_NAMES } },
            { name: 'table', in: 'query', schema: { enum: ['cells', 'runs'] } },
            { name: 'histograms', in: 'query', schema: { enum: ['0', '1', 'false', 'true'] } },
            { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: RESULTS_PAGE_MAX, default: RESULTS_PAGE_DEFAULT }, description: 'runs in this JSON page' },
            { name: 'cursor', in: 'query', schema: { type: 'string' }, description: "the previous page's `next`" },
          ],
          responses: {
            '200': {
              description: '{ matrix, report, runs, next }: `report` on the first page only; `next` is the cursor of the following page, or null. CSV cells that a spreadsheet would run as a formula start with a single quote',
              content: {
                ...json({
                  type: 'object',
                  required: ['matrix', 'runs', 'next'],
                  additionalProperties: false,
                  properties: { matrix: ref('MatrixSummary'), report: ref('Report'), runs: { type: 'array', items: ref('Run') }, next: { type: ['string', 'null'] } },
                }),
                ...renderings,
              },
            },
            ...readErrors(400, 404, 503),
          },
        },
      },
      '/v1/matrices/{id}/document': {
        parameters: [idParam],
        get: {
          summary:
            "The matrix's report as the HTML page shows it, as a typed document: its preamble, notes and tables (knees, cells with each cell's notes, machines), each cell of a table with its text, class, title and raw value. The dashboard renders it with the HTML report's exporter; counts against FSBENCH_MAX_DOWNLOADS",
          responses: { '200': { description: 'the document', content: json(ref('Document')) }, ...readErrors(404, 503) },
        },
      },
      '/v1/matrices/{id}/report.html': {
        parameters: [idParam],
        get: {
          summary:
            "The matrix's report as one self-contained HTML page that opens offline: the dashboard's charts (Chart.js inline), per-cell medians, CIs, CV and noise verdicts, notes, knees and every machine fingerprint field. Served inline with a Content-Security-Policy allowing its inline scripts and style by hash; counts against FSBENCH_MAX_DOWNLOADS",
          responses: { '200': { description: 'the page', content: { 'text/html': text } }, ...readErrors(404, 503) },
        },
      },
      '/v1/matrices/{id}/events': {
        parameters: [idParam],
        get: {
          summary: 'Server-sent progress events: `progress` snapshots, then `end`',
          responses: { '200': { description: 'event stream', content: { 'text/event-stream': text } }, ...readErrors(404, 503) },
        },
      },
      '/v1/agents': { get: { summary: 'Live agents with their fingerprints, and the agent keys enrolled or waiting for approval', responses: { '200': { description: '{ hosts, agents, keys, pending }', content: json(ref('Agents')) }, ...readErrors(503) } } },
      '/v1/agents/approve': agentKeyAction("Enroll the waiting agent key a machine name, host id or key names, binding it to its host: its reports count from then on", 'the enrolled key', 400, 404, 409, 413, 415, 503),
      '/v1/agents/revoke': agentKeyAction(
        'Revoke the agent key a key fingerprint (or the machine name or host id of exactly one key) names, for good: its approval is deleted, its reports are dropped, and nothing in Redis enrolls it again',
        'the revoked key', 400, 404, 409, 413, 415,
      ),
      '/v1/agents/rename': renameAction(),
      '/v1/agents/rotate': agentKeyAction(
        'Ask the agent of the enrolled key a key fingerprint (or the machine name or host id of exactly one key) names to rotate: its approval says so, it makes a new key when idle and announces it signed by the old one, and the coordinator enrolls the new key for the same host and machine and revokes the old',
        'the key asked to rotate', 400, 404, 409, 413, 415,
      ),
      '/v1/agents/history': {
        get: {
          summary: 'Every change to who is enrolled (token used, approval, approval taken in, revocation, rotation, rename), newest first: who, what, when',
          responses: { '200': { description: '{ changes }', content: json(ref('EnrollmentHistory')) }, ...readErrors() },
        },
      },
      '/v1/agents/tokens': {
        post: {
          summary: 'Make one-time enrollment tokens (shown this once; only their hash is kept), bound to a machine or host if asked; a token is refused for a host that has a live key unless made with `replace`',
          security: [{ bearer: [] }],
          requestBody: {
            required: true,
            content: json({
              type: 'object',
              additionalProperties: false,
              properties: {
                count: { type: 'integer', minimum: 1, maximum: MAX_TOKENS_PER_REQUEST, description: 'default 1' },
                ttl: { type: ['string', 'integer'], description: 'how long they stay valid, 1m to 30d (default 1h)' },
                machine: { type: 'string', minLength: 1, maxLength: 200, description: 'enroll only a key announcing this machine name' },
                host: { type: 'string', pattern: '^[A-Za-z0-9._-]{1,64}$', description: 'enroll only a key announcing this host id' },
                replace: { type: 'boolean', description: "may enroll a key for a host that has a live one, revoking it (default false: refused)" },
              },
            }),
          },
          responses: {
            '201': {
              description: 'the tokens',
              content: json({ type: 'object', required: ['tokens', 'expiresAt'], additionalProperties: false, properties: { tokens: { type: 'array', items: { type: 'string' } }, expiresAt: { type: 'string', format: 'date-time' } } }),
            },
            ...writeErrors(400, 413, 415),
          },
        },
      },
      '/v1/gate': {
        get: {
          summary: 'The regression gate: does the candidate regress against the baseline beyond a limit, significantly? (as `fsbench gate`)',
          parameters: [
            ...SIDES_PARAMS,
            { name: 'maxRegression', in: 'query', schema: { type: 'string' }, description: "largest move in a metric's bad direction that passes: 5% (the default) or 0.05" },
            { name: 'limit', in: 'query', schema: { type: 'string' }, description: 'comma-separated METRIC=SHARE limits for single metrics' },
            { name: 'excludeFlagged', in: 'query', schema: { enum: ['true', 'false'] }, description: 'leave out runs flagged for interference, and say how many' },
            { name: 'allowInconclusive', in: 'query', schema: { enum: ['true', 'false'] }, description: 'let cell-metrics that could not be judged pass (by default they make the verdict `inconclusive`)' },
            { name: 'format', in: 'query', schema: { enum: [...GATE_FORMATS, 'document'] } },
          ],
          responses: {
            '200': {
              description: 'the verdict (a regression is verdict `fail`, a gate that could not judge every gated cell-metric `inconclusive`; still 200), in the format asked',
              content: {
                ...json({ oneOf: [ref('GateReport'), ref('Document'), ref('BencherMetrics'), ref('ActionBenchmark')] }),
                ...renderings,
                'application/xml': text,
              },
            },
            ...readErrors(400, 404, 422, 429),
          },
        },
      },
      '/v1/history': {
        get: {
          summary: 'The matrices of one name over time: series per machine, cell and metric, with their change points (as `fsbench history`)',
          parameters: [
            { name: 'name', in: 'query', required: true, schema: { type: 'string' }, description: 'matrix name' },
            { name: 'machine', in: 'query', schema: { type: 'string' } },
            { name: 'metric', in: 'query', schema: { type: 'string' } },
            { name: 'param', in: 'query', schema: { type: 'string' }, description: 'comma-separated NAME=VALUE: only cells with these values' },
            { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: HISTORY_PAGE.max }, description: `series per page (${String(HISTORY_PAGE.default)})` },
            { name: 'after', in: 'query', schema: { type: 'string' }, description: 'the `next` of the previous page' },
            { name: 'points', in: 'query', schema: { enum: ['true', 'false'] }, description: 'with table or md: every point of every series' },
            { name: 'format', in: 'query', schema: { enum: [...FORMAT_NAMES, 'document'] } },
          ],
          responses: {
            '200': { description: 'a page of series', content: { ...json({ oneOf: [ref('HistoryPage'), ref('Document')] }), ...renderings } },
            ...readErrors(400, 429),
          },
        },
      },
      '/v1/compare': {
        get: {
          summary: 'Compare two matrices, or one matrix on two machines, cell by cell',
          parameters: [
            ...SIDES_PARAMS,
            { name: 'format', in: 'query', schema: { enum: [...FORMAT_NAMES, 'document'] }, description: "an exporter's format, or `document`: the comparison's tables and notes as a typed document, which the dashboard renders" },
          ],
          responses: {
            '200': { description: 'the comparison, or its document (format=document)', content: { ...json({ oneOf: [ref('CompareReport'), ref('Document')] }), ...renderings } },
            ...readErrors(400, 404, 422, 429),
          },
        },
      },
      '/v1/results': {
        post: {
          summary: 'Upload runs written by `fsbench run --out`; each is stored exactly once',
          security: [{ bearer: [] }],
          requestBody: {
            required: true,
            content: {
              'application/x-ndjson': { schema: { type: 'string', description: 'one RunResult per line (also as application/jsonl)' } },
            },
          },
          responses: {
            '201': { description: 'stored', content: json(ref('UploadAnswer')) },
            '200': { description: 'every run was already stored', content: json(ref('UploadAnswer')) },
            ...writeErrors(400, 413, 415),
          },
        },
      },
      '/metrics': { get: { summary: 'Prometheus metrics', responses: { '200': { description: 'text exposition format', content: { 'text/plain': text } }, ...readErrors() } } },
      '/openapi.json': {
        get: {
          summary: 'This document',
          responses: { '200': { description: 'OpenAPI 3.1', content: json({ type: 'object', required: ['openapi', 'info', 'paths'], properties: { openapi: { const: '3.1.0' }, info: { type: 'object' }, paths: { type: 'object' } } }) }, ...readErrors() },
        },
      },
      '/livez': {
        get: {
          summary: 'Liveness: the process answers, whatever Redis does (a restart would not bring Redis back). Not checked for the Host or a token; it says nothing else',
          responses: { '200': { description: 'alive', content: json({ type: 'object', required: ['ok'], additionalProperties: false, properties: { ok: { const: true } } }) } },
        },
      },
      '/healthz': {
        get: {
          summary: "Health: the process answers and reaches Redis, and its fsbench version. Not checked for the Host or a token, so that any probe reaches it; it says nothing else",
          responses: {
            '200': { description: 'alive, and Redis answers', content: json({ type: 'object', required: ['ok', 'version'], additionalProperties: false, properties: { ok: { const: true }, version: { type: 'string' } } }) },
            '503': {
              description: 'Redis is unreachable: `reason` names it and the last error, `since` when it was lost',
              content: json({
                type: 'object',
                required: ['ok', 'version', 'reason', 'since'],
                additionalProperties: false,
                properties: { ok: { const: false }, version: { type: 'string' }, reason: { type: 'string' }, since: { type: 'string', format: 'date-time' } },
              }),
            },
          },
        },
      },
      '/readyz': {
        get: {
          summary: 'Readiness: SQLite and Redis answer. Not checked for the Host or a token, like /healthz',
          responses: {
            '200': { description: 'ready', content: json(READY) },
            '503': { description: 'not ready: `checks` says which dependency failed', content: json(READY) },
          },
        },
      },
    },
  };
}
