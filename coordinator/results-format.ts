/**
 * `GET /v1/matrices/:id/results`: the matrix's report (report/build.ts, the one every output
 * shares) in any exporter's format, or, as JSON, `{ matrix, report, runs }` with every stored
 * run. CSV is the report's long table, or the raw runs with `table=runs`. Runs are written as
 * they are read, so a large matrix never sits in memory as a whole.
 */
import type { Response } from 'express';
import { z } from 'zod';
import { FsbenchError } from '../contract/errors.js';
import { WORKLOADS } from '../contract/workloads/index.js';
import { buildReport } from '../report/build.js';
import { csvLine } from '../report/export/csv.js';
import { CONTENT_TYPES, FORMAT_NAMES, render } from '../report/export/index.js';
import type { Report } from '../report/model.js';
import { exportableReport } from '../report/results-view.js';
import { runView } from './results.js';
import { storeRunSource } from './store-adapter.js';
import type { MatrixRecord, Store } from './store.js';

export const ResultsQuery = z
  .object({
    format: z.enum(FORMAT_NAMES).default('json'),
    table: z.enum(['cells', 'runs']).default('cells'),
    histograms: z.enum(['0', '1', 'false', 'true']).default('0').transform((v) => v === '1' || v === 'true'),
  })
  .strict();
export type ResultsQuery = z.infer<typeof ResultsQuery>;

/** The report of a stored matrix: its runs streamed through the one aggregation, cell by cell. */
export function matrixReport(store: Store, m: MatrixRecord): Report {
  const source = storeRunSource(store)(m.id);
  if (!source) throw new FsbenchError('NOT_FOUND', `no matrix ${m.id}`);
  return buildReport(source.runs, { title: `${m.name} (${m.id}): ${m.state}`, grouped: true, cellOrder: source.cellOrder, fingerprintOf: source.fingerprintOf });
}

function writeJson(res: Response, store: Store, m: MatrixRecord, summary: unknown, histograms: boolean): void {
  const report = exportableReport(matrixReport(store, m)).json();
  res.type(CONTENT_TYPES.json);
  res.write(`{"matrix":${JSON.stringify(summary)},"report":${JSON.stringify(report)},"runs":[`);
  let first = true;
  for (const row of store.iterateRuns(m.id)) {
    res.write(`${first ? '' : ','}${JSON.stringify(runView(row, histograms))}`);
    first = false;
  }
  res.end(']}');
}

function writeRunsCsv(res: Response, store: Store, m: MatrixRecord): void {
  const params = Object.keys(WORKLOADS[m.spec.workload].params);
  const metrics = Object.keys(WORKLOADS[m.spec.workload].metricDocs);
  res.type(CONTENT_TYPES.csv);
  res.write(csvLine(['cellId', 'repetition', 'machine', 'state', ...params, ...metrics, 'errorCode', 'errorMessage', 'reason']));
  for (const row of store.iterateRuns(m.id)) {
    const r = runView(row, false);
    res.write(csvLine([r.cellId, r.repetition, r.machine, r.state, ...params.map((p) => r.params[p]),
      ...metrics.map((k) => r.metrics?.[k]), r.error?.code, r.error?.message, r.reason]));
  }
  res.end();
}

export function writeResults(res: Response, store: Store, m: MatrixRecord, summary: unknown, q: ResultsQuery): void {
  if (q.format === 'json') {
    writeJson(res, store, m, summary, q.histograms);
  } else if (q.format === 'csv' && q.table === 'runs') {
    writeRunsCsv(res, store, m);
  } else {
    res.type(CONTENT_TYPES[q.format]).send(render(q.format, exportableReport(matrixReport(store, m))));
  }
}
