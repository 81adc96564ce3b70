/**
 * The compare report as a zod schema, for `GET /openapi.json`. The compile-time check at the
 * bottom keeps it in step with the TypeScript interfaces in compare.ts.
 */
import { z } from 'zod';
import { CellParams } from '../contract/matrix.js';
import { DIRECTIONS } from '../contract/metrics.js';
import { WORKLOAD_NAMES } from '../contract/workloads/index.js';
import type { Mutable, Same } from '../report/schema.js';
import { COMPARE_NOTE_KINDS, COMPARE_WARNING_KINDS, type CompareReport } from './compare.js';

const direction = z.enum(DIRECTIONS);

const Side = z.object({
  n: z.number().int(),
  median: z.number(),
  min: z.number(),
  max: z.number(),
  cv: z.number().nullable(),
  noisy: z.boolean().describe('too few runs or a CV above 10%: the side cannot support a conclusion'),
  noise: z.array(z.string()),
});

const SetInfo = z.object({
  name: z.string(),
  runs: z.number().int(),
  okRuns: z.number().int(),
  machines: z.array(z.string()),
  matrices: z.array(z.string()),
});

export const CompareReportSchema = z
  .object({
    baseline: SetInfo,
    candidate: SetInfo,
    alpha: z.number(),
    level: z.number(),
    matchedBy: z.enum(['params', 'params+machine']),
    differing: z.array(
      z.object({ workload: z.enum(WORKLOAD_NAMES), param: z.string(), baseline: z.string().nullable(), candidate: z.string().nullable() }),
    ),
    differingFacts: z
      .array(z.object({ fact: z.string(), a: z.string().nullable(), b: z.string().nullable() }))
      .describe('machine facts that differ between the two sides (a: baseline, b: candidate; null: unknown)'),
    metrics: z.array(z.string()),
    rows: z.array(
      z.object({
        metric: z.string(),
        direction,
        workload: z.enum(WORKLOAD_NAMES),
        params: CellParams,
        label: z.string(),
        baselineMachine: z.string(),
        candidateMachine: z.string(),
        baseline: Side.nullable(),
        candidate: Side.nullable(),
        ratio: z.number().nullable().describe('candidate median / baseline median'),
        deltaPct: z.number().nullable(),
        ci: z
          .object({ estimate: z.number(), low: z.number(), high: z.number(), level: z.number(), method: z.enum(['exact', 'asymptotic']) })
          .nullable()
          .describe('Hodges-Lehmann interval for the ratio candidate / baseline'),
        pValue: z.number().nullable().describe('two-sided Mann-Whitney U'),
        detectable: z.number().nullable().describe('the smallest relative change these runs would have detected with 80% power; null when untestable or without both samples'),
        significant: z.boolean(),
        verdict: z.enum(['better', 'worse', 'changed', '~', 'n/a']),
        warnings: z
          .array(z.object({ kind: z.enum(COMPARE_WARNING_KINDS), side: z.enum(['baseline', 'candidate']).nullable(), text: z.string() }))
          .describe('why the delta cannot be trusted: a side without a result, a side too noisy, too few runs for the test'),
      }),
    ),
    summary: z.array(
      z.object({
        metric: z.string(),
        direction,
        cells: z.number().int(),
        significant: z.number().int(),
        better: z.number().int(),
        worse: z.number().int(),
        geomeanRatio: z.number().nullable(),
        geomeanDeltaPct: z.number().nullable(),
      }),
    ),
    unmatched: z.object({ baseline: z.array(z.string()), candidate: z.array(z.string()) }),
    notes: z.array(z.object({ kind: z.enum(COMPARE_NOTE_KINDS), severity: z.enum(['warning', 'info']), text: z.string() })),
  })
  .describe('Two result sets compared cell by cell');

export const UploadAnswerSchema = z.object({
  matrices: z.array(z.object({ id: z.string(), name: z.string(), machine: z.string(), stored: z.number().int(), duplicates: z.number().int() })),
  stored: z.number().int(),
  duplicates: z.number().int(),
});

/** Fails to compile when the schema and the interface drift apart (readonly aside). */
export const schemaMatchesReport: Same<Mutable<CompareReport>, z.infer<typeof CompareReportSchema>> = true;
