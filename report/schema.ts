/**
 * The report model as zod schemas, for `GET /openapi.json` and for clients that read a report
 * back (`fsbench compare matrix:ID`). The compile-time check at the bottom keeps them in step
 * with the interfaces in model.ts.
 */
import { z } from 'zod';
import { MachineFingerprint } from '../contract/fingerprint.js';
import { CellParams } from '../contract/matrix.js';
import { DIRECTIONS } from '../contract/metrics.js';
import { WORKLOAD_NAMES } from '../contract/workloads/index.js';
import type { Report } from './model.js';

const bytes = z.number().int().nonnegative().nullable();

const MetricStatsSchema = z.object({
  n: z.number().int(),
  median: z.number(),
  mean: z.number(),
  stddev: z.number().describe('sample standard deviation (n - 1)'),
  cv: z.number().nullable().describe('stddev / |mean|'),
  min: z.number(),
  max: z.number(),
  ciLow: z.number().nullable().describe("distribution-free 95% CI of the median (order statistics); null below 6 runs"),
  ciHigh: z.number().nullable(),
  ciLevel: z.number().nullable().describe("the interval's actual coverage"),
  noisy: z.boolean().describe('too few runs or a CV above 10%'),
  noise: z.array(z.string()),
  outliers: z.number().int().describe('values with a modified z-score above 3.5'),
});

const NoteSchema = z.object({
  kind: z.string().min(1).describe("the report's kinds (wide-spread, interference, interference-spread, precision-reached, precision-short, cache-size) or a workload's own"),
  severity: z.enum(['warning', 'info']),
  text: z.string(),
  figure: z.object({ name: z.string(), value: z.number() }).nullable().describe('the figure the note states for its cell'),
});

const NoteGroupSchema = z.object({
  kind: z.string().min(1).describe("the report's kinds (wide-spread, interference, interference-spread, precision-reached, precision-short, cache-size) or a workload's own"),
  severity: z.enum(['warning', 'info']),
  text: z.string(),
  cells: z.array(z.object({ cellId: z.string(), machine: z.string(), label: z.string() })),
  figure: z.object({ name: z.string(), min: z.number(), max: z.number() }).nullable().describe("the range of the notes' figure over the cells"),
});

const CellReportSchema = z.object({
  matrix: z.string(),
  cellId: z.string(),
  machine: z.string(),
  workload: z.enum(WORKLOAD_NAMES),
  params: CellParams,
  label: z.string(),
  runs: z.number().int(),
  ok: z.number().int(),
  failed: z.number().int(),
  skipped: z.number().int(),
  problem: z.string().nullable(),
  metrics: z.record(z.string(), MetricStatsSchema),
  histograms: z.record(
    z.string(),
    z.object({ count: z.number(), p50: z.number().nullable(), p90: z.number().nullable(), p99: z.number().nullable(), max: z.number().nullable() }),
  ),
  noise: z.object({ noisy: z.boolean(), reasons: z.array(z.string()) }),
  notes: z.array(z.string()).describe("the cell's notes as sentences (findings' texts)"),
  findings: z.array(NoteSchema),
  samples: z.record(z.string(), z.array(z.number())).optional(),
});

export const ReportSchema = z
  .object({
    title: z.string(),
    metrics: z.array(
      z.object({
        workload: z.enum(WORKLOAD_NAMES),
        metrics: z.array(z.object({ name: z.string(), unit: z.string(), direction: z.enum(DIRECTIONS), doc: z.string(), headline: z.boolean() })),
      }),
    ),
    machines: z.array(
      z.object({
        machine: z.string(),
        caches: z.object({ l1dBytes: bytes, l2Bytes: bytes, l3Bytes: bytes }),
        fingerprint: MachineFingerprint.nullable(),
      }),
    ),
    cells: z.array(CellReportSchema),
    knees: z.array(
      z.object({
        matrix: z.string(),
        machine: z.string(),
        workload: z.enum(WORKLOAD_NAMES),
        param: z.string(),
        metric: z.string(),
        label: z.string(),
        fixed: CellParams,
        points: z.array(z.object({ x: z.number(), median: z.number() })),
        knee: z.object({ x: z.number(), median: z.number(), bestX: z.number(), best: z.number(), tolerance: z.number() }).nullable(),
        l2Bytes: bytes,
        l3Bytes: bytes,
        cacheSource: z.enum(['sysfs', 'sysconf']).nullable().describe("sysconf: glibc's figure, which the kernel did not confirm"),
        note: z.string().nullable(),
        kneeOverL3: z.number().nullable(),
      }),
    ),
    notes: z.array(NoteGroupSchema).describe("every cell's notes, one group per kind, summarised over the cells that have it"),
  })
  .describe("A result set's statistics per cell and machine, notes, noise verdicts and knees");

/** For compile-time checks that a schema and an interface agree (readonly aside). */
export type Mutable<T> = T extends readonly (infer U)[] ? Mutable<U>[] : T extends object ? { -readonly [K in keyof T]: Mutable<T[K]> } : T;
export type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : never) : never;
export const schemaMatchesReport: Same<Mutable<Report>, z.infer<typeof ReportSchema>> = true;
