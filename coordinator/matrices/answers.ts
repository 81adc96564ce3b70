/**
 * The `/v1/matrices` answers as zod schemas, the one source of their shapes: their TypeScript
 * types are inferred from them here, and the OpenAPI document's components are generated from
 * them (routes/openapi-components.ts), so the code that builds an answer (progress.ts, submit.ts,
 * routes/matrices.ts) and the document cannot disagree. A run's shape is reports/run-view.ts's
 * RunView.
 */
import { z } from 'zod';
import { Placement } from '../../contract/matrix.js';
import { RunOrder, Seed } from '../../contract/schedule.js';
import { WORKLOAD_NAMES } from '../../contract/workloads/index.js';
import { MATRIX_STATES, TargetInfo } from '../store/index.js';

const Iso = z.iso.datetime();
const Count = z.number().int().nonnegative();

/** A matrix's runs: how many it expects, how many are stored and how they ended; fraction is stored / expected, 0..1. */
export const Progress = z.object({ expected: Count, stored: Count, ok: Count, failed: Count, skipped: Count, fraction: z.number().min(0).max(1) }).strict();
export type Progress = z.infer<typeof Progress>;

/** A matrix in a list (`GET /v1/matrices`), and the start of every other answer about one. */
export const MatrixSummary = z
  .object({
    id: z.string(),
    name: z.string(),
    workload: z.enum(WORKLOAD_NAMES),
    state: z.enum(MATRIX_STATES),
    placement: Placement,
    cells: Count,
    runs: Count,
    createdAt: Iso,
    startedAt: Iso.nullable(),
    finishedAt: Iso.nullable(),
    progress: Progress,
    links: z.object({ self: z.string(), events: z.string(), results: z.string() }).strict(),
  })
  .strict();
export type MatrixSummary = z.infer<typeof MatrixSummary>;

/** `GET /v1/matrices`. */
export const MatrixList = z.object({ matrices: z.array(MatrixSummary) }).strict();
export type MatrixList = z.infer<typeof MatrixList>;

/** Where a matrix's cells stand under `repetitions: auto`; `imprecise` lists the first cells that stopped at the maximum without the precision. */
export const PrecisionSummary = z
  .object({
    metric: z.string(),
    target: z.number(),
    minRepetitions: Count,
    maxRepetitions: Count,
    measuring: Count,
    reached: Count,
    atMaximum: Count,
    stopped: Count,
    imprecise: z.array(z.object({ cellId: z.string(), target: z.string(), runs: Count, halfWidth: z.number().nullable() }).strict()),
  })
  .strict();
export type PrecisionSummary = z.infer<typeof PrecisionSummary>;

/** One machine's runs of a matrix; `target` is the host the placement targeted, or `any`, where `expected` is null (no host has a share). */
export const MachineProgress = z.object({ machine: z.string(), target: z.string(), expected: Count.nullable(), stored: Count, ok: Count, failed: Count, skipped: Count }).strict();
export type MachineProgress = z.infer<typeof MachineProgress>;

/** `GET /v1/matrices/:id`: one matrix with its progress per machine. */
export const MatrixDetail = MatrixSummary.extend({
  description: z.string().nullable(),
  repetitions: z.union([z.number().int(), z.literal('auto')]),
  order: RunOrder,
  seed: Seed.optional(),
  warmup: Count,
  precision: PrecisionSummary.nullable(),
  targets: z.array(TargetInfo),
  estimatedDurationMs: z.number().nonnegative(),
  machines: z.array(MachineProgress),
  failures: z.array(
    z.object({ cellId: z.string(), repetition: Count, machine: z.string(), code: z.string().nullable(), message: z.string().nullable() }).strict(),
  ),
}).strict();
export type MatrixDetail = z.infer<typeof MatrixDetail>;

/** `POST /v1/matrices`: the matrix queued, with its estimate. */
export const Submitted = MatrixSummary.extend({
  estimatedDurationMs: z.number().nonnegative(),
  estimatedDuration: z.string(),
  warmups: Count,
  warnings: z.array(z.string()).optional(),
}).strict();
export type Submitted = z.infer<typeof Submitted>;

/** `DELETE /v1/matrices/:id`: the matrix cancelled, and how many queued runs were taken off the queues. */
export const Cancelled = MatrixSummary.extend({ removedRuns: Count }).strict();
export type Cancelled = z.infer<typeof Cancelled>;
