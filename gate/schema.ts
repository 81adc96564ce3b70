/** The gate's JSON answer (`--format json`, `GET /v1/gate`), for the OpenAPI document and its readers. */
import { z } from 'zod';
import { CompareReportSchema } from '../compare/schema.js';

const Count = z.number().int().nonnegative();

export const GateReportSchema = z
  .object({
    verdict: z.enum(['pass', 'fail', 'inconclusive']).describe('fail: a regression (exit 6); inconclusive: none, but a gated cell-metric could not be judged (exit 7); pass: neither, or the unjudged ones accepted (allowInconclusive)'),
    allowInconclusive: z.boolean().describe('whether cell-metrics that could not be judged were accepted (they still count and are named)'),
    counts: z.object({ regression: Count, improvement: Count, pass: Count, inconclusive: Count }).strict().describe('gated cell-metrics by status; rows of metrics with no better direction are not counted'),
    notJudged: z.array(z.string()).describe('baseline cells the candidate lacks: not judged, so the verdict is inconclusive unless accepted'),
    maxRegression: z.number().describe('the default limit, a share (0.05 = 5%)'),
    power: z.number(),
    alpha: z.number(),
    excluded: z.object({ baseline: Count, candidate: Count }).strict().nullable().describe('runs flagged for interference left out of each side (excludeFlagged)'),
    baseline: CompareReportSchema.shape.baseline,
    candidate: CompareReportSchema.shape.candidate,
    rows: z.array(
      CompareReportSchema.shape.rows.element.extend({
        status: z.enum(['regression', 'improvement', 'pass', 'inconclusive']),
        reason: z.string(),
        threshold: z.number(),
        detectable: z.number().nullable().describe('the smallest relative change these runs would have detected with `power`; null when unknown or none (untestable)'),
        untestable: z.boolean().describe('too few runs for the test to reach alpha at all'),
        gated: z.boolean().describe('whether the metric has a better direction and so counts toward the verdict'),
      }),
    ),
    notes: CompareReportSchema.shape.notes,
  })
  .strict();
