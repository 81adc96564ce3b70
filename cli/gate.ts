/**
 * `fsbench gate BASELINE CANDIDATE`: the regression gate for CI. Reads two sides as compare
 * does, judges every cell-metric (gate/gate.ts) and writes the verdict in the format the CI
 * reads; a regression exits with the catalog's REGRESSION code (6), after the output is written.
 */
import { writeFile } from 'node:fs/promises';
import { Command, Option } from 'commander';
import { FsbenchError } from '../contract/errors.js';
import { GATE_FORMATS, renderGate, type GateFormat } from '../gate/export.js';
import { gate, GATE_DEFAULTS, parseLimits, parseShare } from '../gate/gate.js';
import { readComparison, withSideOptions, type CompareFlags, type Excluded } from './compare.js';

type GateFlags = CompareFlags & {
  format: GateFormat;
  maxRegression: string;
  limit?: string[];
  excludeFlagged?: boolean;
  out?: string;
};

async function gateCommand(baseline: string, candidate: string, flags: GateFlags): Promise<void> {
  const maxRegression = parseShare(flags.maxRegression);
  if (maxRegression === null) throw new FsbenchError('CONFIG_INVALID', `--max-regression ${flags.maxRegression} is not a positive share such as 5% or 0.05`);
  const parsed = parseLimits(flags.limit ?? []);
  if (!parsed.ok) throw new FsbenchError('CONFIG_INVALID', `--limit ${parsed.bad} is not METRIC=SHARE, such as eventsPerSec=10%`);
  const limits = parsed.limits;
  const excluded: Excluded | undefined = flags.excludeFlagged === true ? { baseline: 0, candidate: 0 } : undefined;
  const report = await readComparison(baseline, candidate, flags, excluded);
  const g = gate(report, { maxRegression, perMetric: limits, ...(excluded ? { excluded } : {}) });
  const text = renderGate(flags.format, g);
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
