/**
 * `fsbench report FILE`: the report of a results file (`fsbench run --out`) without running
 * anything: the tables `fsbench run` prints, or with `--html` one self-contained HTML page
 * (charts, tables, notes, knees, fingerprints) that opens offline.
 */
import { writeFile } from 'node:fs/promises';
import { Command, Option } from 'commander';
import { FsbenchError, messageOf } from '../contract/errors.js';
import type { RunResult } from '../contract/result.js';
import { buildReportAsync } from '../report/build.js';
import { FORMAT_NAMES, render, type FormatName } from '../report/export/index.js';
import { renderHtmlReport } from '../report/html.js';
import { htmlAssets } from '../report/html-assets.js';
import { exportableReport } from '../report/results-view.js';
import { runsOfFile } from '../report/runs-file.js';

type ReportFlags = {
  html?: string;
  format: FormatName;
  title?: string;
};

async function reportCommand(file: string, flags: ReportFlags): Promise<void> {
  // The title names the matrices, known only once the file is read.
  const matrices = new Set<string>();
  async function* runs(): AsyncGenerator<RunResult> {
    for await (const r of runsOfFile(file)) {
      matrices.add(r.matrix);
      yield r;
    }
  }
  const built = await buildReportAsync(runs(), { title: '' });
  const report = { ...built, title: flags.title ?? `matrix ${[...matrices].join(', ')}` };
  if (flags.html === undefined) {
    process.stdout.write(render(flags.format, exportableReport(report)));
    return;
  }
  const html = renderHtmlReport(report, htmlAssets(), { source: file === '-' ? undefined : file });
  if (flags.html === '-') {
    process.stdout.write(html);
    return;
  }
  try {
    await writeFile(flags.html, html);
  } catch (err) {
    throw new FsbenchError('CONFIG_INVALID', `cannot write --html ${flags.html}: ${messageOf(err)}`);
  }
  process.stderr.write(`fsbench: ${flags.html}: ${report.cells.length} cells, ${Math.ceil(Buffer.byteLength(html) / 1024)} KiB\n`);
}

export function registerReportCommands(program: Command): void {
  program
    .command('report')
    .description('the report of a results file from `fsbench run --out`: the tables `run` prints, or one self-contained HTML page with charts (--html)')
    .argument('<runs.jsonl>', 'a .jsonl file of runs, one RunResult per line')
    .option('--html <file.html>', "write a self-contained HTML report that opens offline ('-': standard output)")
    .addOption(new Option('-f, --format <format>', 'the text format on stdout, without --html').choices(FORMAT_NAMES).default('table'))
    .option('--title <title>', 'the report\'s title (default: the matrices the file holds)')
    .action(reportCommand);
}
