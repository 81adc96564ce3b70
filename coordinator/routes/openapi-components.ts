/**
 * The components of the coordinator's OpenAPI document (openapi.ts): the schemas of every body
 * the API takes and answers, generated from the zod schemas that validate them or that describe
 * the answers (the matrices' answers in matrices/answers.ts, whose types are inferred from them),
 * and the error responses, each status with the catalog's codes that carry it.
 */
import { z } from 'zod';
import { CompareReportSchema, UploadAnswerSchema } from '../../compare/schema.js';
import { ERROR_CODE_LIST, ERRORS, type ErrorCode } from '../../contract/errors.js';
import { MachineFingerprint } from '../../contract/fingerprint.js';
import { HistoryPageSchema } from '../../contract/history.js';
import { Cell, Matrix } from '../../contract/matrix.js';
import { Histogram, RunResult } from '../../contract/result.js';
import { WORKLOAD_NAMES, WORKLOADS } from '../../contract/workloads/index.js';
import { GateReportSchema } from '../../gate/schema.js';
import { AgentKeyView, AuditEntryView } from '../../queue/enrollment.js';
import { AgentStatus } from '../../queue/registry.js';
import { Doc } from '../../report/export/doc.js';
import { ReportSchema } from '../../report/schema.js';
import { Cancelled, MatrixDetail, MatrixSummary, Submitted } from '../matrices/index.js';
import { RunView } from '../reports/index.js';

export type JsonSchema = Record<string, unknown>;

/** JSON Schema 2020-12 (OpenAPI 3.1's dialect) without the `$schema` key components may not repeat. */
export function schema(s: z.ZodType, io: 'input' | 'output'): JsonSchema {
  const out = { ...(z.toJSONSchema(s, { io, unrepresentable: 'any' }) as JsonSchema) };
  delete out['$schema'];
  return out;
}

const Count = z.number().int().nonnegative();
export const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
export const json = (s: unknown) => ({ 'application/json': { schema: s } });
export const text = { schema: { type: 'string' } };
/** A report's or a comparison's document (report/export/doc.ts), as the dashboard fetches it. */
const Documented = z.object({ document: Doc }).strict();

/** Bencher's metric format (https://bencher.dev/docs/reference/bencher-metric-format/), as the gate writes it. */
const BencherMetrics = z.record(z.string(), z.record(z.string(), z.object({ value: z.number(), lower_value: z.number().optional(), upper_value: z.number().optional() }).strict()));
/** github-action-benchmark's custom tools' input. */
const ActionBenchmark = z.array(z.object({ name: z.string(), unit: z.string(), value: z.number(), range: z.string().optional(), extra: z.string().optional() }).strict());

const RETRY_AFTER = { 'Retry-After': { description: 'seconds to wait before trying again', schema: { type: 'string', pattern: '^[0-9]+$' } } };

/** What each error status means here; its body's code is one of the catalog's codes with that status. */
export const ERROR_RESPONSES: Readonly<Record<number, { readonly name: string; readonly description: string; readonly headers?: object }>> = {
  400: { name: 'BadRequest', description: 'the request, its body or its query is invalid; `issues` name each field' },
  401: {
    name: 'Unauthorized',
    description: 'no bearer token, and the coordinator needs one (FSBENCH_TOKEN; for reads with FSBENCH_READ_AUTH=token)',
    headers: { 'WWW-Authenticate': { schema: { type: 'string' } } },
  },
  403: {
    name: 'Forbidden',
    description:
      'a wrong bearer token; without FSBENCH_TOKEN, a write from elsewhere than a program on the coordinator\'s machine (another address, a Host, Origin or ' +
      'Sec-Fetch-Site of a web page, a proxy\'s headers); an open read whose Host names neither this machine nor FSBENCH_ALLOWED_HOSTS',
  },
  404: { name: 'NotFound', description: 'no such matrix' },
  409: { name: 'Conflict', description: 'the matrix is done or cancelled already, an Idempotency-Key was used with another body, or no live agent matches the placement' },
  413: { name: 'PayloadTooLarge', description: 'the body is larger than the coordinator accepts (FSBENCH_MAX_BODY)' },
  415: { name: 'UnsupportedMediaType', description: 'the body has a content type or encoding this endpoint does not take' },
  422: { name: 'TooLong', description: 'the matrix would take longer than FSBENCH_MAX_DURATION, or a comparison or gate would read more stored runs than FSBENCH_MAX_READ_RUNS' },
  429: {
    name: 'RateLimited',
    description:
      'more writes from this client than FSBENCH_WRITE_LIMIT, or comparisons, gates and history reads than FSBENCH_READ_LIMIT, allows in a minute; or ' +
      'FSBENCH_MAX_READS such reads computed and FSBENCH_READ_QUEUE waiting already',
    headers: RETRY_AFTER,
  },
  500: { name: 'Internal', description: "a bug: the coordinator's log has the details" },
  503: { name: 'Unavailable', description: 'Redis does not answer in time, the queues are full, or every download or stream slot is taken', headers: RETRY_AFTER },
};

