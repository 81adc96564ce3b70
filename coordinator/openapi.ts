/**
 * `GET /openapi.json`: the coordinator's API described in OpenAPI 3.1, whose schemas are
 * generated from the same zod schemas that validate requests and results (zod 4's
 * z.toJSONSchema), so the document cannot drift from what the server accepts.
 */
import { z } from 'zod';
import { ERROR_CODE_LIST } from '../contract/errors.js';
import { MachineFingerprint } from '../contract/fingerprint.js';
import { Cell, Matrix } from '../contract/matrix.js';
import { Histogram, RunResult } from '../contract/result.js';
import { InotifyMetrics } from '../contract/workloads/inotify.js';
import { MetadataMetrics } from '../contract/workloads/metadata.js';
import { NoopMetrics } from '../contract/workloads/noop.js';
import { CompareReportSchema, UploadAnswerSchema } from '../compare/schema.js';
import { FORMAT_NAMES } from '../report/export/index.js';
import { ReportSchema } from '../report/schema.js';
import { RESULTS_PAGE_DEFAULT, RESULTS_PAGE_MAX } from './results-format.js';

type JsonSchema = Record<string, unknown>;

/** JSON Schema 2020-12 (OpenAPI 3.1's dialect) without the `$schema` key components may not repeat. */
function schema(s: z.ZodType, io: 'input' | 'output'): JsonSchema {
  const out = { ...(z.toJSONSchema(s, { io, unrepresentable: 'any' }) as JsonSchema) };
  delete out['$schema'];
  return out;
}

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (s: unknown) => ({ 'application/json': { schema: s } });
const errors = (...codes: number[]) =>
  Object.fromEntries(codes.map((c) => [String(c), { description: 'error', content: json(ref('Error')) }]));
const idParam = { name: 'id', in: 'path', required: true, schema: { type: 'string' } };

export function openApiDocument(version: string): JsonSchema {
  return {
    openapi: '3.1.0',
    info: {
      title: 'fsbench coordinator',
      version,
      description: 'Matrices of filesystem benchmarks run by agents; results, comparisons and progress.',
    },
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'FSBENCH_TOKEN' } },
      schemas: {
        Matrix: schema(Matrix, 'input'),
        Cell: schema(Cell, 'output'),
        RunResult: schema(RunResult, 'output'),
        Histogram: schema(Histogram, 'output'),
        MachineFingerprint: schema(MachineFingerprint, 'output'),
        InotifyMetrics: schema(InotifyMetrics, 'output'),
        MetadataMetrics: schema(MetadataMetrics, 'output'),
        NoopMetrics: schema(NoopMetrics, 'output'),
        Report: schema(ReportSchema, 'output'),
        CompareReport: schema(CompareReportSchema, 'output'),
        UploadAnswer: schema(UploadAnswerSchema, 'output'),
        Error: {
          type: 'object',
          required: ['error'],
          properties: {
            error: {
              type: 'object',
              required: ['code', 'message'],
              properties: {
                code: { enum: ERROR_CODE_LIST, description: 'stable; the README lists each with its HTTP status and CLI exit code' },
                message: { type: 'string' },
                issues: { type: 'array', items: { type: 'object', properties: { path: { type: 'string' }, message: { type: 'string' } } } },
              },
            },
          },
        },
      },
    },
    paths: {
      '/v1/matrices': {
        post: {
          summary: 'Submit a matrix (JSON or YAML); its runs are queued for the agents',
          security: [{ bearer: [] }],
          requestBody: { required: true, content: { ...json(ref('Matrix')), 'application/yaml': { schema: ref('Matrix') } } },
          responses: { '202': { description: 'queued' }, ...errors(400, 401, 403, 409, 413, 422, 503) },
        },
        get: {
          summary: 'List matrices with their progress',
          parameters: [
            { name: 'state', in: 'query', schema: { enum: ['queued', 'running', 'done', 'cancelled'] } },
            { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 1000 } },
          ],
          responses: { '200': { description: '{ matrices: [...] }' } },
        },
      },
      '/v1/matrices/{id}': {
        parameters: [idParam],
        get: { summary: 'One matrix with progress per machine', responses: { '200': { description: 'the matrix' }, ...errors(404) } },
        delete: { summary: 'Cancel a matrix', security: [{ bearer: [] }], responses: { '200': { description: 'cancelled' }, ...errors(404, 409) } },
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
              description: '{ matrix, report, runs, next }: `report` on the first page only; `next` is the cursor of the following page, or null',
              content: json({
                type: 'object',
                required: ['matrix', 'runs', 'next'],
                properties: { matrix: { type: 'object' }, report: ref('Report'), runs: { type: 'array' }, next: { type: ['string', 'null'] } },
              }),
            },
            ...errors(400, 404, 503),
          },
        },
      },
      '/v1/matrices/{id}/report.html': {
        parameters: [idParam],
        get: {
          summary:
            "The matrix's report as one self-contained HTML page that opens offline: the dashboard's charts (Chart.js inline), per-cell medians, CIs, CV and noise verdicts, notes, knees and every machine fingerprint field. Served inline with a Content-Security-Policy allowing its inline scripts and style by hash; counts against FSBENCH_MAX_DOWNLOADS",
          responses: { '200': { description: 'the page', content: { 'text/html': { schema: { type: 'string' } } } }, ...errors(404, 503) },
        },
      },
      '/v1/matrices/{id}/events': {
        parameters: [idParam],
        get: {
          summary: 'Server-sent progress events: `progress` snapshots, then `end`',
          responses: { '200': { description: 'event stream', content: { 'text/event-stream': { schema: { type: 'string' } } } }, ...errors(404, 503) },
        },
      },
      '/v1/agents': { get: { summary: 'Live agents with their fingerprints', responses: { '200': { description: '{ hosts, agents }' } } } },
      '/v1/compare': {
        get: {
          summary: 'Compare two matrices, or one matrix on two machines, cell by cell',
          parameters: [
            { name: 'baseline', in: 'query', required: true, schema: { type: 'string' }, description: 'matrix id' },
            { name: 'candidate', in: 'query', schema: { type: 'string' }, description: "matrix id (the baseline's when omitted)" },
            { name: 'baselineMachine', in: 'query', schema: { type: 'string' } },
            { name: 'candidateMachine', in: 'query', schema: { type: 'string' } },
            { name: 'metric', in: 'query', schema: { type: 'string' }, description: 'comma-separated metric names' },
            { name: 'alpha', in: 'query', schema: { type: 'number', exclusiveMinimum: 0, exclusiveMaximum: 0.5 } },
            { name: 'format', in: 'query', schema: { enum: FORMAT_NAMES } },
          ],
          responses: { '200': { description: 'the comparison', content: json(ref('CompareReport')) }, ...errors(400, 404) },
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
            ...errors(400, 401, 403, 413, 415),
          },
        },
      },
      '/metrics': { get: { summary: 'Prometheus metrics', responses: { '200': { description: 'text exposition format' } } } },
      '/openapi.json': { get: { summary: 'This document', responses: { '200': { description: 'OpenAPI 3.1' } } } },
    },
  };
}
