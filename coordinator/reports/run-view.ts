/**
 * A stored run as `GET /v1/matrices/:id/results` lists it beside the report: every field, the
 * details (limits, info, histograms) and the interference parsed back from their JSON (runView),
 * or written straight into the answer (runJson), in the one shape RunView.
 */
import { z } from 'zod';
import { InotifyLimits } from '../../contract/fingerprint.js';
import { Interference } from '../../contract/interference.js';
import { CellParams } from '../../contract/matrix.js';
import { Histogram } from '../../contract/result.js';
import type { RunRow } from '../store/index.js';

const Iso = z.iso.datetime();
const Count = z.number().int().nonnegative();
const Metrics = z.record(z.string(), z.number().nullable());
const Histograms = z.record(z.string(), Histogram);
const Info = z.record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.null()]));

/**
 * The one shape of a stored run in the API: what runView returns and runJson writes, and the
 * OpenAPI document's `Run` (routes/openapi-components.ts).
 */
export const RunView = z
  .object({
    cellId: z.string(),
    repetition: Count,
    machine: z.string(),
    hostId: z.string().nullable(),
    target: z.string(),
    state: z.enum(['ok', 'failed', 'skipped']),
    params: CellParams,
    startedAt: Iso.nullable(),
    finishedAt: Iso.nullable(),
    storedAt: Iso,
    attempts: Count,
    metrics: Metrics.optional(),
    error: z.object({ code: z.string(), message: z.string() }).strict().optional(),
    reason: z.string().optional(),
    limits: InotifyLimits.nullable().optional(),
    info: Info.optional(),
    histograms: Histograms.optional(),
    interference: Interference.optional(),
  })
  .strict();
export type RunView = z.infer<typeof RunView>;

const Details = z
  .object({
    limits: InotifyLimits.nullable().optional(),
    info: Info.optional(),
    histograms: Histograms.optional(),
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
  // Stored from a run the contract had checked (store/run-rows.ts), as runJson passes it on.
  const interference = row.interference === null ? {} : { interference: JSON.parse(row.interference) as Interference };
  switch (row.state) {
    case 'ok':
      return {
        ...base,
        metrics: Metrics.parse(JSON.parse(row.metrics ?? '{}')),
        limits: details.limits ?? null,
        info: details.info ?? {},
        ...(withHistograms ? { histograms: row.histograms === null ? (details.histograms ?? {}) : Histograms.parse(JSON.parse(row.histograms)) } : {}),
        ...interference,
      };
    case 'failed':
      return { ...base, error: { code: row.error_code ?? 'INTERNAL', message: row.error_message ?? '' }, limits: details.limits ?? null, ...interference };
    case 'skipped':
      return { ...base, reason: row.reason ?? '' };
  }
}

const str = (v: string | number | null) => JSON.stringify(v);

/**
 * JSON.stringify(runView(row, withHistograms)), without parsing what it only passes on: the
 * parameters, metrics, histograms and interference go out as the text the store holds, which the
 * coordinator wrote with JSON.stringify from a run the contract had checked (store/run-rows.ts), so the text is
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