function errorResponse(status: number) {
  const r = ERROR_RESPONSES[status];
  if (!r) throw new Error(`no error response for HTTP ${status}`);
  const codes = (Object.keys(ERRORS) as ErrorCode[]).filter((c) => ERRORS[c].status === status);
  return {
    description: r.description,
    ...(r.headers ? { headers: r.headers } : {}),
    content: json({ allOf: [ref('Error'), { type: 'object', properties: { error: { type: 'object', properties: { code: { enum: codes } } } } }] }),
  };
}
/** Each workload's metrics as a component named after it (`inotify` -> `InotifyMetrics`). */
function metricSchemas(): Record<string, JsonSchema> {
  return Object.fromEntries(
    WORKLOAD_NAMES.map((name) => [`${name.charAt(0).toUpperCase()}${name.slice(1)}Metrics`, schema(WORKLOADS[name].metrics, 'output')]),
  );
}

/** The document's components: its security scheme, error responses and schemas. */
export function components(): JsonSchema {
  return {
    securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'FSBENCH_TOKEN' } },
    responses: Object.fromEntries(Object.entries(ERROR_RESPONSES).map(([status, r]) => [r.name, errorResponse(Number(status))])),
    schemas: {
      Matrix: schema(Matrix, 'input'),
      Cell: schema(Cell, 'output'),
      RunResult: schema(RunResult, 'output'),
      Histogram: schema(Histogram, 'output'),
      MachineFingerprint: schema(MachineFingerprint, 'output'),
      ...metricSchemas(),
      Report: schema(ReportSchema, 'output'),
      CompareReport: schema(CompareReportSchema, 'output'),
      Document: schema(Documented, 'output'),
      GateReport: schema(GateReportSchema, 'output'),
      BencherMetrics: schema(BencherMetrics, 'output'),
      ActionBenchmark: schema(ActionBenchmark, 'output'),
      HistoryPage: schema(HistoryPageSchema, 'output'),
      UploadAnswer: schema(UploadAnswerSchema, 'output'),
      MatrixSummary: schema(MatrixSummary, 'output'),
      MatrixDetail: schema(MatrixDetail, 'output'),
      Submitted: schema(Submitted, 'output'),
      Cancelled: schema(Cancelled, 'output'),
      Run: schema(RunView, 'output'),
      Agents: schema(z.object({ version: z.string().describe("the coordinator's fsbench version: an agent whose fingerprint says another is logged and counted"), hosts: Count, agents: z.array(AgentStatus), keys: z.array(AgentKeyView.strict()), pending: Count }).strict(), 'output'),
      AgentKey: schema(AgentKeyView.strict(), 'output'),
      EnrollmentHistory: schema(z.object({ changes: z.array(AuditEntryView.strict()) }).strict(), 'output'),
      Error: {
        type: 'object',
        required: ['error'],
        additionalProperties: false,
        properties: {
          error: {
            type: 'object',
            required: ['code', 'message'],
            additionalProperties: false,
            properties: {
              code: { enum: ERROR_CODE_LIST, description: 'stable; docs/reference.md lists each with its HTTP status and CLI exit code' },
              message: { type: 'string' },
              issues: {
                type: 'array',
                items: { type: 'object', required: ['path', 'message'], additionalProperties: false, properties: { path: { type: 'string' }, message: { type: 'string' } } },
              },
            },
          },
        },
      },
    },
  };
}
