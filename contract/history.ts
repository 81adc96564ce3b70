/**
 * History's answer on the wire (`GET /v1/history`, `fsbench history --format json`): series of one
 * matrix name over time with their points and change points. The coordinator builds it
 * (coordinator/history/history.ts); the dashboard parses it with this schema; the types are inferred.
 */
import { z } from 'zod';

// Plain shapes, not the matrix's schemas: the dashboard's bundle parses this, and matrix.ts
// brings node:crypto (cell ids) with it.
const ParamValue = z.union([z.number(), z.string(), z.boolean()]);

const Nullable = z.number().nullable();
export const HistoryPageSchema = z
  .object({
    series: z.array(
      z
        .object({
          key: z.string(),
          name: z.string(),
          machine: z.string(),
          workload: z.string(),
          metric: z.string(),
          params: z.record(z.string(), ParamValue),
          label: z.string(),
          points: z.array(
            z
              .object({
                matrixId: z.string(),
                at: z.string().describe("when the matrix's first run started (ISO 8601)"),
                n: z.number().int(),
                median: z.number(),
                ciLow: Nullable.describe("the median's 95% CI; null with too few runs"),
                ciHigh: Nullable,
                flagged: z.number().int().describe('runs flagged for interference among the point\'s runs'),
                kernel: z.string().nullable(),
                factChanges: z.array(z.string()).describe('machine facts that differ from the previous point, as `fact: before -> after`'),
                annotations: z.record(z.string(), z.string()).describe("the matrix's annotations (`commit: 4f2a9c1`)"),
                annotationChanges: z.array(z.string()).describe('annotations that differ from the previous point, as `name: before -> after`'),
              })
              .strict(),
          ),
          detectable: Nullable.describe(
            'the smallest lasting step, relative to the level since the last change, that as many new points again would show as a change (80% power); null with fewer than 2 points since',
          ),
          changes: z.array(
            z
              .object({
                index: z.number().int().describe('the first point after the change'),
                matrixId: z.string(),
                at: z.string(),
                before: z.number().describe("median of the points' medians before the change, up to the neighbouring change"),
                after: z.number(),
                ratio: Nullable.describe('after / before; null when before is 0'),
                ratioLow: Nullable.describe('Hodges-Lehmann interval of the points either side; null with too few points'),
                ratioHigh: Nullable,
                magnitude: z.number(),
                p: z.number(),
                suspect: z.boolean().describe('the points at the step carry runs flagged for interference: it may be the machine, not the code'),
                why: z.array(z.string()),
              })
              .strict(),
          ),
        })
        .strict(),
    ),
    next: z.string().nullable(),
    renamed: z
      .object({ from: z.string(), to: z.string(), at: z.string() })
      .strict()
      .optional()
      .describe('the machine asked for was renamed (`fsbench agents rename`, first on `at`): these are the series of the name it has now, which hold its runs'),
  })
  .strict();

export type HistoryPage = z.infer<typeof HistoryPageSchema>;
export type HistorySeries = HistoryPage['series'][number];
export type HistoryPoint = HistorySeries['points'][number];
export type HistoryChange = HistorySeries['changes'][number];
