/**
 * What `GET /v1/matrices/:id/results` answers: the raw runs, and per (cell, machine) the
 * statistics of every metric over the `ok` runs (stats/summary: n, median, mean, stddev, CV,
 * min, max, distribution-free 95% CI of the median). Runs are read with an iterator, so a large
 * matrix is never held in memory as a whole.
 */
import { z } from 'zod';
import { InotifyLimits, MachineFingerprint } from '../contract/fingerprint.js';
import { CellParams } from '../contract/matrix.js';
import { Histogram } from '../contract/result.js';
import { summarize, type Summary } from '../stats/summary.js';
import type { RunRow, Store } from './store.js';

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
        ...(withHistograms ? { histograms: details.histograms ?? {} } : {}),
      };
    case 'failed':
      return { ...base, error: { code: row.error_code ?? 'INTERNAL', message: row.error_message ?? '' }, limits: details.limits ?? null };
    case 'skipped':
      return { ...base, reason: row.reason ?? '' };
  }
}

export interface CellAggregate {
  readonly cellId: string;
  readonly machine: string;
  readonly params: CellParams;
  readonly runs: number;
  readonly ok: number;
  readonly failed: number;
  readonly skipped: number;
  /** Per metric, over the ok runs that report it (null values are left out). */
  readonly metrics: Record<string, Summary>;
}

/** Aggregates per (cell, machine), in cell order. */
export function aggregate(store: Store, matrixId: string): CellAggregate[] {
  const out: CellAggregate[] = [];
  let group: { cellId: string; machine: string; params: string; counts: Record<RunRow['state'], number>; values: Map<string, number[]> } | null = null;
  const flush = () => {
    if (!group) return;
    const metrics: Record<string, Summary> = {};
    for (const [name, values] of group.values) if (values.length > 0) metrics[name] = summarize(values);
    const { ok, failed, skipped } = group.counts;
    out.push({
      cellId: group.cellId,
      machine: group.machine,
      params: CellParams.parse(JSON.parse(group.params)),
      runs: ok + failed + skipped,
      ok,
      failed,
      skipped,
      metrics,
    });
  };
  for (const row of store.iterateRuns(matrixId)) {
    if (!group || group.cellId !== row.cell_id || group.machine !== row.machine) {
      flush();
      group = { cellId: row.cell_id, machine: row.machine, params: row.params, counts: { ok: 0, failed: 0, skipped: 0 }, values: new Map() };
    }
    group.counts[row.state]++;
    if (row.state !== 'ok' || row.metrics === null) continue;
    for (const [name, v] of Object.entries(Metrics.parse(JSON.parse(row.metrics)))) {
      if (v === null) continue;
      let list = group.values.get(name);
      if (!list) group.values.set(name, (list = []));
      list.push(v);
    }
  }
  flush();
  return out;
}

/** The latest fingerprint of each machine that ran part of the matrix. */
export function machines(store: Store, matrixId: string): { machine: string; fingerprint: MachineFingerprint }[] {
  return store.fingerprints(matrixId).map((r) => ({ machine: r.machine, fingerprint: MachineFingerprint.parse(JSON.parse(r.json)) }));
}
