/**
 * A page of history as the exporters take it: one row per series (machine, metric, cell) with
 * its latest median and every change point, and with `points`, a table of each series' points,
 * where the kernel or another machine fact changed marked beside them.
 */
import type { Column, CsvTable, Doc, Exportable, TextTable } from '../../report/export/index.js';
import { formatDelta, formatInterval, formatNumber, formatPercent, formatPValue, formatRatio } from '../../report/format.js';
import { CHANGE_POINT_DEFAULTS } from '../../stats/change-point.js';
import type { HistoryChange, HistoryPage, HistorySeries } from '../../contract/history.js';

const left = (title: string): Column => ({ title, align: 'left' });
const right = (title: string): Column => ({ title, align: 'right' });

/** `2026-01-13 +25.0% [1.21-1.29] p=1e-6`, and `suspect` when the runs at the step were disturbed. */
export function changeText(c: HistoryChange): string {
  const day = c.at.slice(0, 10);
  const size = c.ratio === null ? 'n/a' : formatDelta((c.ratio - 1) * 100);
  const interval = formatInterval(c.ratioLow, c.ratioHigh, formatRatio);
  return `${day} ${size} ${interval} p=${formatPValue(c.p)}${c.suspect ? ' suspect' : ''}`;
}

function seriesRow(s: HistorySeries): string[] {
  const last = s.points.at(-1);
  return [
    s.machine, s.metric, s.label, String(s.points.length), formatNumber(last?.median), s.detectable === null ? 'n/a' : formatPercent(s.detectable), s.changes.map(changeText).join('; ') || 'none',
  ];
}

function pointsTable(s: HistorySeries): TextTable {
  const changedAt = new Map(s.changes.map((c) => [c.index, c]));
  return {
    heading: `${s.machine} ${s.metric} ${s.label}`,
    columns: [left('at'), left('matrix'), right('n'), right('median'), right('95% CI'), right('flagged'), left('kernel'), left('annotations'), left('')],
    rows: s.points.map((p, i) => {
      const change = changedAt.get(i);
      const marks = [...(change ? [`change ${change.ratio === null ? '' : formatDelta((change.ratio - 1) * 100)}${change.suspect ? ' (suspect)' : ''}`] : []), ...p.factChanges, ...p.annotationChanges];
      return [p.at.slice(0, 19).replace('T', ' '), p.matrixId, String(p.n), formatNumber(p.median), formatInterval(p.ciLow, p.ciHigh), String(p.flagged), p.kernel ?? '?', annotationsText(p.annotations), marks.join('; ')];
    }),
  };
}

/** `commit=4f2a9c1 build=42`, or empty. */
const annotationsText = (a: Readonly<Record<string, string>>): string =>
  Object.entries(a)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');

export function historyDoc(name: string, page: HistoryPage, points: boolean, maxP: number = CHANGE_POINT_DEFAULTS.maxP): Doc {
  const suspect = page.series.flatMap((s) => s.changes.filter((c) => c.suspect).map((c) => `${s.machine} ${s.metric} ${s.label}: the change at ${c.matrixId} is suspect: ${c.why.join('; ')}`));
  return {
    title: `history: ${name}`,
    preamble: [
      `${String(page.series.length)} series (one metric of one cell on one machine, across the matrices named ${name}, in the order they ran)`,
      `changes: E-divisive means with a t-test (p < ${String(maxP)}), each with the ratio after/before and its Hodges-Lehmann interval`,
      'detectable: the smallest lasting step since the last change that as many new matrices again would show with 80% power; "none" reads as no lasting change larger than that',
    ],
    tables: [
      { columns: [left('machine'), left('metric'), left('cell'), right('points'), right('latest'), right('detectable'), left('changes')], rows: page.series.map(seriesRow), blockColumns: 2 },
      ...(points ? page.series.map(pointsTable) : []),
    ],
    notes: [
      ...(page.renamed ? [`machine ${page.renamed.from} was renamed (first on ${page.renamed.at.slice(0, 10)}): these are the series of ${page.renamed.to}, which hold its runs`] : []),
      ...suspect,
      ...(page.next === null ? [] : [`more series follow: --after '${page.next}'`]),
    ],
  };
}

export function historyCsv(page: HistoryPage): CsvTable {
  return {
    columns: [
      'machine', 'metric', 'workload', 'cell', 'params', 'index', 'matrix', 'at', 'n', 'median', 'ci_low', 'ci_high', 'flagged', 'kernel', 'fact_changes',
      'annotations', 'annotation_changes', 'change_ratio', 'change_p', 'change_suspect', 'detectable',
    ],
    rows: page.series.flatMap((s) =>
      s.points.map((p, i) => {
        const c = s.changes.find((x) => x.index === i);
        return [s.machine, s.metric, s.workload, s.label, JSON.stringify(s.params), i, p.matrixId, p.at, p.n, p.median, p.ciLow, p.ciHigh, p.flagged, p.kernel, p.factChanges.join('; '), JSON.stringify(p.annotations), p.annotationChanges.join('; '), c?.ratio, c?.p, c?.suspect, s.detectable];
      }),
    ),
  };
}

export function exportableHistory(name: string, page: HistoryPage, points = false): Exportable {
  return { doc: () => historyDoc(name, page, points), csv: () => historyCsv(page), json: () => page };
}
