/**
 * `npm test`: the test files in their lanes (tests/lanes.ts). The host lane and the
 * beside lane run at the same time, each one file at a time; then the alone lane, on a machine
 * nothing else of the suite uses. Each lane is a vitest run of its own (vitest.config.ts, with
 * FSBENCH_TEST_LANE); their lines are printed as they come, each behind its lane's name, and the
 * run ends with the one plain line CI reads, `N passed, N failed`, added up over the lanes.
 *
 * Arguments are handed to every lane's vitest (`npm test -- --bail 1`). The browser code is
 * bundled once here, before the lanes, rather than by each lane at once into the same files, and
 * the checks that need no test, `eslint .` and the dashboard's type check, run beside the first
 * two lanes (their problems fail the run like a failed test).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { bundleBrowserCode } from './bundle.js';

/** The checkout's root, from dist/scripts/. */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const VITEST = path.join(ROOT, 'node_modules', 'vitest', 'vitest.mjs');
const ESLINT = path.join(ROOT, 'node_modules', 'eslint', 'bin', 'eslint.js');
const TSC = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

/** The checks beside the lanes: a minute of one core that the tests would wait on otherwise. */
const CHECKS: readonly { name: string; argv: readonly string[] }[] = [
  { name: 'lint', argv: [ESLINT, '.'] },
  { name: 'dashboard-types', argv: [TSC, '-p', 'dashboard'] },
];

/** What tests/summary-reporter.ts writes for a lane. */
const Summary = z.object({ passed: z.number(), failed: z.number(), skipped: z.number(), outside: z.array(z.string()) });
type Summary = z.infer<typeof Summary>;

interface LaneResult {
  lane: string;
  code: number | null;
  seconds: number;
  summary: Summary | undefined;
}

const children = new Set<ReturnType<typeof spawn>>();
const scratch = mkdtempSync(path.join(os.tmpdir(), 'fsbench-lanes-'));

/** Runs `argv` under node, printing its lines behind `[tag]`; resolves with its exit code. */
function runTagged(tag: string, argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<number | null> {
  const child = spawn(process.execPath, argv, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  for (const [from, to] of [[child.stdout, process.stdout], [child.stderr, process.stderr]] as const) {
    createInterface({ input: from, crlfDelay: Infinity }).on('line', (line) => to.write(`[${tag}] ${line}\n`));
  }
  return new Promise((resolve) => {
    child.on('close', (code) => {
      children.delete(child);
      resolve(code);
    });
  });
}

/** Runs one lane's vitest, printing its lines behind `[lane]`. */
function runLane(lane: string, args: readonly string[]): Promise<LaneResult> {
  const summaryFile = path.join(scratch, `${lane}.json`);
  const started = Date.now();
  const env = { ...process.env, FSBENCH_TEST_LANE: lane, FSBENCH_TESTS_BUNDLED: '1', FSBENCH_TEST_SUMMARY: summaryFile };
  return runTagged(lane, [VITEST, 'run', ...args], env).then((code) => {
    let summary: Summary | undefined;
    try {
      summary = Summary.parse(JSON.parse(readFileSync(summaryFile, 'utf8')));
    } catch {
      summary = undefined;
    }
    return { lane, code, seconds: (Date.now() - started) / 1000, summary };
  });
}

/** Stops every lane when the runner is stopped, so that no test process outlives it. */
function forward(signal: NodeJS.Signals): void {
  process.on(signal, () => {
    for (const c of children) c.kill(signal);
    process.exitCode = 130;
  });
}

async function main(): Promise<number> {
  forward('SIGINT');
  forward('SIGTERM');
  // Files or filters named on the command line leave some lanes without a file: not a failure then.
  const args = process.argv.length > 2 ? [...process.argv.slice(2), '--passWithNoTests'] : [];
  await bundleBrowserCode();
  const checks = Promise.all(CHECKS.map((c) => runTagged(c.name, c.argv).then((code) => ({ ...c, code }))));
  const results = await Promise.all([runLane('host', args), runLane('beside', args)]);
  results.push(await runLane('alone', args));

  let passed = 0;
  let failed = 0;
  let skipped = 0;
  const recap: string[] = [];
  for (const c of await checks) {
    if (c.code === 0) continue;
    failed++;
    recap.push(`${c.name} found problems (exit ${String(c.code)}): see the [${c.name}] lines`);
  }
  for (const r of results) {
    process.stdout.write(`lane ${r.lane}: ${r.summary ? `${String(r.summary.passed)} passed, ${String(r.summary.failed)} failed` : 'no summary'}, ${r.seconds.toFixed(0)} s\n`);
    if (r.summary === undefined) {
      // A lane that ended without its summary (killed, or vitest failing before any file) failed.
      failed++;
      recap.push(`the ${r.lane} lane ended (exit ${String(r.code)}) without a summary`);
      continue;
    }
    passed += r.summary.passed;
    failed += r.summary.failed;
    skipped += r.summary.skipped;
    recap.push(...r.summary.outside.map((o) => `[${r.lane}] ${o}`));
    if (r.code !== 0 && r.summary.failed === 0) {
      failed++;
      recap.push(`the ${r.lane} lane exited ${String(r.code)}`);
    }
  }
  // The summary reporter counts a failure outside any test in its `failed`; these lines only name them again.
  const lines = recap.map((p) => `failed outside a test: ${p}\n`).join('');
  process.stdout.write(`\n${lines}${String(passed)} passed, ${String(failed)} failed${skipped > 0 ? `, ${String(skipped)} skipped` : ''}\n`);
  return failed > 0 ? 1 : 0;
}

main()
  .then((code) => {
    process.exitCode = process.exitCode ?? code;
  })
  .catch((err: unknown) => {
    process.stderr.write(`npm test: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  })
  .finally(() => {
    rmSync(scratch, { recursive: true, force: true });
  });
