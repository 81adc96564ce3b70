/**
 * The regression gate (gate/) on comparisons of synthetic runs with planted changes: it fails on
 * a real regression, names the cell and metric, passes a same-machine rerun and a change within
 * the limit, and says when runs are too few to tell. Its JUnit, Bencher and
 * github-action-benchmark outputs are checked against those formats' shapes.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { compareRunSets } from '../compare/compare.js';
import type { Cell } from '../contract/matrix.js';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { compareRouter } from '../coordinator/routes/index.js';
import { errorHandler } from '../coordinator/http/index.js';
import { History } from '../coordinator/history/index.js';
import { storeResultSink, storeRunSource, Store } from '../coordinator/store/index.js';
import { gate } from '../gate/gate.js';
import { GateReportSchema } from '../gate/schema.js';
import { gateActionBenchmark, gateBencher, gateJunit } from '../gate/export.js';
import type { RunResult } from '../contract/result.js';
import { syntheticInterference, syntheticRuns } from './fixtures/synthetic.js';
import { cellOf, freshCli, runCli, runOnce, tempDir } from './helpers/local.js';

const MATRIX = { name: 'gate', workload: 'inotify' as const, repetitions: 10, warmup: 0, params: { files: [64, 128, 256] } };

function runs(seed: number, o: { effect?: (c: Cell) => number; repetitions?: number } = {}) {
  return syntheticRuns({
    matrix: { ...MATRIX, repetitions: o.repetitions ?? 10 },
    machine: { machine: 'ci-runner' },
    seed,
    noise: 0.03,
    ...(o.effect ? { effect: o.effect } : {}),
  });
}

async function gateOf(baseline: ReturnType<typeof runs>, candidate: ReturnType<typeof runs>, maxRegression = 0.05) {
  return gate(await compareRunSets(baseline, candidate, { metrics: ['eventsPerSec'] }), { maxRegression });
}

describe('gate', () => {
  it('passes a rerun of the same cells on the same machine, stating the smallest change it would have seen', async () => {
    const g = await gateOf(runs(1), runs(2));
    expect(g.rows).toHaveLength(3);
    expect(g.verdict).toBe('pass');
    expect(g.counts.regression).toBe(0);
    for (const r of g.rows) {
      expect(r.status).toBe('pass');
      // 3% noise and 10 runs a side: a change of about 4% or more would have been seen.
      expect(r.detectable).not.toBeNull();
      expect(r.detectable ?? 1).toBeLessThan(0.06);
      expect(r.reason).toMatch(/no change larger than \d+\.\d% would have gone unseen \(80% power\)/);
    }
  });

  it('fails on a 25% slowdown and names every cell and metric that regressed', async () => {
    const g = await gateOf(runs(1), runs(2, { effect: () => 0.75 }));
    expect(g.verdict).toBe('fail');
    expect(g.counts.regression).toBe(3);
    for (const r of g.rows) {
      expect(r.status).toBe('regression');
      expect(r.row.metric).toBe('eventsPerSec');
      expect(r.reason).toMatch(/^worse by 2[4-6]\.\d% \(limit 5\.0%\), p = .*CI of the ratio 0\.7\d*-0\.7\d*/);
    }
    const junit = gateJunit(g);
    expect(junit).toContain('<testsuites name="fsbench gate" tests="3" failures="3" errors="0" skipped="0">');
    for (const files of ['64', '128', '256']) expect(junit).toMatch(new RegExp(`<testcase name="files=${files} \\[ci-runner\\]" classname="fsbench\\.inotify\\.eventsPerSec">\\n\\s*<failure message="worse by`));
  });

  it('fails only the cell that regressed, and passes a significant change within the limit', async () => {
    const one = await gateOf(runs(1), runs(2, { effect: (c) => (c.params['files'] === 128 ? 0.8 : 1) }));
    expect(one.verdict).toBe('fail');
    expect(one.rows.filter((r) => r.status === 'regression').map((r) => r.row.label)).toEqual(['files=128']);
    // 3% slower against a 10% limit: the interval of the ratio stays well inside it.
    const small = await gateOf(runs(1), runs(2, { effect: () => 0.97 }), 0.1);
    expect(small.verdict).toBe('pass');
    expect(small.rows.every((r) => r.status === 'pass')).toBe(true);
    expect(small.rows.length).toBe(3);
    // A faster candidate is an improvement, not a failure.
    const faster = await gateOf(runs(1), runs(2, { effect: () => 1.3 }));
    expect(faster.verdict).toBe('pass');
    expect(faster.counts.improvement).toBe(3);
  });

  it('calls cells with too few runs to reach alpha inconclusive, and the gate too: never a silent pass', async () => {
    const g = await gateOf(runs(1, { repetitions: 3 }), runs(2, { repetitions: 3, effect: () => 0.5 }));
    expect(g.verdict).toBe('inconclusive');
    expect(g.counts).toEqual({ regression: 0, improvement: 0, pass: 0, inconclusive: 3 });
    for (const r of g.rows) {
      expect(r.detectable).toBe(Number.POSITIVE_INFINITY);
      expect(r.reason).toBe('3 vs 3 runs cannot reach p < 0.05: run more repetitions');
    }
    // In JUnit each is an error, which CI test reporters show red.
    expect(gateJunit(g)).toContain('<testsuites name="fsbench gate" tests="3" failures="0" errors="3" skipped="0">');
    // Accepted, the gate passes, and the cases are skipped rather than hidden.
    const accepted = gate(g.compare, { allowInconclusive: true });
    expect(accepted.verdict).toBe('pass');
    expect(accepted.counts.inconclusive).toBe(3);
    expect(gateJunit(accepted)).toContain('tests="3" failures="0" errors="0" skipped="3"');
    // One run a side has no spread at all: still too few, not a pass.
    const single = await gateOf(runs(1, { repetitions: 1 }), runs(2, { repetitions: 1 }));
    expect([single.verdict, single.counts.inconclusive]).toEqual(['inconclusive', 3]);
  });

  it('passes only what the runs rule out: a change within the limit whose interval reaches beyond it is inconclusive', async () => {
    // 8% slower at 3% noise and 10 runs: significant, within a 10% limit, but the interval reaches past 10%.
    const near = await gateOf(runs(1), runs(2, { effect: () => 0.92 }), 0.1);
    // These seeded runs give both kinds of row, so both checks below check something.
    expect(near.rows.map((r) => r.status)).toEqual(['inconclusive', 'pass', 'inconclusive']);
    for (const r of near.rows.filter((x) => x.status === 'inconclusive')) {
      expect(r.reason).toMatch(/^worse by \d+\.\d% \(p = .*\), within the limit of 10\.0%, but the ratio's 9\d% CI 0\.\d+-0\.\d+ allows \d+\.\d% worse, beyond the limit of 10\.0%/);
      expect(r.row.ci?.low ?? 1).toBeLessThan(0.9);
    }
    for (const r of near.rows.filter((x) => x.status === 'pass')) expect(r.row.ci?.low ?? 0).toBeGreaterThanOrEqual(0.9);
    expect(near.verdict).toBe('inconclusive');
    // Far noisier runs, no change: nothing significant, and nothing ruled out either.
    const noisy = (seed: number) => syntheticRuns({ matrix: MATRIX, machine: { machine: 'ci-runner' }, seed, noise: 0.3 });
    const wide = await gateOf(noisy(1), noisy(2), 0.05);
    expect(wide.verdict).toBe('inconclusive');
    expect(wide.rows.map((r) => r.status)).toEqual(['inconclusive', 'inconclusive', 'inconclusive']);
    for (const r of wide.rows) expect(r.reason).toMatch(/^not significant \(p = .*\), but the ratio's 9\d% CI/);
  });

  it('does not judge a baseline cell the candidate lacks, and refuses to gate on metrics with no better direction', async () => {
    const lacking = runs(2).filter((r) => r.params['files'] !== 256);
    const g = await gateOf(runs(1), lacking);
    expect(g.rows).toHaveLength(2);
    expect(g.counts.pass).toBe(2);
    expect(g.verdict).toBe('inconclusive');
    expect(gateJunit(g)).toMatch(/<testcase name="files=256" classname="fsbench\.eventsPerSec">\n\s*<error message="not judged: only in the baseline/);
    // `value` of the noop workload has no better direction: a gate on it could never fail.
    const noop = (seed: number) => syntheticRuns({ matrix: { name: 'n', workload: 'noop', repetitions: 10, params: { value: [1, 2] } }, machine: { machine: 'ci-runner' }, seed });
    await expect(compareRunSets(noop(1), noop(2), { metrics: ['value'] }).then((c) => gate(c))).rejects.toThrow(/nothing to gate on: value has no better direction; name a metric that has one with --metric/);
  });

  it('exports Bencher metric format and github-action-benchmark JSON in their published shapes', async () => {
    const g = await gateOf(runs(1), runs(2, { effect: () => 0.75 }));
    // https://bencher.dev/docs/reference/bencher-metric-format/
    const Bmf = z.record(z.string().min(1), z.record(z.string().min(1), z.object({ value: z.number(), lower_value: z.number().optional(), upper_value: z.number().optional() }).strict()));
    const bmf = Bmf.parse(JSON.parse(JSON.stringify(gateBencher(g))));
    expect(Object.keys(bmf)).toHaveLength(3);
    for (const measures of Object.values(bmf)) {
      const m = measures['eventsPerSec'];
      expect(m).toBeDefined();
      expect(m?.lower_value ?? 0).toBeLessThan(m?.upper_value ?? 0);
    }
    // github-action-benchmark's custom tools: [{ name, unit, value, range?, extra? }]
    const Entry = z.object({ name: z.string().min(1), unit: z.string().min(1), value: z.number(), range: z.string().optional(), extra: z.string().optional() }).strict();
    const bigger = z.array(Entry).parse(JSON.parse(JSON.stringify(gateActionBenchmark(g, 'bigger'))));
    expect(bigger).toHaveLength(3);
    expect(bigger[0]?.unit).toBe('events/s');
    expect(gateActionBenchmark(g, 'smaller')).toEqual([]);
  });
});

describe('GET /v1/gate', () => {
  it('judges two stored matrices as fsbench gate does: a 200 whose verdict is fail, naming the cell, in JSON and JUnit', async () => {
    const store = Store.open(':memory:');
    const sink = storeResultSink(store);
    const named = (name: string, rs: RunResult[]) => rs.map((r) => ({ ...r, matrix: name }));
    const [main] = sink.importRuns(named('gate-main', runs(1))).matrices;
    const [branch] = sink.importRuns(named('gate-branch', runs(3, { effect: (c) => (c.params['files'] === 256 ? 0.75 : 1) }))).matrices;
    const app = express();
    app.use(compareRouter({ source: storeRunSource(store) }));
    app.use(errorHandler(() => undefined));
    const server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const { port } = server.address() as AddressInfo;
      const url = `http://127.0.0.1:${String(port)}/v1/gate?baseline=${main?.id ?? ''}&candidate=${branch?.id ?? ''}&metric=eventsPerSec`;
      const res = await fetch(url);
      expect(res.status).toBe(200);
      const g = GateReportSchema.parse(await res.json());
      expect(g.verdict).toBe('fail');
      expect(g.rows.filter((r) => r.status === 'regression').map((r) => r.label)).toEqual(['files=256']);
      const junit = await (await fetch(`${url}&format=junit`)).text();
      expect(junit).toContain('failures="1"');
      const loose = GateReportSchema.parse(await (await fetch(`${url}&maxRegression=30%25`)).json());
      expect(loose.verdict).toBe('pass');

      // 1 run a side cannot be judged: verdict inconclusive, unless accepted.
      const [few] = sink.importRuns(named('gate-few', runs(4, { repetitions: 1 }))).matrices;
      const fewUrl = `http://127.0.0.1:${String(port)}/v1/gate?baseline=${main?.id ?? ''}&candidate=${few?.id ?? ''}&metric=eventsPerSec`;
      const unjudged = GateReportSchema.parse(await (await fetch(fewUrl)).json());
      expect([unjudged.verdict, unjudged.allowInconclusive, unjudged.counts.inconclusive]).toEqual(['inconclusive', false, 3]);
      const accepted = GateReportSchema.parse(await (await fetch(`${fewUrl}&allowInconclusive=true`)).json());
      expect([accepted.verdict, accepted.allowInconclusive, accepted.counts.inconclusive]).toEqual(['pass', true, 3]);
    } finally {
      server.close();
      store.close();
    }
  });
});

