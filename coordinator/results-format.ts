/**
 * A matrix's results as JSON (`{ matrix, runs, cells, machines }`), CSV (the aggregates, or the
 * runs with `table=runs`) or Markdown (the headline metrics per cell and machine). Written to
 * the response as they are read, so a large matrix streams rather than piling up in memory.
 */
import type { Response } from 'express';
import { z } from 'zod';
import { describeCell, varyingParams, type Cell } from '../contract/matrix.js';
import { WORKLOADS } from '../contract/workloads/index.js';
import { aggregate, machines, runView, type CellAggregate } from './results.js';
import type { MatrixRecord, Store } from './store.js';

export const ResultsQuery = z
  .object({
    format: z.enum(['json', 'csv', 'md']).default('json'),
    table: z.enum(['cells', 'runs']).default('cells'),
    histograms: z.enum(['0', '1', 'false', 'true']).default('0').transform((v) => v === '1' || v === 'true'),
  })
  .strict();
export type ResultsQuery = z.infer<typeof ResultsQuery>;

const SUMMARY_FIELDS = ['n', 'median', 'mean', 'stddev', 'cv', 'min', 'max', 'ciLow', 'ciHigh', 'ciLevel'] as const;

/** RFC 4180: quote fields holding a comma, a quote or a line break. */
function csvField(v: unknown): string {
  if (v === null || v === undefined || (typeof v === 'number' && !Number.isFinite(v))) return '';
  const s = typeof v === 'string' ? v : typeof v === 'number' || typeof v === 'boolean' ? String(v) : JSON.stringify(v);
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}
const csvLine = (fields: readonly unknown[]) => `${fields.map(csvField).join(',')}\r\n`;

function metricNames(m: MatrixRecord): string[] {
  const schema = WORKLOADS[m.spec.workload].metrics;
  return schema instanceof z.ZodObject ? Object.keys(schema.shape) : [];
}

function writeJson(res: Response, store: Store, m: MatrixRecord, summary: unknown, histograms: boolean): void {
  res.type('application/json');
  res.write(`{"matrix":${JSON.stringify(summary)},"runs":[`);
  let first = true;
  for (const row of store.iterateRuns(m.id)) {
    res.write(`${first ? '' : ','}${JSON.stringify(runView(row, histograms))}`);
    first = false;
  }
  res.write(`],"cells":${JSON.stringify(aggregate(store, m.id))},"machines":${JSON.stringify(machines(store, m.id))}}`);
  res.end();
}

function writeCsv(res: Response, store: Store, m: MatrixRecord, table: 'cells' | 'runs'): void {
  const params = Object.keys(WORKLOADS[m.spec.workload].params);
  res.type('text/csv; charset=utf-8');
  if (table === 'runs') {
    const metrics = metricNames(m);
    res.write(csvLine(['cellId', 'repetition', 'machine', 'state', ...params, ...metrics, 'errorCode', 'errorMessage', 'reason']));
    for (const row of store.iterateRuns(m.id)) {
      const r = runView(row, false);
      res.write(csvLine([r.cellId, r.repetition, r.machine, r.state, ...params.map((p) => r.params[p]),
        ...metrics.map((k) => r.metrics?.[k]), r.error?.code, r.error?.message, r.reason]));
    }
  } else {
    res.write(csvLine(['cellId', 'machine', ...params, 'ok', 'failed', 'skipped', 'metric', ...SUMMARY_FIELDS]));
    for (const a of aggregate(store, m.id)) {
      for (const [metric, s] of Object.entries(a.metrics)) {
        res.write(csvLine([a.cellId, a.machine, ...params.map((p) => a.params[p]), a.ok, a.failed, a.skipped, metric, ...SUMMARY_FIELDS.map((f) => s[f])]));
      }
    }
  }
  res.end();
}

function fmt(v: number): string {
  return Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 1 ? v.toFixed(2) : v.toPrecision(3);
}

function mdCell(a: CellAggregate, metric: string): string {
  const s = a.metrics[metric];
  if (!s) return '–';
  const ci = s.ciLow !== null && s.ciHigh !== null ? ` [${fmt(s.ciLow)}, ${fmt(s.ciHigh)}]` : '';
  return `${fmt(s.median)}${ci}`;
}

function writeMarkdown(res: Response, store: Store, m: MatrixRecord): void {
  const aggregates = aggregate(store, m.id);
  const cells: Cell[] = aggregates.map((a) => ({ id: a.cellId, workload: m.spec.workload, params: a.params }));
  const varying = varyingParams(cells);
  const headline = WORKLOADS[m.spec.workload].headline;
  const lines = [
    `# ${m.spec.name} (${m.id}): ${m.state}`,
    '',
    `${m.storedRuns}/${m.expectedRuns} runs: ${m.okRuns} ok, ${m.failedRuns} failed, ${m.skippedRuns} skipped. ` +
      'Each metric: median [95% CI of the median, when n allows].',
    '',
    `| cell | machine | ok/runs | ${headline.join(' | ')} |`,
    `|---|---|---|${headline.map(() => '---:').join('|')}|`,
  ];
  aggregates.forEach((a, i) => {
    const cell = cells[i];
    const label = cell ? describeCell(cell, varying) : a.cellId;
    lines.push(`| ${label.replace(/\|/g, '\\|')} | ${a.machine} | ${a.ok}/${a.runs} | ${headline.map((h) => mdCell(a, h)).join(' | ')} |`);
  });
  res.type('text/markdown; charset=utf-8').send(`${lines.join('\n')}\n`);
}

export function writeResults(res: Response, store: Store, m: MatrixRecord, summary: unknown, q: ResultsQuery): void {
  switch (q.format) {
    case 'json':
      writeJson(res, store, m, summary, q.histograms);
      return;
    case 'csv':
      writeCsv(res, store, m, q.table);
      return;
    case 'md':
      writeMarkdown(res, store, m);
      return;
  }
}
