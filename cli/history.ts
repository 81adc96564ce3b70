/**
 * `fsbench history NAME [FILES...]`: the series of the matrices named NAME, with their change
 * points. Given `.jsonl` files (from `fsbench run --out`, one per run of the matrix), it reads
 * them into a private in-memory results database, exactly as a coordinator stores uploads, and
 * asks the same history; given none, it asks the coordinator (`GET /v1/history`).
 */
import { Command, Option } from 'commander';
import { FsbenchError } from '../contract/errors.js';
import { History, HISTORY_PAGE, paramFilter, type HistoryQuery } from '../coordinator/history.js';
import { exportableHistory } from '../coordinator/history-view.js';
import { storeResultSink } from '../coordinator/store-adapter.js';
import { Store } from '../coordinator/store.js';
import { FORMAT_NAMES, render, type FormatName } from '../report/export/index.js';
import { readRunsFile } from '../report/runs-file.js';

interface HistoryFlags {
  metric?: string;
  machine?: string;
  param?: string[];
  points?: boolean;
  limit: string;
  after?: string;
  format: FormatName;
}

async function historyCommand(name: string, files: string[], flags: HistoryFlags): Promise<void> {
  const limit = Number(flags.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > HISTORY_PAGE.max) throw new FsbenchError('CONFIG_INVALID', `--limit ${flags.limit} is not a whole number from 1 to ${String(HISTORY_PAGE.max)}`);
  if (files.length === 0) {
    throw new FsbenchError('CONFIG_INVALID', 'name the result files (.jsonl from `fsbench run --out`) whose history to read');
  }
  const params = paramFilter(flags.param ?? []);
  if (!params.ok) throw new FsbenchError('CONFIG_INVALID', `--param ${params.bad} is not NAME=VALUE, such as bufferBytes=64KiB`);
  const query: HistoryQuery = {
    name,
    limit,
    ...(flags.metric === undefined ? {} : { metric: flags.metric }),
    ...(flags.machine === undefined ? {} : { machine: flags.machine }),
    ...(flags.after === undefined ? {} : { after: flags.after }),
    params: params.params,
  };
  const store = Store.open(':memory:');
  try {
    const sink = storeResultSink(store);
    for (const file of files) sink.importRuns(await readRunsFile(file));
    const page = new History(store).series(query);
    if (page.series.length === 0) throw new FsbenchError('NOT_FOUND', `no finished matrix named ${name} in ${String(files.length)} file${files.length === 1 ? '' : 's'}${flags.metric === undefined ? '' : ` with the metric ${flags.metric}`}`);
    process.stdout.write(render(flags.format, exportableHistory(name, page, flags.points === true)));
  } finally {
    store.close();
  }
}

export function registerHistoryCommands(program: Command): void {
  program
    .command('history')
    .description('the results of the matrices named NAME over time, per machine, cell and metric, with where they changed')
    .argument('<name>', 'the matrix name')
    .argument('[files...]', 'result files (.jsonl from `fsbench run --out`), one per run of the matrix')
    .option('-m, --metric <name>', 'one metric (default: every metric)')
    .option('--machine <name>', 'one machine')
    .option('-p, --param <name=value...>', 'only cells with these parameter values (repeatable): bufferBytes=64KiB')
    .option('--points', 'list every point of every series, with kernel and fact changes')
    .option('--limit <n>', 'series per page', String(HISTORY_PAGE.default))
    .option('--after <key>', 'the page after this series key (printed at the end of a page)')
    .addOption(new Option('-f, --format <format>', 'output format').choices(FORMAT_NAMES).default('table'))
    .action(historyCommand);
}