describe('the gate against a series', () => {
  const DAY = 24 * 3600 * 1000;
  /** Night `k` of the matrix `nightly` on the CI runner, with 5 runs a cell, started k days after the first. */
  const night = (k: number, effect: (c: Cell) => number) =>
    syntheticRuns({ matrix: { ...MATRIX, name: 'nightly', repetitions: 5 }, machine: { machine: 'ci-runner' }, seed: 200 + k, noise: 0.03, effect }).map((r) => ({
      ...r,
      startedAt: new Date(Date.parse(r.startedAt) + k * DAY).toISOString(),
      finishedAt: new Date(Date.parse(r.finishedAt) + k * DAY).toISOString(),
    }));

  it('gates the newest matrix against its history since the last change: history:NAME and latest:NAME, in GET /v1/gate and fsbench gate', async () => {
    const store = Store.open(':memory:');
    const sink = storeResultSink(store);
    // Everything got 30% faster from night 8 (a kernel upgrade, say): the older nights are not the baseline.
    const faster = (k: number) => (k >= 8 ? 1.3 : 1);
    for (let k = 0; k < 16; k++) sink.importRuns(night(k, () => faster(k)));
    const app = express();
    app.use(compareRouter({ source: storeRunSource(store), history: new History(store) }));
    app.use(errorHandler(() => undefined));
    const server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const base = `http://127.0.0.1:${String((server.address() as AddressInfo).port)}`;
      const gateOfSeries = async () => GateReportSchema.parse(await (await fetch(`${base}/v1/gate?baseline=history:nightly&candidate=latest:nightly&metric=eventsPerSec`)).json());
      const quiet = await gateOfSeries();
      // The newest night against nights 8-14: 7 matrices, 35 runs a cell, all after the step.
      expect(quiet.baseline.name).toBe('nightly since its last change (7 matrices)');
      expect(quiet.rows.map((r) => r.baseline?.n)).toEqual([35, 35, 35]);
      expect(quiet.verdict).toBe('pass');

      // Night 16 is 25% slower in one cell than the nights since the step (yet faster than before it).
      const [slow] = sink.importRuns(night(16, (c) => 1.3 * (c.params['files'] === 128 ? 0.75 : 1))).matrices;
      const g = await gateOfSeries();
      expect(g.candidate.name).toBe(`nightly (${slow?.id ?? ''})`);
      expect(g.verdict).toBe('fail');
      expect(g.rows.filter((r) => r.status === 'regression').map((r) => r.label)).toEqual(['files=128']);

      await freshCli();
      const cli = await runCli(['gate', 'history:nightly', 'latest:nightly', '--metric', 'eventsPerSec', '--format', 'junit', '--url', base]);
      expect(cli.code).toBe(6);
      expect(cli.stdout).toMatch(/<testcase name="files=128 \[ci-runner\]" classname="fsbench\.inotify\.eventsPerSec">\n\s*<failure message="worse by/);
      expect(cli.stderr).toMatch(/^fsbench: 1 regression: eventsPerSec files=128 \[REGRESSION\]$/m);
      const loose = await runCli(['gate', 'history:nightly', 'latest:nightly', '--metric', 'eventsPerSec', '--max-regression', '30%', '--url', base]);
      expect(loose.code).toBe(0);
      expect(loose.stdout).toMatch(/^gate: nightly since its last change \(8 matrices\) -> nightly \(\S+\): PASS$/m);
      const none = await runCli(['gate', 'history:weekly', 'latest:weekly', '--url', base]);
      expect([none.code, none.stderr]).toEqual([5, expect.stringMatching(/no finished matrix named weekly \[NOT_FOUND\]/)]);
    } finally {
      server.close();
      store.close();
    }
  }, 120_000);
});

