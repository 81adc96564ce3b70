/** Commands that need no server: `run`, `params`, `settings`. */
import { closeSync, fsyncSync, openSync, writeSync } from 'node:fs';
import { Command, Option } from 'commander';
import { FsbenchError, messageOf } from '../contract/errors.js';
import { adaptiveRepetitions, annotationsWith, describeCell, expandMatrix, varyingParams, type Matrix } from '../contract/matrix.js';
import { describeAllowed, formatParam, defaultValue } from '../contract/params.js';
import { metricInfos, WORKLOAD_NAMES, WORKLOADS } from '../contract/workloads/index.js';
import { countRuns, runsProblem, type RunResult } from '../contract/result.js';
import { buildReport } from '../report/build.js';
import { formatPercent } from '../report/format.js';
import { FORMAT_NAMES, render, type FormatName } from '../report/export/index.js';
import { exportableReport } from '../report/results-view.js';
import { collectFingerprint } from '../host/fingerprint.js';
import { openJournal, runMatrixLocally, type CellOutcome } from '../runner/local.js';
import { nativeProgram } from '../host/native.js';
import { loadSettings, settingsMarkdown } from '../settings/index.js';
import { EXAMPLES_DIR, listExamples, readMatrixFile } from './matrix-file.js';
import { progressPrinter } from './progress.js';
import { loadWatcherList } from '../host/watcher-list.js';

/** Appends each run as one JSON line, fsynced at the end so an interrupted run keeps its lines. */
function jsonlWriter(file: string | undefined) {
  if (file === undefined) return { write: () => undefined, close: () => undefined };
  let fd: number;
  try {
    fd = openSync(file, 'w');
  } catch (err) {
    throw new FsbenchError('CONFIG_INVALID', `cannot write --out ${file}: ${messageOf(err)}`);
  }
  return {
    write: (run: RunResult) => {
      writeSync(fd, `${JSON.stringify(run)}\n`);
    },
    close: () => {
      fsyncSync(fd);
      closeSync(fd);
    },
  };
}

type RunFlags = {
  out?: string;
  annotate?: string[];
  format: FormatName;
  scratch?: string;
  machine?: string;
  labels?: string;
  journalDir?: string;
  allowedTargets?: string;
  maxQueuedEvents?: string;
  maxWatches?: string;
  watchers?: string;
  maxSteal?: string;
  maxOutsideCpu?: string;
  allowFailures?: boolean;
  progress: boolean;
};

