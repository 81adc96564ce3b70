/**
 * A results report as the exporters take it: one function per table builds it once as a typed
 * document (cellsTable, kneesTable, notesOf, machinesTable), and every output renders those.
 * Table and Markdown show the headline metrics of each cell (median, spread, the median's 95%
 * CI), the knees and the notes (reportDoc); the HTML page and the dashboard show the same tables
 * and notes with each cell's own notes and every machine's fingerprint (pageDoc); CSV has every
 * metric with every statistic and the cell's notes; JSON is the report itself.
 */
import { formatParam } from '../contract/params.js';
import { WORKLOADS, type WorkloadName } from '../contract/workloads/index.js';
import { smallestPossiblePValue } from '../stats/mann-whitney.js';
import { NOISE_DEFAULTS } from '../stats/noise.js';
import type { Column, CsvTable, CsvValue, Doc, DocCell, DocNote, DocRow, Exportable, TextTable } from './export/index.js';
import { formatCv, formatInterval, formatNumber, formatSize } from './format.js';
import type { CellReport, KneeReport, MachineReport, Note, Report } from './model.js';

const left = (title: string): Column => ({ title, align: 'left' });
const right = (title: string): Column => ({ title, align: 'right' });

function headlineOf(report: Report, workload: WorkloadName): readonly string[] {
  return report.metrics.find((m) => m.workload === workload)?.metrics.filter((m) => m.headline).map((m) => m.name) ?? WORKLOADS[workload].headline;
}

/** What a cell's runs support: a conclusion, none (too noisy), or nothing to say (no ok run). */
function verdictOf(c: CellReport): string {
  if (c.ok === 0) return c.problem ?? 'no result';
  return c.noise.noisy ? 'too noisy' : 'ok';
}

const docNote = (n: Note): DocNote => ({ kind: n.kind, severity: n.severity, text: n.text });

/**
 * The table of cells: each cell's headline metrics, a row each, with n, median, min, max, CV and
 * the median's 95% CI. A cell's rows form one group carrying its verdict and its own notes.
 * `limit` cuts a page's table (the CSV has every cell).
 */
export function cellsTable(report: Report, limit = Infinity): TextTable {
  const severalMachines = report.machines.length > 1;
  const columns = [left('cell'), ...(severalMachines ? [left('machine')] : []), left('metric'), right('n'), right('median'), right('min'), right('max'), right('cv'), right('ci95')];
  const rows: DocRow[] = [];
  const cells = report.cells.slice(0, limit);
  for (const c of cells) {
    const verdict = verdictOf(c);
    const opens = { data: { cell: c.cellId, machine: c.machine, verdict }, notes: c.findings.map(docNote) };
    const label: DocCell = { text: c.label, class: 'label', title: c.noise.reasons.length > 0 ? `${verdict}: ${c.noise.reasons.join('; ')}` : verdict };
    const head = [label, ...(severalMachines ? [{ text: c.machine, class: 'machine' }] : [])];
    if (c.ok === 0) {
      rows.push({ cells: [...head, { text: verdict, class: 'metric' }, '0', '', '', '', '', ''], class: 'no-result', opens });
      continue;
    }
    headlineOf(report, c.workload).forEach((metric, i) => {
      const s = c.metrics[metric];
      const stats: DocCell[] = s
        ? [
            { text: String(s.n), value: s.n },
            { text: formatNumber(s.median), class: 'median', value: s.median },
            { text: formatNumber(s.min), value: s.min },
            { text: formatNumber(s.max), value: s.max },
            { text: formatCv(s.cv), value: s.cv },
            { text: formatInterval(s.ciLow, s.ciHigh) },
          ]
        : [{ text: '0', value: 0 }, { text: 'n/a', class: 'median' }, { text: '' }, { text: '' }, { text: '' }, { text: '' }];
      rows.push({
        cells: [...head, { text: metric, class: 'metric' }, ...stats],
        data: { metric },
        class: c.noise.noisy ? 'noisy' : undefined,
        ...(i === 0 ? { opens } : {}),
      });
    });
  }
  const cut = report.cells.length > cells.length ? `Only the first ${cells.length} of ${report.cells.length} cells are listed; the CSV export has every cell.` : undefined;
  return {
    name: 'cells',
    hint: "Each cell's headline metrics: median over its ok runs, min, max, coefficient of variation and the median's 95% confidence interval; a cell's own notes follow its rows.",
    ...(cut === undefined ? {} : { capped: cut }),
    columns,
    rows,
    blockColumns: severalMachines ? 2 : 1,
  };
}

function formatX(k: KneeReport, x: number): string {
  const spec = WORKLOADS[k.workload].params[k.param];
  return spec ? formatParam(spec, x) : formatNumber(x);
}

const sizeCell = (bytes: number | null): DocCell => ({ text: bytes === null ? 'n/a' : formatSize(bytes), value: bytes });

/**
 * The knees: per sweep, the smallest value of the swept parameter whose median is within 5% of
 * the best, next to the machine's L2 and L3 sizes. Which parameter and metric is said in the
 * heading, or in columns when the knees are of several.
 */
