/**
 * `fsbench compare A B` (benchstat-style, on `.jsonl` files from `fsbench run --out` or on
 * matrices stored by a coordinator) and `fsbench upload FILE` (local runs into a coordinator).
 */
import { Command, Option } from 'commander';
import { z } from 'zod';
import { FsbenchError } from '../contract/errors.js';
import { MachineFingerprint } from '../contract/fingerprint.js';
import { Interference } from '../contract/interference.js';
import { annotationsWith, CellParams } from '../contract/matrix.js';
import { WORKLOAD_NAMES } from '../contract/workloads/index.js';
import { compareSides, readSide, type CompareReport } from '../compare/compare.js';
import { exportableCompare } from '../compare/view.js';
import { FORMAT_NAMES, render, type FormatName } from '../report/export/index.js';
import { readRunsFile, runsOfFile } from '../report/runs-file.js';
import { ReportSchema } from '../report/schema.js';
import type { AggregatableRun, MachineFacts } from '../stats/aggregate.js';
import { clientFromSettings, type CoordinatorClient } from './client.js';

export type CompareFlags = {
  metric?: string[];
  alpha: string;
  baselineMachine?: string;
  candidateMachine?: string;
  url?: string;
  token?: string;
  tokenFile?: string;
  insecureToken?: boolean;
};

const REMOTE = /^matrix:(.+)$/;

/**
 * What `GET /v1/matrices/:id/results` answers, as far as compare reads it: a page of runs, the
 * cursor of the next, and (on the first page) each machine's caches.
 */
const RemoteResults = z.object({
  matrix: z.object({ id: z.string(), name: z.string(), workload: z.enum(WORKLOAD_NAMES) }).loose(),
  report: z
    .object({
      machines: z.array(
        z
          .object({
            machine: z.string(),
            caches: ReportSchema.shape.machines.element.shape.caches,
            // A fingerprint this version cannot read (a newer fsbench's) leaves the machine's facts unknown.
            fingerprint: MachineFingerprint.nullable().optional().catch(null),
          })
          .loose(),
      ),
    })
    .loose()
    .optional(),
  /** Absent from coordinators that answer every run at once. */
  next: z.string().nullable().optional(),
  runs: z.array(
    z
      .object({
        cellId: z.string(),
        machine: z.string(),
        state: z.enum(['ok', 'failed', 'skipped']),
        params: CellParams,
        metrics: z.record(z.string(), z.number().nullable()).optional(),
        error: z.object({ code: z.string(), message: z.string() }).optional(),
        reason: z.string().optional(),
        // Read for --exclude-flagged; one this version cannot read counts as not measured.
        interference: Interference.optional().catch(undefined),
      })
      .loose(),
  ),
});

/** What `POST /v1/results` answers. */
const UploadAnswer = z.object({
  stored: z.number().int(),
  duplicates: z.number().int(),
  matrices: z.array(z.object({ id: z.string(), name: z.string(), machine: z.string() }).loose()),
});

/** Each machine's whole fingerprint as the coordinator's report gave it, filled while a side is read. */
type Fingerprints = Map<string, MachineFingerprint>;

async function* remoteRuns(id: string, client: CoordinatorClient, fingerprints: Fingerprints): AsyncGenerator<AggregatableRun> {
  let facts = new Map<string, MachineFacts>();
  let cursor: string | null = null;
  do {
    const page = cursor === null ? '' : `?cursor=${encodeURIComponent(cursor)}`;
    const res = await client.fetch('GET', `/v1/matrices/${encodeURIComponent(id)}/results${page}`, { what: `reading matrix ${id}` });
    const parsed = RemoteResults.safeParse(await res.json());
    if (!parsed.success) throw new FsbenchError('INTERNAL', `the coordinator's answer for matrix ${id} is not what this fsbench understands: ${parsed.error.issues[0]?.message ?? ''}`);
    const { matrix, report, runs, next } = parsed.data;
    // The report comes with the first page only.
    if (report) {
      facts = new Map(report.machines.map((m) => [m.machine, { machine: m.machine, cpu: m.caches }]));
      for (const m of report.machines) if (m.fingerprint) fingerprints.set(m.machine, m.fingerprint);
    }
    yield* pageRuns(matrix, runs, facts);
    cursor = next ?? null;
  } while (cursor !== null);
}

