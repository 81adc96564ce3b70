/**
 * The operator's commands: `list`, `status <id>` and `cancel <id>`, clients of the coordinator's
 * `/v1/matrices` routes. Every answer is parsed before anything is printed, so an answer this
 * fsbench does not understand stops with INTERNAL rather than a table of `undefined`; `--json`
 * prints the answer as the coordinator sent it, fields this version does not know included.
 */
import { Option, type Command } from 'commander';
import { z } from 'zod';
import { FsbenchError } from '../contract/errors.js';
import { formatPercent } from '../contract/units.js';
import { formatReadableDuration } from '../report/format.js';
import { CLIENT_SETTINGS, clientFromSettings, withSettings } from './client.js';

const STATES = ['queued', 'running', 'done', 'cancelled'] as const;

/**
 * The list route's own bounds (coordinator/routes/matrices.ts: 1 to 1000, newest first, no cursor):
 * asked for outright rather than left to its default, so the CLI says when it shows only part.
 */
const LIST_DEFAULT = 50;
const LIST_MAX = 1000;

/** A name is up to 100 characters and a failure's message is free text: a column stays readable. */
const NAME_WIDTH = 40;
const MESSAGE_WIDTH = 100;

const Count = z.number().int().nonnegative();
const Iso = z.iso.datetime();

const Summary = z.object({
  id: z.string(),
  name: z.string(),
  workload: z.string(),
  state: z.enum(STATES),
  cells: Count,
  runs: Count,
  createdAt: Iso,
  startedAt: Iso.nullable(),
  finishedAt: Iso.nullable(),
  // Under `repetitions: auto` the expected runs fall as cells stop early: stored/expected is not bounded by 1 here.
  progress: z.object({ expected: Count, stored: Count, ok: Count, failed: Count, skipped: Count, fraction: z.number().nonnegative() }),
});
type Summary = z.infer<typeof Summary>;

const Listing = z.object({ matrices: z.array(Summary) });

const Detail = Summary.extend({
  repetitions: z.union([Count, z.literal('auto')]),
  warmup: Count,
  estimatedDurationMs: z.number().nonnegative(),
  precision: z
    .object({ metric: z.string(), target: z.number(), minRepetitions: Count, maxRepetitions: Count, measuring: Count, reached: Count, atMaximum: Count, stopped: Count })
    .nullable(),
  machines: z.array(z.object({ machine: z.string(), target: z.string(), expected: Count.nullable(), stored: Count, ok: Count, failed: Count, skipped: Count })),
  failures: z.array(z.object({ cellId: z.string(), repetition: Count, machine: z.string(), code: z.string().nullable(), message: z.string().nullable() })),
});
type Detail = z.infer<typeof Detail>;

const Cancelled = Summary.extend({ removedRuns: Count });

/** The detail route lists this many failed runs at most (MAX_FAILURES_SHOWN in coordinator/matrices/progress.ts). */
const FAILURES_LISTED = 20;

function parseAnswer<T>(schema: z.ZodType<T>, body: unknown, what: string): T {
  const r = schema.safeParse(body);
  if (r.success) return r.data;
  throw new FsbenchError('INTERNAL', `the coordinator's answer to ${what} is not what this fsbench understands (a coordinator of another version?):\n${z.prettifyError(r.error)}`);
}

const log = (line: string) => {
  process.stderr.write(`${line}\n`);
};

const printJson = (body: unknown) => {
  process.stdout.write(`${JSON.stringify(body, null, 2)}\n`);
};

/** Rows padded to their columns' widths, two spaces apart, as `fsbench agents` prints them. */
function table(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  return rows.map((r) => `${r.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ').trimEnd()}\n`).join('');
}

function clip(text: string, width: number): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length <= width ? line : `${line.slice(0, width - 1)}…`;
}

const ago = (iso: string, now: number) => `${formatReadableDuration(Math.max(0, now - Date.parse(iso)))} ago`;

const runsCell = (m: Summary) => `${m.progress.stored}/${m.progress.expected} (${formatPercent(Math.min(1, m.progress.fraction))})`;

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/**
 * How long the matrix has taken so far, or took, beside the submission's estimate. No time to
 * go: runs of one matrix can differ a hundredfold (cells of 0 and 60 s), so the pace so far
 * says little about the runs left.
 */
function timing(m: Detail, now: number): string {
  const estimate = `estimated ${formatReadableDuration(m.estimatedDurationMs)} of runs in all`;
  if (m.startedAt === null) {
    const until = m.finishedAt === null ? now : Date.parse(m.finishedAt);
    const waited = formatReadableDuration(Math.max(0, until - Date.parse(m.createdAt)));
    return m.state === 'queued' ? `not started, queued for ${waited}; ${estimate}` : `never started (${m.state} after ${waited}); ${estimate}`;
  }
  const end = m.finishedAt === null ? now : Date.parse(m.finishedAt);
  const elapsed = formatReadableDuration(Math.max(0, end - Date.parse(m.startedAt)));
  return `${m.finishedAt === null ? 'running for' : 'took'} ${elapsed}; ${estimate}`;
}

