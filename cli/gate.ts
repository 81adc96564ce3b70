/**
 * `fsbench gate BASELINE CANDIDATE`: the regression gate for CI. Reads two sides as compare
 * does (files or `matrix:ID`), judges every cell-metric (gate/gate.ts) and writes the verdict in
 * the format the CI reads; after the output is written, a regression exits with the catalog's
 * REGRESSION code (6), a gate that could not judge every gated cell-metric with INCONCLUSIVE's (7). A side may also be `latest:NAME` or (the baseline) `history:NAME`, which a
 * coordinator resolves from its history.
 */
import { writeFile } from 'node:fs/promises';
import { Command, Option } from 'commander';
import { FsbenchError } from '../contract/errors.js';
import { GATE_FORMATS, renderGate, type GateFormat } from '../gate/export.js';
import { gate, GATE_DEFAULTS, gates, parseLimits, parseShare, type GateVerdict } from '../gate/gate.js';
import { GateReportSchema } from '../gate/schema.js';
import { clientFromSettings } from './client.js';
import { readComparison, withSideOptions, type CompareFlags, type Excluded } from './compare.js';

type GateFlags = CompareFlags & {
  format: GateFormat;
  maxRegression: string;
  limit?: string[];
  excludeFlagged?: boolean;
  allowInconclusive?: boolean;
  out?: string;
};

/** Sides a coordinator resolves from its history: the newest matrix of a name, or a name's runs since its last change. */
const SERIES = /^(latest|history):/;

async function gateCommand(baseline: string, candidate: string, flags: GateFlags): Promise<void> {
  const maxRegression = parseShare(flags.maxRegression);
  if (maxRegression === null) throw new FsbenchError('CONFIG_INVALID', `--max-regression ${flags.maxRegression} is not a positive share such as 5% or 0.05`);
  const parsed = parseLimits(flags.limit ?? []);
  if (!parsed.ok) throw new FsbenchError('CONFIG_INVALID', `--limit ${parsed.bad} is not METRIC=SHARE, such as eventsPerSec=10%`);
  if (SERIES.test(baseline) || SERIES.test(candidate)) {
    await gateOnCoordinator(baseline, candidate, flags);
    return;
  }
  const limits = parsed.limits;
  const excluded: Excluded | undefined = flags.excludeFlagged === true ? { baseline: 0, candidate: 0 } : undefined;
  const report = await readComparison(baseline, candidate, flags, excluded);
  const g = gate(report, { maxRegression, perMetric: limits, ...(excluded ? { excluded } : {}), allowInconclusive: flags.allowInconclusive === true });
  await writeOut(renderGate(flags.format, g), flags.out);
  exitWith(g.verdict, {
    regressions: g.rows.filter((r) => r.status === 'regression').map((r) => `${r.row.metric} ${r.row.label}`),
    unjudged: [...g.rows.filter((r) => r.status === 'inconclusive' && gates(r.row)).map((r) => `${r.row.metric} ${r.row.label}`), ...g.compare.unmatched.baseline],
  });
}

async function writeOut(text: string, out: string | undefined): Promise<void> {
  if (out === undefined) process.stdout.write(text);
  else await writeFile(out, text);
}

const listed = (where: readonly string[]) => `${where.slice(0, 5).join('; ')}${where.length > 5 ? ' ...' : ''}`;

/** The verdict as the exit code: the catalog's REGRESSION (6) or INCONCLUSIVE (7), nothing for a pass. */
function exitWith(verdict: GateVerdict, rows: { regressions: readonly string[]; unjudged: readonly string[] }): void {
  const { regressions, unjudged } = rows;
  if (verdict === 'fail') throw new FsbenchError('REGRESSION', `${String(regressions.length)} regression${regressions.length === 1 ? '' : 's'}: ${listed(regressions)}`);
  if (verdict === 'inconclusive') {
    throw new FsbenchError(
      'INCONCLUSIVE',
      `no regression seen, but ${String(unjudged.length)} cell-metric${unjudged.length === 1 ? '' : 's'} could not be judged: ${listed(unjudged)}; the output says why for each (run more repetitions, or accept with --allow-inconclusive)`,
    );
  }
}

/**
 * `latest:NAME` and `history:NAME` live in a coordinator's history, so the coordinator judges
 * (`GET /v1/gate`, the same gate): its JSON says the verdict, and the format asked for is its
 * rendering of the same query.
 */
async function gateOnCoordinator(baseline: string, candidate: string, flags: GateFlags): Promise<void> {
  const client = clientFromSettings(flags);
  const ref = (side: string) => side.replace(/^matrix:/, '');
  const q = new URLSearchParams({ baseline: ref(baseline), candidate: ref(candidate), alpha: flags.alpha, maxRegression: flags.maxRegression });
  const metrics = (flags.metric ?? []).flatMap((m) => m.split(',')).map((m) => m.trim()).filter((m) => m !== '');
  if (metrics.length > 0) q.set('metric', metrics.join(','));
  if ((flags.limit ?? []).length > 0) q.set('limit', (flags.limit ?? []).join(','));
  if (flags.excludeFlagged === true) q.set('excludeFlagged', 'true');
  if (flags.allowInconclusive === true) q.set('allowInconclusive', 'true');
  if (flags.baselineMachine !== undefined) q.set('baselineMachine', flags.baselineMachine);
  if (flags.candidateMachine !== undefined) q.set('candidateMachine', flags.candidateMachine);
  const parsed = GateReportSchema.safeParse(await client.json('GET', `/v1/gate?${q.toString()}&format=json`));
  if (!parsed.success) throw new FsbenchError('INTERNAL', `the coordinator's gate is not what this fsbench understands: ${parsed.error.issues[0]?.message ?? ''}`);
  const g = parsed.data;
  await writeOut(flags.format === 'json' ? `${JSON.stringify(g, null, 2)}\n` : await client.text(`/v1/gate?${q.toString()}&format=${flags.format}`), flags.out);
  exitWith(g.verdict, {
    regressions: g.rows.filter((r) => r.status === 'regression').map((r) => `${r.metric} ${r.label}`),
    unjudged: [...g.rows.filter((r) => r.status === 'inconclusive' && r.gated).map((r) => `${r.metric} ${r.label}`), ...g.notJudged],
  });
}

export function registerGateCommands(program: Command): void {
  withSideOptions(
    program
      .command('gate')
      .description('fail (exit 6) when the candidate regressed against the baseline: beyond --max-regression and significant; exit 7 when a gated cell-metric could not be judged'),
  )
    .option('--max-regression <share>', 'largest move in a metric\'s bad direction that passes', `${String(GATE_DEFAULTS.maxRegression * 100)}%`)
    .option('--limit <metric=share...>', 'a limit for one metric, overriding --max-regression (repeatable): eventsPerSec=10%')
    .option('--exclude-flagged', 'leave out runs flagged for interference (steal, CPU use by others) on both sides, and say how many')
    .option('--allow-inconclusive', 'exit 0 rather than 7 when no regression was seen but some cell-metrics could not be judged (too few or too noisy runs, a cell missing from the candidate); they are still named')
    .addOption(new Option('-f, --format <format>', 'output format: the table, Markdown for a CI summary, JUnit XML, Bencher or github-action-benchmark JSON').choices(GATE_FORMATS).default('table'))
    .option('-o, --out <file>', 'write the output to this file instead of stdout (the exit code still says pass or fail)')
    .action(gateCommand);
}
