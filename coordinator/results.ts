/**
 * A stored run as `GET /v1/matrices/:id/results` lists it beside the report: every field, the
 * details (limits, info, histograms) parsed back from their JSON.
 */
import { z } from 'zod';
import { InotifyLimits } from '../contract/fingerprint.js';
import { CellParams } from '../contract/matrix.js';
import { Histogram } from '../contract/result.js';
import type { RunRow } from './store.js';

export interface RunView {
  readonly cellId: string;
  readonly repetition: number;
  readonly machine: string;
  readonly hostId: string | null;
  /** `any`, or the host the placement put the run on. */
  readonly target: string;
  readonly state: 'ok' | 'failed' | 'skipped';
  readonly params: CellParams;
  readonly startedAt: string | null;
  readonly finishedAt: string | null;
  readonly storedAt: string;
  readonly attempts: number;
  readonly metrics?: Record<string, number | null>;
  readonly error?: { readonly code: string; readonly message: string };
  readonly reason?: string;
  readonly limits?: InotifyLimits | null;
  readonly info?: Record<string, string | number | boolean | null>;
  readonly histograms?: Record<string, Histogram>;
}

const Metrics = z.record(z.string(), z.number().nullable());
const Histograms = z.record(z.string(), Histogram);
const Details = z
  .object({
    limits: InotifyLimits.nullable().optional(),
    info: z.record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.null()])).optional(),
    histograms: z.record(z.string(), Histogram).optional(),
  })
  .loose();

export function runView(row: RunRow, withHistograms: boolean): RunView {
  const base = {
    cellId: row.cell_id,
    repetition: row.repetition,
    machine: row.machine,
    hostId: row.host_id,
    target: row.target,
    state: row.state,
    params: CellParams.parse(JSON.parse(row.params)),
    startedAt: row.started_at,
    finishedAt: row.finished_at,
    storedAt: new Date(row.stored_at).toISOString(),
    attempts: row.attempts,
  };
  const details = row.details === null ? {} : Details.parse(JSON.parse(row.details));
  switch (row.state) {
    case 'ok':
      return {
        ...base,
        metrics: Metrics.parse(JSON.parse(row.metrics ?? '{}')),
        limits: details.limits ?? null,
        info: details.info ?? {},
        ...(withHistograms ? { histograms: row.histograms === null ? (details.histograms ?? {}) : Histograms.parse(JSON.parse(row.histograms)) } : {}),
      };
    case 'failed':
      return { ...base, error: { code: row.error_code ?? 'INTERNAL', message: row.error_message ?? '' }, limits: details.limits ?? null };
    case 'skipped':
      return { ...base, reason: row.reason ?? '' };
  }
}
