/**
 * `fsbench gate BASELINE CANDIDATE`: the regression gate for CI. Reads two sides as compare
 * does, judges every cell-metric (gate/gate.ts) and writes the verdict in the format the CI
 * reads; a regression exits with the catalog's REGRESSION code (6), after the output is written.
 */
import { writeFile } from 'node:fs/promises';
import { Command, Option } from 'commander';
import { FsbenchError } from '../contract/errors.js';
import { gateActionBenchmark, gateBencher, gateJunit } from '../gate/export.js';
import { gate, GATE_DEFAULTS, type GateReport } from '../gate/gate.js';
import { exportableGate } from '../gate/view.js';
import { FORMAT_NAMES, render, type FormatName } from '../report/export/index.js';
import { readComparison, withSideOptions, type CompareFlags, type Excluded } from './compare.js';

const GATE_FORMATS = [...FORMAT_NAMES, 'junit', 'bencher', 'benchmark-action-bigger', 'benchmark-action-smaller'] as const;
type GateFormat = (typeof GATE_FORMATS)[number];

type GateFlags = CompareFlags & {
  format: GateFormat;
  maxRegression: string;
  limit?: string[];
  excludeFlagged?: boolean;
  out?: string;
};

/** `5%`, `0.05` or `5 %`: a fraction; CONFIG_INVALID names the flag otherwise. */
function fraction(text: string, flag: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(%?)\s*$/.exec(text);
  const value = m ? Number(m[1]) / (m[2] === '%' ? 100 : 1) : Number.NaN;
  if (!(value > 0 && value < 10)) throw new FsbenchError('CONFIG_INVALID', `${flag} ${text} is not a positive share such as 5% or 0.05`);
  return value;
}

function perMetric(limits: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const l of limits.flatMap((x) => x.split(','))) {
    const [metric, value] = l.split('=', 2);
    if (metric === undefined || metric.trim() === '' || value === undefined) throw new FsbenchError('CONFIG_INVALID', `--limit ${l} is not METRIC=SHARE, such as eventsPerSec=10%`);
    out[metric.trim()] = fraction(value, `--limit ${metric}=`);
  }
  return out;
}

function rendered(format: GateFormat, g: GateReport): string {
  switch (format) {
    case 'junit':
      return gateJunit(g);
    case 'bencher':
      return `${JSON.stringify(gateBencher(g), null, 2)}\n`;
    case 'benchmark-action-bigger':
      return `${JSON.stringify(gateActionBenchmark(g, 'bigger'), null, 2)}\n`;
    case 'benchmark-action-smaller':
      return `${JSON.stringify(gateActionBenchmark(g, 'smaller'), null, 2)}\n`;
    default:
      return render(format satisfies FormatName, exportableGate(g));
  }
}

async function gateCommand(baseline: string, candidate: string, flags: GateFlags): Promise<void> {
  const maxRegression = fraction(flags.maxRegression, '--max-regression');
  const limits = perMetric(flags.limit ?? []);
  const excluded: Excluded | undefined = flags.excludeFlagged === true ? { baseline: 0, candidate: 0 } : undefined;
  const report = await readComparison(baseline, candidate, flags, excluded);
  const g = gate(report, { maxRegression, perMetric: limits });
  let text = rendered(flags.format, g);
  if (excluded && (flags.format === 'table' || flags.format === 'md')) {
    text += `\nruns flagged for interference left out: ${String(excluded.baseline)} of the baseline, ${String(excluded.candidate)} of the candidate (--exclude-flagged)\n`;
  }
  if (flags.out === undefined) process.stdout.write(text);
  else await writeFile(flags.out, text);
  if (g.verdict === 'fail') {
    const where = g.rows.filter((r) => r.status === 'regression').map((r) => `${r.row.metric} ${r.row.label}`);
    throw new FsbenchError('REGRESSION', `${String(where.length)} regression${where.length === 1 ? '' : 's'}: ${where.slice(0, 5).join('; ')}${where.length > 5 ? ' ...' : ''}`);
  }
}

export function registerGateCommands(program: Command): void {
  withSideOptions(program.command('gate').description('fail (exit 6) when the candidate regressed against the baseline: beyond --max-regression and significant'))
    .option('--max-regression <share>', 'largest move in a metric\'s bad direction that passes', `${String(GATE_DEFAULTS.maxRegression * 100)}%`)
    .option('--limit <metric=share...>', 'a limit for one metric, overriding --max-regression (repeatable): eventsPerSec=10%')
    .option('--exclude-flagged', 'leave out runs flagged for interference (steal, CPU use by others) on both sides, and say how many')
    .addOption(new Option('-f, --format <format>', 'output format: the table, Markdown for a CI summary, JUnit XML, Bencher or github-action-benchmark JSON').choices(GATE_FORMATS).default('table'))
    .option('-o, --out <file>', 'write the output to this file instead of stdout (the exit code still says pass or fail)')
    .action(gateCommand);
}
