/**
 * A matrix's results summarised per cell for people: the headline metrics' median, min, max
 * and CV, and notes that name what a bare number hides (lost events, a starved reader, a
 * watcher library that cannot see overflows).
 */
import { describeCell, varyingParams, type Cell } from '../contract/matrix.js';
import type { OkRun, RunResult } from '../contract/result.js';
import { WORKLOADS } from '../contract/workloads/index.js';
import { summarize, type Summary } from '../stats/summary.js';

export interface MetricRow {
  readonly metric: string;
  readonly summary: Summary | null;
}

export interface CellReport {
  readonly cell: Cell;
  readonly label: string;
  readonly ok: number;
  readonly failed: number;
  readonly skipped: number;
  /** The message of a failed or skipped run, when there was one. */
  readonly problem: string | null;
  readonly metrics: readonly MetricRow[];
}

export interface Report {
  readonly matrix: string;
  readonly varying: readonly string[];
  readonly cells: readonly CellReport[];
  readonly notes: readonly string[];
}

function metricValues(runs: readonly OkRun[], metric: string): number[] {
  return runs.flatMap((r) => {
    const v = r.metrics[metric];
    return typeof v === 'number' ? [v] : [];
  });
}

function medianOf(c: CellReport, metric: string): number | null {
  return c.metrics.find((m) => m.metric === metric)?.summary?.median ?? null;
}

const pct = (x: number) => `${(x * 100).toFixed(x < 0.1 ? 1 : 0)}%`;

/** The same cell with the raw inotify reader, to measure what a library delivered against. */
function rawTwin(c: CellReport, all: readonly CellReport[]): CellReport | undefined {
  const ignore = new Set(['backend', 'bufferBytes', 'watch']);
  return all.find(
    (o) =>
      o.cell.params['backend'] === 'inotify' &&
      o.ok > 0 &&
      Object.entries(c.cell.params).every(([k, v]) => ignore.has(k) || o.cell.params[k] === v),
  );
}

function inotifyNotes(cells: readonly CellReport[]): string[] {
  const notes: string[] = [];
  for (const c of cells) {
    if (c.ok === 0 || c.cell.workload !== 'inotify') continue;
    const overflows = medianOf(c, 'overflows');
    const cpu = medianOf(c, 'readerCpuFraction');
    const backend = String(c.cell.params['backend']);
    if (overflows !== null && overflows > 0) {
      notes.push(`${c.label}: ${overflows} IN_Q_OVERFLOW per run (median): the kernel dropped events; raise maxQueuedEvents or give the reader more CPU.`);
    }
    if (cpu !== null && cpu < 0.25 && backend === 'inotify' && c.cell.params['mode'] === 'concurrent') {
      notes.push(`${c.label}: the reader used only ${pct(cpu)} of a CPU while the writers ran: it was starved, so the buffer size is not what limits throughput here (try readerNice or pin).`);
    }
    if (medianOf(c, 'drainTimedOut') === 1) notes.push(`${c.label}: the drain hit drainTimeout; the queue was not empty.`);
    if (backend !== 'inotify') {
      const twin = rawTwin(c, cells);
      const events = medianOf(c, 'events');
      const rawEvents = twin ? medianOf(twin, 'events') : null;
      const share = events !== null && rawEvents ? ` It delivered ${pct(events / rawEvents)} of the events the raw inotify reader got in ${twin?.label ?? ''}.` : ' Run the same cell with backend: inotify to see what it missed.';
      notes.push(`${c.label}: ${backend} cannot report IN_Q_OVERFLOW (overflows shows as n/a): lost events are silent.${share}`);
    }
  }
  return notes;
}

export function buildReport(matrix: string, cells: readonly Cell[], runs: readonly RunResult[]): Report {
  const varying = varyingParams(cells);
  const reports = cells.map((cell): CellReport => {
    const mine = runs.filter((r) => r.cellId === cell.id);
    const ok = mine.filter((r): r is OkRun => r.state === 'ok');
    const bad = mine.find((r) => r.state !== 'ok');
    const problem = bad?.state === 'failed' ? `${bad.error.code}: ${bad.error.message}` : bad?.state === 'skipped' ? `skipped: ${bad.reason}` : null;
    return {
      cell,
      label: describeCell(cell, varying),
      ok: ok.length,
      failed: mine.filter((r) => r.state === 'failed').length,
      skipped: mine.filter((r) => r.state === 'skipped').length,
      problem,
      metrics: WORKLOADS[cell.workload].headline.map((metric) => {
        const values = metricValues(ok, metric);
        return { metric, summary: values.length > 0 ? summarize(values) : null };
      }),
    };
  });
  return { matrix, varying, cells: reports, notes: inotifyNotes(reports) };
}
