/**
 * `fsbench history NAME [FILES...]`: the series of the matrices named NAME, with their change
 * points. Given `.jsonl` files (from `fsbench run --out`, one per run of the matrix), it reads
 * them into a private in-memory results database, exactly as a coordinator stores uploads, and
 * asks the same history; given none, it asks the coordinator (`GET /v1/history`). Either way the
 * page is printed in a text format or written as one self-contained HTML page (`--html`).
 */
import { writeFile } from 'node:fs/promises';
import { Command, Option } from 'commander';
import { FsbenchError, messageOf } from '../contract/errors.js';
import { HistoryPageSchema, type HistoryPage } from '../contract/history.js';
import { History, HISTORY_PAGE, paramFilter, exportableHistory, historyDoc, type HistoryQuery } from '../coordinator/history/index.js';
import { storeResultSink, Store } from '../coordinator/store/index.js';
import { FORMAT_NAMES, render, type FormatName } from '../report/export/index.js';
import { historyCharts, MAX_HISTORY_CHARTS } from '../report/history-charts.js';
import { htmlAssets } from '../report/html-assets.js';
import { renderHtmlPage } from '../report/html.js';
import { readRunsFile } from '../report/runs-file.js';
import { CLIENT_SETTINGS, clientFromSettings, withSettings } from './client.js';

interface HistoryFlags {
  metric?: string;
  machine?: string;
  param?: string[];
  points?: boolean;
  limit: string;
  after?: string;
  format: FormatName;
  html?: string;
}

/** The page from result files, through the same store and history a coordinator uses. */
async function pageOfFiles(query: HistoryQuery, files: readonly string[]): Promise<HistoryPage> {
  const store = Store.open(':memory:');
  try {
    const sink = storeResultSink(store);
    for (const file of files) sink.importRuns(await readRunsFile(file));
    return new History(store).series(query);
  } finally {
    store.close();
  }
}

async function pageOfCoordinator(query: HistoryQuery, flags: HistoryFlags & Record<string, unknown>): Promise<HistoryPage> {
  const q = new URLSearchParams({ name: query.name, limit: String(query.limit ?? HISTORY_PAGE.default), format: 'json' });
  if (query.metric !== undefined) q.set('metric', query.metric);
  if (query.machine !== undefined) q.set('machine', query.machine);
  if (query.after !== undefined) q.set('after', query.after);
  if (flags.param !== undefined && flags.param.length > 0) q.set('param', flags.param.join(','));
  const parsed = HistoryPageSchema.safeParse(await clientFromSettings(flags).json('GET', `/v1/history?${q.toString()}`));
  if (!parsed.success) throw new FsbenchError('INTERNAL', `the coordinator's history is not what this fsbench understands: ${parsed.error.issues[0]?.message ?? ''}`);
  return parsed.data;
}

async function historyCommand(name: string, files: string[], flags: HistoryFlags & Record<string, unknown>): Promise<void> {
  const limit = Number(flags.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > HISTORY_PAGE.max) throw new FsbenchError('CONFIG_INVALID', `--limit ${flags.limit} is not a whole number from 1 to ${String(HISTORY_PAGE.max)}`);
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
  const page = files.length > 0 ? await pageOfFiles(query, files) : await pageOfCoordinator(query, flags);
  if (page.series.length === 0) {
    const where = files.length > 0 ? ` in ${String(files.length)} file${files.length === 1 ? '' : 's'}` : ' on the coordinator';
    throw new FsbenchError('NOT_FOUND', `no finished matrix named ${name}${where}${flags.metric === undefined ? '' : ` with the metric ${flags.metric}`}`);
  }
  if (flags.html === undefined) {
    process.stdout.write(render(flags.format, exportableHistory(name, page, flags.points === true)));
    return;
  }
  const shown = page.series.length > MAX_HISTORY_CHARTS ? `The charts draw the first ${String(MAX_HISTORY_CHARTS)} of ${String(page.series.length)} series; the tables list them all.` : null;
  const html = renderHtmlPage(
    { title: `history: ${name}`, heading: 'fsbench history', doc: historyDoc(name, page, true), charts: { charts: historyCharts(page), note: null }, capped: shown },
    htmlAssets(),
    { source: files.length > 0 ? `${String(files.length)} result file${files.length === 1 ? '' : 's'}` : 'the coordinator' },
  );
  if (flags.html === '-') {
    process.stdout.write(html);
    return;
  }
  try {
    await writeFile(flags.html, html);
  } catch (err) {
    throw new FsbenchError('CONFIG_INVALID', `cannot write --html ${flags.html}: ${messageOf(err)}`);
  }
  process.stderr.write(`fsbench: ${flags.html}: ${String(page.series.length)} series, ${String(Math.ceil(Buffer.byteLength(html) / 1024))} KiB\n`);
}

export function registerHistoryCommands(program: Command): void {
  withSettings(
    program
      .command('history')
      .description('the results of the matrices named NAME over time, per machine, cell and metric, with where they changed: from result files, or else the coordinator')
      .argument('<name>', 'the matrix name')
      .argument('[files...]', 'result files (.jsonl from `fsbench run --out`), one per run of the matrix; none: ask the coordinator')
      .option('-m, --metric <name>', 'one metric (default: every metric)')
      .option('--machine <name>', 'one machine')
      .option('-p, --param <name=value...>', 'only cells with these parameter values (repeatable): bufferBytes=64KiB')
      .option('--points', 'list every point of every series, with kernel, fact and annotation changes')
      .option('--limit <n>', 'series per page', String(HISTORY_PAGE.default))
      .option('--after <key>', 'the page after this series key (printed at the end of a page)')
      .option('--html <file.html>', "write a self-contained HTML page with the charts and every point ('-': standard output)")
      .addOption(new Option('-f, --format <format>', 'output format, without --html').choices(FORMAT_NAMES).default('table')),
    CLIENT_SETTINGS,
  ).action(historyCommand);
}
