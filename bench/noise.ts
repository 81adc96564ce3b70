/**
 * `npm run bench:noise`: how repeatable is one inotify cell here, and what keeps it from being
 * more so? Ten repetitions of a reference cell (issue 13's: 8 writers, 128 files, an 8 MiB read
 * buffer, 2 s, tmpfs, a 1M-event queue) in four setups, one after another in one run:
 *   plain:         ten back-to-back runs, reader and writers wherever the scheduler puts them;
 *   pinned:        the reader on CPU 0, the writers on the others (`pin: true`);
 *   pinned, nice:  pinned, and the reader at nice -10 (`readerNice: -10`);
 *   interleaved:   plain, alternating with another cell (a 64 KiB buffer), as `order:
 *                  interleaved` runs a matrix: a run never follows one of its own cell.
 * For each: the CV of eventsPerSec, and the interference fsbench measured over the runs (steal,
 * CPU used by other processes, CPU pressure), so a CV above 3% can be put down to the machine
 * or to the workload. Writes bench/results/noise.json.
 *
 *   node dist/bench/noise.js [--repetitions 10] [--duration 2s] [--out bench/results/noise.json]
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { expandMatrix, parseMatrix, type MatrixInput } from '../contract/matrix.js';
import type { RunResult } from '../contract/result.js';
import { collectFingerprint } from '../host/fingerprint.js';
import { runMatrixLocally } from '../runner/local.js';
import { median, summarize } from '../stats/summary.js';

const { values } = parseArgs({
  options: {
    repetitions: { type: 'string', default: '10' },
    duration: { type: 'string', default: '2s' },
    out: { type: 'string', default: 'bench/results/noise.json' },
  },
});
const repetitions = Number(values.repetitions);
if (!Number.isInteger(repetitions) || repetitions < 3 || repetitions > 100) throw new Error('--repetitions must be an integer from 3 to 100');

/** The CV a setup must reach to count as repeatable enough to tell 5% apart with 10 runs a side. */
const TARGET_CV = 0.03;
const REFERENCE = { writers: 8, files: 128, bufferBytes: '8MiB', duration: values.duration, target: 'tmpfs', maxQueuedEvents: 1_048_576 };

interface Setup {
  readonly name: string;
  readonly matrix: MatrixInput;
}

const SETUPS: readonly Setup[] = [
  { name: 'plain', matrix: { name: 'noise-plain', workload: 'inotify', order: 'sequential', params: REFERENCE } },
  { name: 'pinned', matrix: { name: 'noise-pinned', workload: 'inotify', order: 'sequential', params: { ...REFERENCE, pin: true } } },
  { name: 'pinned, readerNice -10', matrix: { name: 'noise-nice', workload: 'inotify', order: 'sequential', params: { ...REFERENCE, pin: true, readerNice: -10 } } },
  {
    name: 'interleaved with another cell',
    matrix: { name: 'noise-interleaved', workload: 'inotify', order: 'interleaved', params: { ...REFERENCE, bufferBytes: ['8MiB', '64KiB'] } },
  },
];

function medianOf(xs: readonly (number | null | undefined)[]): number | null {
  const v = xs.filter((x): x is number => typeof x === 'number' && Number.isFinite(x));
  return v.length > 0 ? median(v) : null;
}

async function measure(setup: Setup, scratchDir: string): Promise<Record<string, unknown>> {
  const matrix = parseMatrix({ ...setup.matrix, warmup: 1, repetitions });
  const runs: RunResult[] = await runMatrixLocally({
    matrix,
    cells: expandMatrix(matrix),
    scratchDir,
    fingerprint: await collectFingerprint({}, scratchDir),
    signal: new AbortController().signal,
    onResult: () => undefined,
    log: (line) => process.stderr.write(`${setup.name}: ${line}\n`),
  });
  // The reference cell only: the other cell of the interleaved setup is there to separate its runs.
  const ref = runs.filter((r) => r.params['bufferBytes'] === 8 * 1024 ** 2);
  const failed = ref.filter((r) => r.state !== 'ok');
  if (failed.length > 0) throw new Error(`${setup.name}: ${failed.length} runs failed: ${JSON.stringify(failed[0])}`);
  const ok = ref.flatMap((r) => (r.state === 'ok' ? [r] : []));
  const rates = ok.flatMap((r) => (typeof r.metrics['eventsPerSec'] === 'number' ? [r.metrics['eventsPerSec']] : []));
  const s = summarize(rates);
  const interference = ok.map((r) => r.interference);
  return {
    setup: setup.name,
    runs: rates.length,
    medianEventsPerSec: s.median,
    cv: s.cv,
    reachesTarget: s.cv !== null && s.cv <= TARGET_CV,
    min: s.min,
    max: s.max,
    medianReaderCpuFraction: medianOf(ok.map((r) => r.metrics['readerCpuFraction'])),
    medianOutsideCpu: medianOf(interference.map((i) => i?.outsideCpuFraction)),
    maxOutsideCpu: Math.max(0, ...interference.map((i) => i?.outsideCpuFraction ?? 0)),
    medianStealFraction: medianOf(interference.map((i) => i?.stealFraction)),
    medianCpuPressureSomeMs: medianOf(interference.map((i) => i?.pressure.cpu?.someMs)),
    flaggedRuns: interference.filter((i) => (i?.flagged.length ?? 0) > 0).length,
    eventsPerSec: rates,
  };
}

async function main(): Promise<void> {
  const scratchDir = path.join(os.tmpdir(), 'fsbench-bench-noise');
  mkdirSync(scratchDir, { recursive: true });
  const fingerprint = await collectFingerprint({}, scratchDir);
  const started = new Date().toISOString();
  const setups: Record<string, unknown>[] = [];
  for (const setup of SETUPS) {
    process.stderr.write(`bench:noise: ${setup.name} (${repetitions} runs of ${values.duration})\n`);
    setups.push(await measure(setup, scratchDir));
  }
  const report = {
    started,
    finished: new Date().toISOString(),
    machine: { cpu: fingerprint.cpu.model, cpus: fingerprint.cpu.logicalCores, kernel: fingerprint.kernel.release, facts: fingerprint.facts },
    reference: REFERENCE,
    repetitions,
    targetCv: TARGET_CV,
    setups,
  };
  mkdirSync(path.dirname(values.out), { recursive: true });
  writeFileSync(values.out, `${JSON.stringify(report, null, 2)}\n`);
  const pct = (x: unknown) => (typeof x === 'number' ? `${(x * 100).toFixed(1)}%` : 'n/a');
  for (const s of setups) {
    process.stdout.write(
      `${String(s['setup']).padEnd(32)} CV ${pct(s['cv']).padStart(6)}  median ${Math.round(Number(s['medianEventsPerSec']))} events/s  outside CPU ${pct(s['medianOutsideCpu'])} of a CPU (max ${pct(s['maxOutsideCpu'])})  steal ${pct(s['medianStealFraction'])}  flagged ${String(s['flaggedRuns'])}/${String(s['runs'])}\n`,
    );
  }
  process.stdout.write(`written to ${values.out}\n`);
}

await main();
