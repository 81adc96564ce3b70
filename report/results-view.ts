/**
 * A results report as the exporters take it. Table and Markdown show the headline metrics of
 * each cell (median, spread, the median's 95% CI), the knees and the notes; CSV has every
 * metric with every statistic and the cell's notes; JSON is the report itself.
 */
import { formatParam } from '../contract/params.js';
import { WORKLOADS, type WorkloadName } from '../contract/workloads/index.js';
import { smallestPossiblePValue } from '../stats/mann-whitney.js';
import { NOISE_DEFAULTS } from '../stats/noise.js';
import type { Column, CsvTable, CsvValue, Doc, Exportable, TextTable } from './export/index.js';
import { formatCv, formatInterval, formatNumber, formatSize } from './format.js';
import type { CellReport, KneeReport, Report } from './model.js';

const left = (title: string): Column => ({ title, align: 'left' });
const right = (title: string): Column => ({ title, align: 'right' });

function headlineOf(report: Report, workload: WorkloadName): readonly string[] {
  return report.metrics.find((m) => m.workload === workload)?.metrics.filter((m) => m.headline).map((m) => m.name) ?? WORKLOADS[workload].headline;
}

function cellsTable(report: Report): TextTable {
  const severalMachines = report.machines.length > 1;
  const columns = [left('cell'), ...(severalMachines ? [left('machine')] : []), left('metric'), right('n'), right('median'), right('min'), right('max'), right('cv'), right('ci95')];
  const rows: string[][] = [];
  for (const c of report.cells) {
    const head = [c.label, ...(severalMachines ? [c.machine] : [])];
    if (c.ok === 0) {
      rows.push([...head, c.problem ?? 'no result', '0', '', '', '', '', '']);
      continue;
    }
    for (const metric of headlineOf(report, c.workload)) {
      const s = c.metrics[metric];
      rows.push(
        s
          ? [...head, metric, String(s.n), formatNumber(s.median), formatNumber(s.min), formatNumber(s.max), formatCv(s.cv), formatInterval(s.ciLow, s.ciHigh)]
          : [...head, metric, '0', 'n/a', '', '', '', ''],
      );
    }
  }
  return { columns, rows, blockColumns: severalMachines ? 2 : 1 };
}

function formatX(k: KneeReport, x: number): string {
  const spec = WORKLOADS[k.workload].params[k.param];
  return spec ? formatParam(spec, x) : formatNumber(x);
}

function kneesTable(report: Report): TextTable | null {
  if (report.knees.length === 0) return null;
  const severalMachines = report.machines.length > 1;
  const rows = report.knees.map((k) => [
    ...(severalMachines ? [k.machine] : []),
    k.label || '(all)',
    k.knee ? formatX(k, k.knee.x) : 'n/a',
    k.knee ? formatX(k, k.knee.bestX) : 'n/a',
    formatNumber(k.knee?.best),
    k.l3Bytes === null ? 'n/a' : formatSize(k.l3Bytes),
    formatNumber(k.kneeOverL3),
  ]);
  const first = report.knees[0];
  return {
    heading: `knee: the smallest ${first?.param ?? ''} whose median ${first?.metric ?? ''} is within 5% of the best, next to the L3 size`,
    columns: [...(severalMachines ? [left('machine')] : []), left('sweep'), right('knee'), right('best at'), right('best'), right('L3'), right('knee/L3')],
    rows,
  };
}

/** Said once above the table rather than as a note on every cell of a short matrix. */
function preamble(report: Report): string[] {
  const ok = report.cells.filter((c) => c.ok > 0);
  const fewest = Math.min(...ok.map((c) => c.ok));
  const lines = [`${report.cells.length} cells on ${report.machines.map((m) => m.machine).join(', ') || 'no machine'}; each metric: median, min, max, CV and the median's 95% CI (order statistics, from 6 runs).`];
  if (ok.length > 0 && fewest < NOISE_DEFAULTS.minRuns) {
    lines.push(
      `${ok.every((c) => c.ok === fewest) ? 'every cell has ' : 'some cells have '}only ${fewest} run${fewest === 1 ? '' : 's'}: too few to call a difference significant (${fewest} vs ${fewest} runs cannot reach p below ${smallestPossiblePValue(fewest, fewest).toPrecision(2)}); use at least ${NOISE_DEFAULTS.minRuns} repetitions to compare.`,
    );
  }
  return lines;
}

export function reportDoc(report: Report): Doc {
  const knees = kneesTable(report);
  return { title: report.title, preamble: preamble(report), tables: [cellsTable(report), ...(knees ? [knees] : [])], notes: report.notes.map((g) => g.text) };
}

const STAT_FIELDS = ['n', 'median', 'mean', 'stddev', 'cv', 'min', 'max', 'ciLow', 'ciHigh', 'ciLevel', 'outliers', 'noisy'] as const;

export function reportCsv(report: Report): CsvTable {
  const workloads = report.metrics.map((m) => m.workload);
  const params = [...new Set(workloads.flatMap((w) => Object.keys(WORKLOADS[w].params)))];
  const columns = [
    'matrix', 'cellId', 'machine', 'workload', 'label', ...params, 'runs', 'ok', 'failed', 'skipped', 'problem',
    'metric', 'unit', 'direction', ...STAT_FIELDS, 'noise', 'cellNoisy', 'notes',
  ];
  const rows: CsvValue[][] = [];
  const cellPart = (c: CellReport): CsvValue[] => [
    c.matrix, c.cellId, c.machine, c.workload, c.label, ...params.map((p) => c.params[p]), c.runs, c.ok, c.failed, c.skipped, c.problem,
  ];
  for (const c of report.cells) {
    const notes = c.notes.join(' | ');
    const infos = report.metrics.find((m) => m.workload === c.workload)?.metrics ?? [];
    const present = infos.filter((i) => c.metrics[i.name] !== undefined);
    if (present.length === 0) rows.push([...cellPart(c), '', '', '', ...STAT_FIELDS.map(() => null), '', c.noise.noisy, notes]);
    for (const info of present) {
      const s = c.metrics[info.name];
      if (!s) continue;
      rows.push([...cellPart(c), info.name, info.unit, info.direction, ...STAT_FIELDS.map((f) => s[f]), s.noise.join('; '), c.noise.noisy, notes]);
    }
  }
  return { columns, rows };
}

/** The JSON form leaves out comparison samples, which only a compare asks for. */
function reportJson(report: Report): Report {
  if (!report.cells.some((c) => c.samples)) return report;
  return {
    ...report,
    cells: report.cells.map((c) => {
      const { samples, ...rest } = c;
      return samples ? rest : c;
    }),
  };
}

export function exportableReport(report: Report): Exportable {
  return { doc: () => reportDoc(report), csv: () => reportCsv(report), json: () => reportJson(report) };
}