describe('fsbench gate', () => {
  const dir = tempDir('fsbench-gate-');
  afterAll(() => {
    dir.remove();
  });
  const file = (name: string, runs: readonly RunResult[]) => {
    const p = path.join(dir.dir, name);
    writeFileSync(p, runs.map((r) => JSON.stringify(r)).join('\n') + '\n');
    return p;
  };

  it('exits 0 on a rerun and 6 on a 25% slowdown, naming the cell and metric in the table, Markdown and JUnit', async () => {
    await freshCli();
    const base = file('base.jsonl', runs(1));
    const same = file('same.jsonl', runs(2));
    const slow = file('slow.jsonl', runs(3, { effect: (c) => (c.params['files'] === 256 ? 0.75 : 1) }));
    const pass = await runCli(['gate', base, same, '--metric', 'eventsPerSec']);
    expect(pass.stderr).toBe('');
    expect(pass.code).toBe(0);
    expect(pass.stdout).toMatch(/^gate: .*base\.jsonl -> .*same\.jsonl: PASS$/m);

    const table = await runCli(['gate', base, slow, '--metric', 'eventsPerSec']);
    expect(table.code).toBe(6);
    expect(table.stdout).toMatch(/REGRESSION eventsPerSec files=256 \[ci-runner\]: worse by 2\d\.\d%/);
    expect(table.stderr).toMatch(/^fsbench: 1 regression: eventsPerSec files=256 \[REGRESSION\]$/m);
    const md = await runCli(['gate', base, slow, '--metric', 'eventsPerSec', '--format', 'md']);
    expect(md.code).toBe(6);
    expect(md.stdout).toMatch(/^\| regression \| eventsPerSec \| files=256 \|/m);
    const junit = path.join(dir.dir, 'gate.xml');
    const xml = await runCli(['gate', base, slow, '--metric', 'eventsPerSec', '--format', 'junit', '--out', junit]);
    expect(xml.code).toBe(6);
    expect(readFileSync(junit, 'utf8')).toMatch(/<testcase name="files=256 \[ci-runner\]" classname="fsbench\.inotify\.eventsPerSec">\n\s*<failure message="worse by/);

    const loose = await runCli(['gate', base, slow, '--metric', 'eventsPerSec', '--limit', 'eventsPerSec=30%']);
    expect(loose.code).toBe(0);
    const bad = await runCli(['gate', base, slow, '--max-regression', 'lots']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--max-regression lots is not a positive share such as 5% or 0\.05 \[CONFIG_INVALID\]/);
  }, 120_000);

  it('gates a real matrix: 10 vs 10 runs of the same code exit 0, of a candidate 30% slower exit 6 naming each cell in the table, Markdown and JUnit, and 3 vs 3 exit 7', async () => {
    await freshCli();
    // The noop workload's spin: real CPU work of a known cost, and slowdown makes each unit 30% dearer.
    const measure = async (name: string, slowdown: number, repetitions = 10) => {
      const matrix = path.join(dir.dir, `${name}.yaml`);
      writeFileSync(matrix, `name: spin\nworkload: noop\nrepetitions: ${String(repetitions)}\nwarmup: 1\nparams:\n  spin: 30ms\n  value: [1, 2]\n  slowdown: ${String(slowdown)}\n`);
      const out = path.join(dir.dir, `${name}.jsonl`);
      const r = await runCli(['run', matrix, '--out', out, '--no-progress', '--machine', 'ci-runner', '--scratch', path.join(dir.dir, 'scratch'), '--format', 'csv']);
      expect([name, r.code, r.stderr.split('\n').filter((l) => / error|failed/i.test(l))]).toEqual([name, 0, []]);
      return out;
    };
    const base = await measure('base', 0);
    const rerun = await measure('rerun', 0);
    const slow = await measure('slow', 30);
    // A shared machine's two sets minutes apart may differ by a few percent: the limit says how much passes.
    const pass = await runCli(['gate', base, rerun, '--metric', 'opsPerSec', '--max-regression', '10%']);
    expect([pass.code, pass.stderr], pass.stdout).toEqual([0, '']);
    expect(pass.stdout).toMatch(/: PASS$/m);
    expect(pass.stdout).toMatch(/^pass +opsPerSec +value=1 /m);

    const table = await runCli(['gate', base, slow, '--metric', 'opsPerSec', '--max-regression', '10%']);
    expect(table.code).toBe(6);
    for (const v of [1, 2]) expect(table.stdout).toMatch(new RegExp(`REGRESSION opsPerSec value=${String(v)} \\[ci-runner\\]: worse by \\d+\\.\\d%`));
    expect(table.stderr).toMatch(/^fsbench: 2 regressions: opsPerSec value=1; opsPerSec value=2 \[REGRESSION\]$/m);
    const md = await runCli(['gate', base, slow, '--metric', 'opsPerSec', '--max-regression', '10%', '--format', 'md']);
    expect(md.code).toBe(6);
    expect(md.stdout.match(/^\| regression \| opsPerSec \| value=\d \|/gm)).toHaveLength(2);
    const junit = await runCli(['gate', base, slow, '--metric', 'opsPerSec', '--max-regression', '10%', '--format', 'junit']);
    expect(junit.code).toBe(6);
    expect(junit.stdout.match(/<testcase name="value=\d \[ci-runner\]" classname="fsbench\.noop\.opsPerSec">\n\s*<failure message="worse by/g)).toHaveLength(2);

    // 3 against 3 runs, 30% slower: the test cannot reach p < 0.05, so the gate cannot judge.
    const few = await runCli(['gate', await measure('base3', 0, 3), await measure('slow3', 30, 3), '--metric', 'opsPerSec', '--max-regression', '10%', '--format', 'json']);
    expect(few.code).toBe(7);
    expect(few.stderr).toMatch(/no regression seen, but 2 cell-metrics could not be judged: opsPerSec value=1; opsPerSec value=2; the output says why for each .*\[INCONCLUSIVE\]$/m);
    const json = GateReportSchema.parse(JSON.parse(few.stdout));
    expect([json.verdict, json.counts.inconclusive, json.rows.map((r) => r.untestable)]).toEqual(['inconclusive', 2, [true, true]]);
  }, 180_000);

  it('with --exclude-flagged leaves the disturbed runs out, and says how many', async () => {
    await freshCli();
    const base = file('base2.jsonl', runs(1));
    // The candidate's slow runs are the disturbed ones: the machine, not the code.
    const disturbed = runs(4).map((r, i) => (i % 2 === 0 && r.state === 'ok' ? { ...r, metrics: { ...r.metrics, eventsPerSec: (r.metrics['eventsPerSec'] ?? 0) * 0.5 }, interference: syntheticInterference(0.8) } : r));
    const cand = file('disturbed.jsonl', disturbed);
    const kept = await runCli(['gate', base, cand, '--metric', 'eventsPerSec']);
    expect(kept.code).toBe(6);
    const out = await runCli(['gate', base, cand, '--metric', 'eventsPerSec', '--exclude-flagged']);
    expect(out.code).toBe(0);
    expect(out.stdout).toContain('runs flagged for interference left out: 0 of the baseline, 15 of the candidate');

    // Every candidate run disturbed: nothing is left to judge, and the gate says so instead of passing.
    const all = file('all-disturbed.jsonl', runs(5).map((r) => (r.state === 'ok' ? { ...r, interference: syntheticInterference(0.8) } : r)));
    const none = await runCli(['gate', base, all, '--metric', 'eventsPerSec', '--exclude-flagged']);
    expect([none.code, none.stdout]).toEqual([75, '']);
    expect(none.stderr).toMatch(/every run of the candidate \(30\) was flagged for interference and left out \(--exclude-flagged\): nothing to judge; .* \[TOO_DISTURBED\]$/m);
  }, 120_000);
});

describe('the example CI workflow', () => {
  it('runs only fsbench commands and flags that exist', async () => {
    await freshCli();
    const workflow = z
      .object({ jobs: z.record(z.string(), z.object({ steps: z.array(z.object({ run: z.string().optional() }).loose()) }).loose()) })
      .loose()
      .parse(parseYaml(readFileSync(path.join(import.meta.dirname, '..', 'examples', 'ci', 'github-actions-gate.yml'), 'utf8')));
    const commands = Object.values(workflow.jobs)
      .flatMap((j) => j.steps.flatMap((s) => (s.run ?? '').split('\n')))
      .map((line) => /(?:^|\s)fsbench\s+(\S+)(.*)$/.exec(line.trim()))
      .filter((m): m is RegExpExecArray => m !== null);
    expect(commands.map((m) => m[1])).toEqual(['run', 'gate', 'gate']);
    for (const [, command, rest] of commands) {
      const help = await runCli([command ?? '', '--help']);
      expect(help.code).toBe(0);
      for (const flag of (rest ?? '').match(/--[a-z-]+/g) ?? []) expect(help.stdout, `fsbench ${command ?? ''} ${flag}`).toContain(flag);
    }
  }, 60_000);
});

describe('the noop workload\'s spin, which calibrates the gate', () => {
  const scratch = tempDir('fsbench-spin-');
  afterAll(() => {
    scratch.remove();
  });

  it('reports a real rate, and slowdown lowers it by about the share asked, measured side by side', async () => {
    const rate = async (slowdown: number) => {
      const r = await runOnce(cellOf('noop', { spin: '40ms', slowdown }), scratch.dir);
      return r.state === 'ok' ? (r.metrics['opsPerSec'] ?? Number.NaN) : Number.NaN;
    };
    await rate(0); // the first run compiles the loop
    const ratios: number[] = [];
    for (let i = 0; i < 7; i++) ratios.push((await rate(20)) / (await rate(0)));
    const middle = ratios.sort((a, b) => a - b)[3] ?? Number.NaN;
    expect(middle).toBeGreaterThan(0.7);
    expect(middle).toBeLessThan(0.9);
    const plain = await runOnce(cellOf('noop', { value: 3 }), scratch.dir);
    expect(plain.state === 'ok' ? plain.metrics : null).toEqual({ value: 3, elapsedMs: expect.any(Number) as number, opsPerSec: null });
  });
});