export function kneesTable(report: Report): TextTable | null {
  const first = report.knees[0];
  if (first === undefined) return null;
  const severalMachines = report.machines.length > 1;
  const severalSweeps = new Set(report.knees.map((k) => `${k.param}\u0000${k.metric}`)).size > 1;
  const rows: DocRow[] = report.knees.map((k) => ({
    cells: [
      ...(severalMachines ? [k.machine] : []),
      { text: k.label || '(all)', class: 'label' },
      ...(severalSweeps ? [k.param, k.metric] : []),
      { text: k.knee ? formatX(k, k.knee.x) : 'n/a', class: 'knee', value: k.knee?.x ?? null },
      { text: k.knee ? formatX(k, k.knee.bestX) : 'n/a', value: k.knee?.bestX ?? null },
      { text: formatNumber(k.knee?.best), value: k.knee?.best ?? null },
      sizeCell(k.l2Bytes),
      { ...sizeCell(k.l3Bytes), class: 'l3' },
      { text: formatNumber(k.kneeOverL3), value: k.kneeOverL3 },
    ],
    data: { machine: k.machine, param: k.param },
  }));
  return {
    name: 'knees',
    heading: severalSweeps
      ? 'knee: the smallest value of each swept parameter whose median is within 5% of the best, next to the L2 and L3 sizes'
      : `knee: the smallest ${first.param} whose median ${first.metric} is within 5% of the best, next to the L2 and L3 sizes`,
    hint: 'Seed 000 claims the best read buffer is about the L3 size: knee/L3 near 1.',
    columns: [
      ...(severalMachines ? [left('machine')] : []),
      left('sweep'),
      ...(severalSweeps ? [left('along'), left('metric')] : []),
      right('knee'), right('best at'), right('best'), right('L2'), right('L3'), right('knee/L3'),
    ],
    rows,
  };
}

/** The report's notes, one per kind over the cells that have it. */
export function notesOf(report: Report): DocNote[] {
  return report.notes.map((g) => ({ kind: g.kind, severity: g.severity, text: g.text, cells: g.cells.length }));
}

/** A fingerprint value in one line: sizes in their units, nested objects as `key=value`. */
function inline(key: string, v: unknown): string {
  if (v === null || v === undefined) return 'n/a';
  if (typeof v === 'number') return /Bytes$/.test(key) && Number.isInteger(v) && v >= 0 ? formatSize(v) : String(v);
  if (typeof v === 'string') return v === '' ? '""' : v;
  if (typeof v === 'boolean' || typeof v === 'bigint') return String(v);
  if (Array.isArray(v)) return v.length === 0 ? 'none' : v.map((x) => inline(key, x)).join(', ');
  if (typeof v === 'object') return Object.entries(v).map(([k, x]) => `${k}=${typeof x === 'object' && x !== null ? `{${inline(k, x)}}` : inline(k, x)}`).join(' ');
  // Parsed JSON holds nothing else; a function or symbol here is not a fact to show.
  return typeof v;
}

/**
 * Every field of a fingerprint as dotted key -> text, whatever fields it has: nested objects
 * become rows of their own, lists of objects one row per element.
 */
function flatten(v: unknown, key: string, out: Map<string, string>): void {
  if (Array.isArray(v) && v.some((x) => typeof x === 'object' && x !== null)) {
    v.forEach((x, i) => {
      out.set(`${key}[${i}]`, inline(key, x));
    });
    if (v.length === 0) out.set(key, 'none');
    return;
  }
  if (typeof v === 'object' && v !== null && !Array.isArray(v)) {
    const entries = Object.entries(v);
    if (entries.length === 0) out.set(key, 'none');
    for (const [k, x] of entries) flatten(x, key === '' ? k : `${key}.${k}`, out);
    return;
  }
  out.set(key, inline(key.split('.').at(-1) ?? key, v));
}

/** Every field of each machine's fingerprint, a column per machine, as recorded with its runs. */
function machinesTable(machines: readonly MachineReport[]): TextTable | null {
  if (machines.length === 0) return null;
  const columns = machines.map((m) => {
    const out = new Map<string, string>();
    flatten(m.fingerprint ?? { machine: m.machine, cpu: m.caches }, '', out);
    return out;
  });
  const keys = [...new Set(columns.flatMap((c) => [...c.keys()]))];
  return {
    name: 'fingerprint',
    heading: machines.length > 1 ? `Machines (${machines.length})` : 'Machine',
    hint: "Every field of each machine's fingerprint, as recorded with its runs.",
    columns: [{ title: 'field', align: 'left', rowHeader: true }, ...machines.map((m) => left(m.machine))],
    rows: keys.map((k) => ({ cells: [k, ...columns.map((c) => c.get(k) ?? '')], data: { field: k } })),
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
  return { title: report.title, preamble: preamble(report), tables: [cellsTable(report), ...(knees ? [knees] : [])], notes: notesOf(report) };
}

/** Rows a page shows unfolded. */
const FOLD_ROWS = 60;

/**
 * The report as the HTML page and the dashboard show it: the same tables and notes as the text
 * formats, the knees before the long table of cells, and every machine's fingerprint after it.
 */
export function pageDoc(report: Report, cellLimit = Infinity): Doc {
  const knees = kneesTable(report);
  const cells = cellsTable(report, cellLimit);
  const machines = machinesTable(report.machines);
  // Past a screenful a table is folded under its heading: the charts and notes stay near the top.
  const fold = (t: TextTable) => ({ ...t, fold: t.rows.length > FOLD_ROWS });
  return {
    title: report.title,
    preamble: preamble(report),
    tables: [...(knees ? [knees] : []), fold({ ...cells, heading: `Cells (${report.cells.length})` }), ...(machines ? [fold(machines)] : [])],
    notes: notesOf(report),
  };
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
