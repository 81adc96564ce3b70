/**
 * The tables of docs/what-watchers-report.md, made from the committed runs of the semantics study
 * (docs/data/semantics-gentle.jsonl.gz and semantics-storm.jsonl.gz, unpacked), so the page quotes
 * the data and tests/docs-commands.test.ts can check that it still does:
 *
 *   node dist/bench/semantics-table.js semantics-gentle.jsonl semantics-storm.jsonl
 *
 * Every figure is the median over a cell's runs, as `fsbench report` gives it; a cell whose runs
 * all failed shows what stopped it.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { RunResult } from '../contract/result.js';
import { SEMANTICS_BACKENDS } from '../contract/workloads/semantics/backends.js';
import { OPERATION_KINDS, perKindMetric } from '../contract/workloads/semantics/index.js';
import { buildReport } from '../report/build.js';
import type { CellReport, Report } from '../report/model.js';
import { readRunsFile } from '../report/runs-file.js';

const TARGET_NAMES: Readonly<Record<string, string>> = { tmpfs: 'tmpfs', scratch: 'XFS' };

const percent = (v: number | null | undefined) => (v === null || v === undefined ? '–' : `${Math.round(v * 100)}%`);
const number = (v: number | null | undefined) => (v === null || v === undefined ? '–' : Math.round(v).toLocaleString('en-US'));
const ms = (v: number | null | undefined) => (v === null || v === undefined ? '–' : v < 10 ? v.toFixed(2) : Math.round(v).toLocaleString('en-US'));

function row(cells: readonly string[]): string {
  return `| ${cells.join(' | ')} |`;
}

function table(head: readonly string[], rows: readonly (readonly string[])[]): string {
  return [row(head), row(head.map((_, i) => (i === 0 ? '---' : '---:'))), ...rows.map(row)].join('\n');
}

/** The study's backends in the parameter's order, as far as the runs hold them. */
function backendsOf(report: Report): string[] {
  return SEMANTICS_BACKENDS.filter((b) => report.cells.some((c) => c.params['backend'] === b));
}

function cellOf(report: Report, backend: string, target: string): CellReport | undefined {
  return report.cells.find((c) => c.params['backend'] === backend && c.params['target'] === target);
}

const median = (c: CellReport | undefined, metric: string) => c?.metrics[metric]?.median ?? null;

/** A cell with no ok run: what stopped it, short. */
function failedText(c: CellReport | undefined): string | null {
  if (c === undefined) return 'not run';
  if (c.ok > 0) return null;
  // `CODE: message`: the code, which the page's text explains.
  return `failed (${c.problem?.split(':')[0] ?? 'no result'})`;
}

/** Recall per kind of change, one row per backend, on one target of one study. */
function recallByKind(report: Report, target: string): string {
  const rows = backendsOf(report).map((b) => {
    const c = cellOf(report, b, target);
    const failed = failedText(c);
    if (failed !== null) return [`\`${b}\``, failed, ...OPERATION_KINDS.slice(1).map(() => '')];
    return [`\`${b}\``, ...OPERATION_KINDS.map((k) => percent(median(c, perKindMetric('recall', k))))];
  });
  return table(['backend', ...OPERATION_KINDS], rows);
}

/** Everything but the kinds: recall, wrong kinds, duplicates, latency and deafness, per backend and target. */
function overall(report: Report): string {
  const targets = Object.keys(TARGET_NAMES).filter((t) => report.cells.some((c) => c.params['target'] === t));
  const rows = backendsOf(report).flatMap((b) =>
    targets.map((t) => {
      const c = cellOf(report, b, t);
      const failed = failedText(c);
      if (failed !== null) return [`\`${b}\``, TARGET_NAMES[t] ?? t, failed, '', '', '', '', '', '', ''];
      return [
        `\`${b}\``,
        TARGET_NAMES[t] ?? t,
        percent(median(c, 'recall')),
        number(median(c, 'wrongKind')),
        number(median(c, 'duplicates')),
        number(median(c, 'late')),
        ms(median(c, 'latencyP50Ms')),
        ms(median(c, 'latencyP99Ms')),
        `${number(median(c, 'deafAfter'))} of ${number(median(c, 'deafChecks'))}`,
        median(c, 'overflows') === null ? '–' : number(median(c, 'overflows')),
      ];
    }),
  );
  return table(['backend', 'on', 'recall', 'wrong kind', 'duplicates', 'late', 'p50 ms', 'p99 ms', 'deaf after', 'overflows'], rows);
}

/** The page's tables for one study's runs: its overall table, then recall by kind on each target. */
export function semanticsTables(runs: readonly RunResult[], title: string): string {
  const report = buildReport(runs, { title });
  const parts = [`#### ${title}: each backend`, '', overall(report)];
  for (const [t, name] of Object.entries(TARGET_NAMES)) {
    if (!report.cells.some((c) => c.params['target'] === t)) continue;
    parts.push('', `#### ${title}: recall by kind of change, on ${name}`, '', recallByKind(report, t));
  }
  return parts.join('\n');
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const files = process.argv.slice(2);
  if (files.length === 0) {
    process.stderr.write('usage: node dist/bench/semantics-table.js <runs.jsonl>...\n');
    process.exit(64);
  }
  for (const file of files) process.stdout.write(`${semanticsTables(await readRunsFile(file), path.basename(file, '.jsonl'))}\n\n`);
}