function printStatus(m: Detail, now: number): void {
  const p = m.progress;
  const when = (iso: string | null) => (iso === null ? '-' : `${iso} (${ago(iso, now)})`);
  const repetitions = m.repetitions === 'auto' ? 'repetitions auto' : plural(m.repetitions, 'repetition');
  const facts: [string, string][] = [
    ['matrix', `${m.id}  ${m.name} (${m.workload})`],
    ['state', m.state],
    ['progress', `${p.stored}/${p.expected} runs stored (${formatPercent(Math.min(1, p.fraction))}): ${p.ok} ok, ${p.failed} failed, ${p.skipped} skipped`],
    ['cells', `${plural(m.cells, 'cell')} × ${repetitions}, ${plural(m.warmup, 'warmup run')} per cell and host`],
    ['submitted', when(m.createdAt)],
    ['started', when(m.startedAt)],
    ['finished', when(m.finishedAt)],
    ['time', timing(m, now)],
  ];
  const pr = m.precision;
  if (pr !== null) {
    facts.push([
      'precision',
      `${pr.metric}'s median within ±${formatPercent(pr.target)}: ${plural(pr.reached, 'cell')} reached it, ${pr.measuring} measuring, ${pr.atMaximum} at the maximum of ${pr.maxRepetitions} runs, ${pr.stopped} stopped`,
    ]);
  }
  process.stdout.write(table(facts));
  if (m.machines.length > 0) {
    process.stdout.write('\n');
    const rows = m.machines.map((x) => [x.machine, x.target, x.expected === null ? `${x.stored}` : `${x.stored}/${x.expected}`, `${x.ok}`, `${x.failed}`, `${x.skipped}`]);
    process.stdout.write(table([['MACHINE', 'TARGET', 'STORED', 'OK', 'FAILED', 'SKIPPED'], ...rows]));
  }
  if (m.failures.length > 0) {
    process.stdout.write('\n');
    const rows = m.failures.map((f) => [f.cellId, `${f.repetition}`, f.machine, f.code ?? '-', clip(f.message ?? '', MESSAGE_WIDTH)]);
    process.stdout.write(table([['CELL', 'REP', 'MACHINE', 'CODE', 'MESSAGE'], ...rows]));
  }
  if (p.failed > m.failures.length && m.failures.length >= FAILURES_LISTED) {
    log(`the first ${m.failures.length} of ${p.failed} failed runs: \`fsbench results ${m.id} --format csv --table runs\` lists every run`);
  }
}

const matrixPath = (id: string) => `/v1/matrices/${encodeURIComponent(id)}`;

export function registerOperateCommands(program: Command): void {
  withSettings(program.command('list').description('List the matrices on the coordinator, newest first, with their state and progress'), CLIENT_SETTINGS)
    .addOption(new Option('--state <state>', 'only matrices in this state').choices(STATES))
    .option('--limit <n>', `at most this many, newest first (1 to ${LIST_MAX})`, String(LIST_DEFAULT))
    .option('--json', 'print the JSON answer')
    .action(async (opts: Record<string, unknown>) => {
      const limit = z.coerce.number().int().min(1).max(LIST_MAX).safeParse(opts['limit']);
      if (!limit.success) throw new FsbenchError('CONFIG_INVALID', `--limit ${String(opts['limit'])} must be a whole number from 1 to ${LIST_MAX}`);
      const state = z.enum(STATES).optional().parse(opts['state']);
      const q = new URLSearchParams({ limit: String(limit.data), ...(state === undefined ? {} : { state }) });
      const body = await clientFromSettings(opts).json('GET', `/v1/matrices?${q.toString()}`);
      const { matrices } = parseAnswer(Listing, body, 'GET /v1/matrices');
      if (opts['json'] === true) {
        printJson(body);
        return;
      }
      const now = Date.now();
      if (matrices.length === 0) {
        log(state === undefined ? 'no matrix on the coordinator' : `no ${state} matrix on the coordinator`);
        return;
      }
      const rows = matrices.map((m) => [m.id, clip(m.name, NAME_WIDTH), m.workload, m.state, runsCell(m), `${m.progress.failed}`, ago(m.createdAt, now)]);
      process.stdout.write(table([['ID', 'NAME', 'WORKLOAD', 'STATE', 'RUNS', 'FAILED', 'SUBMITTED'], ...rows]));
      if (matrices.length === limit.data) log(`the newest ${limit.data} only: --limit ${LIST_MAX} shows up to ${LIST_MAX}, --state narrows the list`);
    });

  withSettings(program.command('status').description("Show one matrix: its state, progress per machine, failed runs with their error codes, and its time so far"), CLIENT_SETTINGS)
    .argument('<id>', 'matrix id (`fsbench list` shows them)')
    .option('--json', 'print the JSON answer')
    .action(async (id: string, opts: Record<string, unknown>) => {
      const body = await clientFromSettings(opts).json('GET', matrixPath(id));
      const m = parseAnswer(Detail, body, `GET ${matrixPath(id)}`);
      if (opts['json'] === true) printJson(body);
      else printStatus(m, Date.now());
    });

  withSettings(program.command('cancel').description('Cancel a queued or running matrix: its queued runs are removed, the runs stored so far are kept'), CLIENT_SETTINGS)
    .argument('<id>', 'matrix id (`fsbench list` shows them)')
    .option('--json', 'print the JSON answer')
    .action(async (id: string, opts: Record<string, unknown>) => {
      const res = await clientFromSettings(opts).fetch('DELETE', matrixPath(id), { what: `cancelling matrix ${id}` });
      const body: unknown = await res.json();
      const m = parseAnswer(Cancelled, body, `DELETE ${matrixPath(id)}`);
      if (opts['json'] === true) {
        printJson(body);
        return;
      }
      process.stdout.write(`cancelled ${m.id} (${m.name}): ${plural(m.removedRuns, 'queued run')} removed, ${m.progress.stored} of ${plural(m.progress.expected, 'run')} stored and kept\n`);
    });
}
