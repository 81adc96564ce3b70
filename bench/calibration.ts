/**
 * `npm run bench:calibration`: how often the regression gate cries wolf, and how often it catches
 * a real change, measured on real runs of this machine.
 *
 * The cell is the noop workload's `spin`: each run repeats a fixed unit of CPU work for 50 ms and
 * reports units per second, with this machine's own noise (other processes, frequency, caches).
 * `slowdown` makes each unit cost more, a regression of known size (5, 10, 20%); `jitter` adds
 * noise of known size on top (0, 5, 10%: uniform, so about 0, 2.9 and 5.8% standard deviation).
 * Each trial runs a baseline (2 warmups, then 10 runs) and then a candidate the same way, as a
 * CI job runs main and then a branch, and gates the candidate against it with the defaults
 * (--max-regression 5%, alpha 0.05). A/A trials (no slowdown) count false alarms; A/B trials count
 * detections. Each trial also records the gate's detectable effect, the smallest change its runs
 * could have caught with 80% power. Results go to bench/results/calibration.json.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { compareRunSets } from '../compare/compare.js';
import type { MachineFingerprint } from '../contract/fingerprint.js';
import { expandMatrix, parseMatrix } from '../contract/matrix.js';
import type { RunResult } from '../contract/result.js';
import { gate, GATE_DEFAULTS } from '../gate/gate.js';
import { collectFingerprint } from '../host/fingerprint.js';
import type { Journal } from '../host/journal.js';
import { openJournal, runMatrixLocally } from '../runner/local.js';
import { median } from '../stats/summary.js';

const HERE = fileURLToPath(import.meta.url);
const OUT = path.join(path.dirname(HERE), '..', '..', 'bench', 'results', 'calibration.json');
const NOISES = [0, 5, 10];
const CHANGES = [0, 5, 10, 20];
const RUNS = 10;
const WARMUP = 2;
const SPIN_MS = 50;

/** One side of a trial: a one-cell matrix run as `fsbench run` runs it (warmups, interference measured). */
async function side(name: string, params: Record<string, number | string>, o: { scratchDir: string; journal: Journal; fingerprint: MachineFingerprint }): Promise<RunResult[]> {
  const matrix = parseMatrix({ name, workload: 'noop', repetitions: RUNS, warmup: WARMUP, order: 'sequential', params });
  const runs: RunResult[] = [];
  await runMatrixLocally({
    matrix,
    cells: expandMatrix(matrix),
    scratchDir: o.scratchDir,
    journal: o.journal,
    fingerprint: o.fingerprint,
    signal: new AbortController().signal,
    log: () => undefined,
    onResult: (r) => {
      runs.push(r);
    },
  });
  return runs;
}

interface Combo {
  readonly noisePct: number;
  readonly changePct: number;
  readonly trials: number;
  /** Trials the gate failed: false alarms when changePct is 0, detections otherwise. */
  readonly failed: number;
  readonly rate: number;
  /** Trials the gate could not judge (exit 7): neither a regression nor one ruled out. */
  readonly inconclusive: number;
  /** Median over trials of the gate's detectable effect (a share), and of the sides' CV. */
  readonly medianDetectable: number | null;
  readonly medianCv: number | null;
  readonly medianMeasuredChangePct: number | null;
  /** Runs flagged for interference (steal, CPU used by others), of all measured. */
  readonly flaggedRuns: number;
  readonly runs: number;
}

async function main(): Promise<void> {
  const trials = Number(process.env['BENCH_TRIALS'] ?? '20');
  // The scratch directory a root `fsbench run` uses by default; noop runs write nothing to it.
  const scratchDir = process.env['FSBENCH_SCRATCH'] ?? '/var/lib/fsbench';
  const journal = await openJournal(scratchDir, (line) => process.stderr.write(`${line}\n`));
  const fingerprint = await collectFingerprint({}, journal.scratch);
  const o = { scratchDir, journal, fingerprint };
  const combos: Combo[] = [];
  try {
    for (const noise of NOISES) {
      for (const change of CHANGES) {
        let failed = 0;
        let inconclusive = 0;
        const detectable: number[] = [];
        const cvs: number[] = [];
        const measured: number[] = [];
        let flagged = 0;
        let runs = 0;
        for (let t = 0; t < trials; t++) {
          const base = await side('baseline', { spin: `${String(SPIN_MS)}ms`, jitter: noise, slowdown: 0 }, o);
          const cand = await side('candidate', { spin: `${String(SPIN_MS)}ms`, jitter: noise, slowdown: change }, o);
          for (const r of [...base, ...cand]) {
            runs++;
            if (r.state === 'ok' && (r.interference?.flagged.length ?? 0) > 0) flagged++;
          }
          const g = gate(await compareRunSets(base, cand, { metrics: ['opsPerSec'] }), {});
          const row = g.rows[0];
          if (!row) throw new Error('the gate judged no row');
          if (g.verdict === 'fail') failed++;
          if (g.verdict === 'inconclusive') inconclusive++;
          if (row.detectable !== null && Number.isFinite(row.detectable)) detectable.push(row.detectable);
          for (const s of [row.row.baseline, row.row.candidate]) if (s?.cv != null) cvs.push(s.cv);
          if (row.row.deltaPct !== null) measured.push(row.row.deltaPct);
        }
        const c: Combo = {
          noisePct: noise,
          changePct: change,
          trials,
          failed,
          rate: failed / trials,
          inconclusive,
          medianDetectable: detectable.length > 0 ? median(detectable) : null,
          medianCv: cvs.length > 0 ? median(cvs) : null,
          medianMeasuredChangePct: measured.length > 0 ? median(measured) : null,
          flaggedRuns: flagged,
          runs,
        };
        combos.push(c);
        process.stderr.write(
          `bench:calibration: jitter ${String(noise)}%, slowdown ${String(change)}%: gate failed ${String(failed)} of ${String(trials)} (${change === 0 ? 'false alarms' : 'detected'}), ${String(inconclusive)} inconclusive; CV ${((c.medianCv ?? 0) * 100).toFixed(1)}%, detectable ${((c.medianDetectable ?? 0) * 100).toFixed(1)}%, measured ${(c.medianMeasuredChangePct ?? 0).toFixed(1)}%\n`,
        );
      }
    }
  } finally {
    await journal.close();
  }
  const doc = {
    generatedAt: new Date().toISOString(),
    machine: { cpu: os.cpus()[0]?.model ?? 'unknown', cores: os.cpus().length, node: process.version },
    gate: { maxRegression: GATE_DEFAULTS.maxRegression, alpha: 0.05, power: GATE_DEFAULTS.power },
    runsPerSide: RUNS,
    warmupPerSide: WARMUP,
    spinMs: SPIN_MS,
    combos,
  };
  mkdirSync(path.dirname(OUT), { recursive: true });
  writeFileSync(OUT, `${JSON.stringify(doc, null, 2)}\n`);
  process.stdout.write(`written to ${OUT}\n`);
}

await main();