async function runCommand(file: string, flags: RunFlags): Promise<void> {
  const settings = loadSettings(['scratch', 'machine', 'labels', 'journalDir', 'allowedTargets', 'maxQueuedEvents', 'maxWatches', 'watchers', 'maxSteal', 'maxOutsideCpu'], flags);
  const read = await readMatrixFile(file);
  const matrix: Matrix = { ...read, annotations: annotationsWith(read.annotations, flags.annotate ?? []) };
  const cells = expandMatrix(matrix);
  // A missing native build is reported before any run starts, not as N failed runs.
  for (const program of WORKLOADS[matrix.workload].native) nativeProgram(program);
  const log = (line: string) => process.stderr.write(`fsbench: ${line}\n`);
  // First of all: a scratch or journal directory another local user controls is refused
  // (DIRECTORY_UNSAFE) before anything reads or writes it, and this run's owner lock is held
  // until the end (closed below; should this process die, the lock goes with it).
  const journal = await openJournal(settings.scratch, log, settings.journalDir, settings.allowedTargets);
  const watchers = await loadWatcherList(settings.watchers);
  const fingerprint = await collectFingerprint({ machine: settings.machine, labels: settings.labels }, journal.scratch);
  const out = jsonlWriter(flags.out);

  const controller = new AbortController();
  const stop = (signal: NodeJS.Signals) => {
    if (controller.signal.aborted) {
      process.stderr.write(`\nfsbench: ${signal} again: still restoring limits and removing files, please wait\n`);
      return;
    }
    process.stderr.write(`\nfsbench: ${signal}: stopping after cleanup; results so far are kept\n`);
    controller.abort();
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  const progress = progressPrinter();
  let runs: RunResult[] = [];
  try {
    process.stderr.write(`fsbench: ${matrix.name}: ${cells.length} cells x ${matrix.warmup} warmup + ${describeRepetitions(matrix)} runs, ${matrix.order}, on ${fingerprint.machine}\n`);
    runs = await runMatrixLocally({
      matrix,
      cells,
      scratchDir: journal.scratch,
      journal,
      budget: { allowedTargets: settings.allowedTargets, maxQueuedEvents: settings.maxQueuedEvents, maxWatches: settings.maxWatches, watchers },
      interference: { maxSteal: settings.maxSteal, maxOutsideCpu: settings.maxOutsideCpu },
      fingerprint,
      signal: controller.signal,
      onResult: (run) => {
        out.write(run);
      },
      ...(flags.progress ? { onProgress: progress.update } : {}),
      onCellsDone: (outcomes) => {
        const line = precisionLine(matrix, outcomes);
        if (line) process.stderr.write(`fsbench: ${line}\n`);
      },
      log,
    });
  } finally {
    progress.done();
    out.close();
    await journal.close();
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }
  process.stdout.write(render(flags.format, exportableReport(buildReport(runs, { title: `matrix ${matrix.name}` }))));
  if (controller.signal.aborted) {
    process.stderr.write(`fsbench: interrupted: ${runs.length} runs kept${flags.out ? ` in ${flags.out}` : ''}\n`);
    process.exitCode = 130;
    return;
  }
  // After the summary, which shows each failure: the exit code is what a CI job reads.
  const problem = runsProblem(countRuns(runs), { allowFailures: flags.allowFailures === true });
  if (problem) throw problem;
}

function describeRepetitions(matrix: Matrix): string {
  const a = adaptiveRepetitions(matrix);
  return a ? `${a.min}-${a.max} (auto: until the median's 95% CI of ${a.metric} is within ±${formatPercent(a.target)})` : String(matrix.repetitions);
}

/** Under `repetitions: auto`, which cells reached the precision asked for; null otherwise. */
function precisionLine(matrix: Matrix, outcomes: readonly CellOutcome[]): string | null {
  const a = adaptiveRepetitions(matrix);
  if (!a) return null;
  const varying = varyingParams(outcomes.map((o) => o.cell));
  const reached = outcomes.filter((o) => o.verdict === 'reached');
  const missed = outcomes.filter((o) => o.verdict === 'max');
  const width = (o: CellOutcome) => (o.halfWidth === null ? 'no CI' : `±${formatPercent(o.halfWidth)}`);
  const named = missed.slice(0, 10).map((o) => `${describeCell(o.cell, varying)} (${width(o)} after ${o.runs})`);
  return [
    `precision: ${reached.length} of ${outcomes.length} cells reached ±${formatPercent(a.target)} on ${a.metric}`,
    ...(missed.length > 0 ? [`; ${missed.length} stopped at ${a.max} runs without: ${named.join(', ')}${missed.length > 10 ? ' ...' : ''}`] : []),
  ].join('');
}

/** The parameter tables of every workload, as Markdown: docs/reference.md embeds this output. */
export function paramsMarkdown(): string {
  return WORKLOAD_NAMES.map((w) => {
    const rows = Object.entries(WORKLOADS[w].params).map(
      ([name, spec]) => `| \`${name}\` | \`${formatParam(spec, defaultValue(spec)) || 'none'}\` | ${describeAllowed(spec)} | ${spec.doc} |`,
    );
    return [`#### \`${w}\``, '', '| parameter | default | allowed | what it does |', '|---|---|---|---|', ...rows].join('\n');
  }).join('\n\n') + '\n';
}

/** The metric tables of every workload, as Markdown: unit, direction and meaning, headline metrics first (bold). */
export function metricsMarkdown(): string {
  return WORKLOAD_NAMES.map((w) => {
    const rows = metricInfos(w).map((m) => `| ${m.headline ? `**\`${m.name}\`**` : `\`${m.name}\``} | ${m.unit} | ${m.direction} | ${m.doc} |`);
    return [`#### \`${w}\` metrics`, '', '| metric | unit | better when | what it measures |', '|---|---|---|---|', ...rows].join('\n');
  }).join('\n\n') + '\n';
}

export function registerLocalCommands(program: Command): void {
  program
    .command('run')
    .description('expand a matrix file (YAML or JSON) and run every cell on this machine')
    .argument('<matrix>', 'matrix file, or example:NAME for a shipped example (fsbench examples)')
    .option('-o, --out <file.jsonl>', 'write every measured run as one JSON line (the file is overwritten)')
    .option('--annotate <name=value...>', "add to the matrix's annotations, carried by every run (repeatable): commit=4f2a9c1")
    .addOption(new Option('-f, --format <format>', 'summary format on stdout').choices(FORMAT_NAMES).default('table'))
    .option('--scratch <dir>', 'where runs create files and mounts (FSBENCH_SCRATCH)')
    .option('--journal-dir <dir>', 'the journal of host changes (FSBENCH_JOURNAL_DIR)')
    .option('--allowed-targets <dirs>', 'directories besides the scratch directory a target may lie in (FSBENCH_ALLOWED_TARGETS)')
    .option('--max-queued-events <n>', 'largest maxQueuedEvents a cell may set (FSBENCH_MAX_QUEUED_EVENTS)')
    .option('--max-watches <n>', 'most inotify watches a run may add (FSBENCH_MAX_WATCHES)')
    .option('--watchers <file>', "this host's own watchers that semantics cells may name (FSBENCH_WATCHERS)")
    .option('--max-steal <fraction>', "share of the CPUs' time stolen during a run before it is flagged as disturbed (FSBENCH_MAX_STEAL)")
    .option('--max-outside-cpu <cpus>', 'CPUs other processes may use during a run before it is flagged as disturbed (FSBENCH_MAX_OUTSIDE_CPU)')
    .option('--machine <name>', 'display name of this machine (FSBENCH_MACHINE)')
    .option('--labels <a,b>', 'labels of this machine (FSBENCH_LABELS)')
    .option('--allow-failures', 'exit 0 even when some runs failed (exploratory sweeps); a matrix that measured nothing still fails')
    .option('--no-progress', 'do not print progress on stderr')
    .action(runCommand);

  program
    .command('examples')
    .description('list the example matrices shipped with fsbench: run one with fsbench run example:NAME')
    .option('--paths', 'print only their file paths, one a line')
    .action((opts: { paths?: boolean }) => {
      const examples = listExamples();
      if (opts.paths === true) {
        for (const e of examples) process.stdout.write(`${e.file}\n`);
        return;
      }
      const width = Math.max(...examples.map((e) => e.name.length));
      for (const e of examples) process.stdout.write(`example:${e.name.padEnd(width)}  ${e.summary}\n`);
      process.stderr.write(`fsbench: ${String(examples.length)} examples in ${EXAMPLES_DIR}\n`);
    });

  program
    .command('params')
    .description('list every workload parameter with its default and allowed values, and every metric with its unit and direction (Markdown)')
    .action(() => {
      process.stdout.write(`${paramsMarkdown()}\n${metricsMarkdown()}`);
    });

  program
    .command('settings')
    .description('list every setting (environment variable and flag) with its default (Markdown)')
    .action(() => {
      process.stdout.write(`${settingsMarkdown()}\n`);
    });
}