function* pageRuns(matrix: z.infer<typeof RemoteResults>['matrix'], runs: z.infer<typeof RemoteResults>['runs'], facts: ReadonlyMap<string, MachineFacts>): Generator<AggregatableRun> {
  for (const r of runs) {
    yield {
      matrix: matrix.id,
      cellId: r.cellId,
      workload: matrix.workload,
      params: r.params,
      state: r.state,
      fingerprint: facts.get(r.machine) ?? { machine: r.machine, cpu: { l3Bytes: null } },
      ...(r.metrics ? { metrics: r.metrics } : {}),
      ...(r.error ? { error: r.error } : {}),
      ...(r.reason === undefined ? {} : { reason: r.reason }),
      ...(r.interference ? { interference: r.interference } : {}),
    };
  }
}

/** How many runs a side left out because they were flagged for interference. */
export interface Excluded {
  baseline: number;
  candidate: number;
}

/**
 * Reads both sides (files or matrix:ID on the coordinator) and compares them. With
 * `excludeFlagged`, runs flagged for interference are left out of both and counted in it.
 */
export async function readComparison(baseline: string, candidate: string, flags: CompareFlags, excludeFlagged?: Excluded): Promise<CompareReport> {
  const alpha = Number(flags.alpha);
  if (!(alpha > 0 && alpha < 0.5)) throw new FsbenchError('CONFIG_INVALID', `--alpha ${flags.alpha} is not a number between 0 and 0.5`);
  const metrics = flags.metric?.flatMap((m) => m.split(',')).map((m) => m.trim()).filter((m) => m !== '');
  const remote = [baseline, candidate].some((x) => REMOTE.test(x));
  const client = remote ? clientFromSettings(flags) : undefined;
  async function* runsOf(ref: string, fingerprints: Fingerprints, side: keyof Excluded): AsyncGenerator<AggregatableRun> {
    const id = REMOTE.exec(ref)?.[1];
    for await (const r of id !== undefined && client ? remoteRuns(id, client, fingerprints) : runsOfFile(ref)) {
      if (excludeFlagged && (r.interference?.flagged.length ?? 0) > 0) excludeFlagged[side]++;
      else yield r;
    }
  }
  const useMetrics = metrics && metrics.length > 0 ? metrics : undefined;
  const options = { ...(useMetrics ? { metrics: useMetrics } : {}), alpha };
  const fa: Fingerprints = new Map();
  const fb: Fingerprints = new Map();
  const a = await readSide(baseline, runsOf(baseline, fa, 'baseline'), { ...options, machine: flags.baselineMachine, fingerprintOf: (m) => fa.get(m) ?? null });
  const b = await readSide(candidate, runsOf(candidate, fb, 'candidate'), { ...options, machine: flags.candidateMachine, fingerprintOf: (m) => fb.get(m) ?? null });
  for (const [side, machine, flag] of [[a, flags.baselineMachine, '--baseline-machine'], [b, flags.candidateMachine, '--candidate-machine']] as const) {
    if (machine !== undefined && side.report.cells.length === 0) throw new FsbenchError('CONFIG_INVALID', `${side.name} has no runs from machine ${machine} (${flag})`);
  }
  for (const [side, which] of [[a, 'baseline'], [b, 'candidate']] as const) {
    if (excludeFlagged && excludeFlagged[which] > 0 && side.report.cells.length === 0) {
      throw new FsbenchError('TOO_DISTURBED', `every run of the ${which} (${String(excludeFlagged[which])}) was flagged for interference and left out (--exclude-flagged): nothing to judge; run again when the machine is quieter, or gate without --exclude-flagged`);
    }
  }
  const report = compareSides(a, b, options);
  if (useMetrics && report.rows.length === 0 && report.unmatched.baseline.length + report.unmatched.candidate.length === 0) {
    throw new FsbenchError('CONFIG_INVALID', `no run has the metric ${useMetrics.join(', ')}`);
  }
  return report;
}

async function compareCommand(baseline: string, candidate: string, flags: CompareFlags & { format: FormatName }): Promise<void> {
  process.stdout.write(render(flags.format, exportableCompare(await readComparison(baseline, candidate, flags))));
}

