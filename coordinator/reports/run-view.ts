/**
 * A stored run as `GET /v1/matrices/:id/results` lists it beside the report: every field, the
 * details (limits, info, histograms) parsed back from their JSON (runView), or written straight
 * into the answer (runJson).
 */
import { z } from 'zod';
import { InotifyLimits } from '../../contract/fingerprint.js';
import { CellParams } from '../../contract/matrix.js';
import { Histogram } from '../../contract/result.js';
import type { RunRow } from '../store/index.js';

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

const str = (v: string | number | null) => JSON.stringify(v);

/**
 * JSON.stringify(runView(row, withHistograms)), without parsing what it only passes on: the
 * parameters, metrics and histograms go out as the text the store holds, which the coordinator
 * wrote with JSON.stringify from a run the contract had checked (run-rows.ts), so the text is
 * the same. Parsing them back with their schemas cost 370 us a run with a 128-bucket histogram,
 * most of a large download's time and all of its event-loop stalls. The details (limits, info)
 * are small and still parsed.
 */
export function runJson(row: RunRow, withHistograms: boolean): string {
  const base =
    `{"cellId":${str(row.cell_id)},"repetition":${str(row.repetition)},"machine":${str(row.machine)},"hostId":${str(row.host_id)}` +
    `,"target":${str(row.target)},"state":${str(row.state)},"params":${row.params},"startedAt":${str(row.started_at)}` +
    `,"finishedAt":${str(row.finished_at)},"storedAt":${str(new Date(row.stored_at).toISOString())},"attempts":${str(row.attempts)}`;
  const details = row.details === null ? {} : Details.parse(JSON.parse(row.details));
  const limits = JSON.stringify(details.limits ?? null);
  // As stored, like the metrics (run-rows.ts wrote it from a run the contract had checked).
  const interference = row.interference === null ? '' : `,"interference":${row.interference}`;
  switch (row.state) {
    case 'ok': {
      const histograms = withHistograms ? `,"histograms":${row.histograms ?? JSON.stringify(details.histograms ?? {})}` : '';
      return `${base},"metrics":${row.metrics ?? '{}'},"limits":${limits},"info":${JSON.stringify(details.info ?? {})}${histograms}${interference}}`;
    }
    case 'failed':
      return `${base},"error":${JSON.stringify({ code: row.error_code ?? 'INTERNAL', message: row.error_message ?? '' })},"limits":${limits}${interference}}`;
    case 'skipped':
      return `${base},"reason":${str(row.reason ?? '')}}`;
  }
}