/** The options every command reading two sides takes (compare, gate). */
export function withSideOptions(cmd: Command): Command {
  return cmd
    .argument('<baseline>', 'a .jsonl file from `fsbench run --out`, or matrix:ID on the coordinator')
    .argument('<candidate>', 'a .jsonl file, or matrix:ID')
    .option('-m, --metric <names...>', "metrics to compare (comma-separated or repeated); default: the workload's headline metrics")
    .option('--alpha <p>', 'significance level of the Mann-Whitney test', '0.05')
    .option('--baseline-machine <name>', 'only the baseline runs from this machine')
    .option('--candidate-machine <name>', 'only the candidate runs from this machine')
    .option('--url <url>', 'coordinator for matrix:ID arguments (FSBENCH_URL)')
    .option('--token <token>', 'refused: a command line is readable by every user; use --token-file or FSBENCH_TOKEN')
    .option('--token-file <path>', 'a file holding the bearer token for the coordinator (FSBENCH_TOKEN_FILE, or FSBENCH_TOKEN)')
    .option('--insecure-token', 'send the token over plain http:// to another machine too (FSBENCH_INSECURE_TOKEN)');
}

/**
 * The coordinator files uploaded runs under one matrix per (machine, matrix name, workload),
 * with the cells the upload carries; so each such group goes in one request, whole. Its
 * default limit for uploads is 64 MiB, about 25,000 runs.
 */
const MAX_UPLOAD_BYTES = 64 * 1024 ** 2;

async function uploadCommand(file: string, flags: { url?: string; token?: string; tokenFile?: string; insecureToken?: boolean; annotate?: string[] }): Promise<void> {
  const client = clientFromSettings(flags);
  const pairs = flags.annotate ?? [];
  const runs = (await readRunsFile(file)).map((r) => (pairs.length === 0 ? r : { ...r, annotations: annotationsWith(r.annotations, pairs) }));
  const groups = new Map<string, string[]>();
  for (const r of runs) {
    const key = JSON.stringify([r.fingerprint.machine, r.matrix, r.workload]);
    const lines = groups.get(key) ?? [];
    lines.push(JSON.stringify(r));
    groups.set(key, lines);
  }
  let stored = 0;
  let duplicates = 0;
  for (const [key, lines] of groups) {
    const body = `${lines.join('\n')}\n`;
    if (Buffer.byteLength(body) > MAX_UPLOAD_BYTES) {
      throw new FsbenchError('CONFIG_INVALID', `${file}: the runs of ${key} take more than 64 MiB, more than one upload may carry: split the matrix`);
    }
    const res = await client.fetch('POST', '/v1/results', { body, contentType: 'application/x-ndjson', what: `uploading ${file}` });
    const answer = UploadAnswer.parse(await res.json());
    stored += answer.stored;
    duplicates += answer.duplicates;
    for (const m of answer.matrices) process.stdout.write(`matrix ${m.id}: ${m.name} from ${m.machine}\n`);
  }
  process.stdout.write(`${stored} runs stored, ${duplicates} already there\n`);
}

export function registerCompareCommands(program: Command): void {
  withSideOptions(program.command('compare').description('compare two result sets cell by cell: medians, delta, ratio CI, Mann-Whitney p (~ when not significant)'))
    .addOption(new Option('-f, --format <format>', 'output format').choices(FORMAT_NAMES).default('table'))
    .action(compareCommand);

  program
    .command('upload')
    .description('send a .jsonl file from `fsbench run --out` to the coordinator, where it joins comparisons (stored once however often it is sent)')
    .argument('<file>', 'the .jsonl file')
    .option('--annotate <name=value...>', "add to the runs' annotations (repeatable): commit=4f2a9c1")
    .option('--url <url>', 'the coordinator (FSBENCH_URL)')
    .option('--token <token>', 'refused: a command line is readable by every user; use --token-file or FSBENCH_TOKEN')
    .option('--token-file <path>', 'a file holding the bearer token (FSBENCH_TOKEN_FILE, or FSBENCH_TOKEN)')
    .option('--insecure-token', 'send the token over plain http:// to another machine too (FSBENCH_INSECURE_TOKEN)')
    .action(uploadCommand);
}
