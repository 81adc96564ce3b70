/**
 * How many runs a cell gets and in which order: `repetitions: auto` stops a quiet cell once its
 * median is precise enough and runs a noisy one to the maximum, in `fsbench run` and through a
 * real coordinator and agent; `order` interleaves, keeps cells together or shuffles them with a
 * recorded seed. The noop workload's `jitter` makes a cell exactly as noisy as a test needs.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { expandMatrix, parseMatrix, type MatrixInput } from '../contract/matrix.js';
import type { RunResult } from '../contract/result.js';
import { runOrder } from '../contract/schedule.js';
import { CoordinatorClient } from '../cli/client.js';
import { collectFingerprint } from '../host/fingerprint.js';
import { buildReport } from '../report/build.js';
import { runMatrixLocally, type CellOutcome } from '../runner/local.js';
import { relativeHalfWidth } from '../stats/precision.js';
import { useCluster } from './helpers/cluster.js';
import { until } from './helpers/http.js';
import { tempDir } from './helpers/local.js';

const cluster = useCluster('schedule');

/** A quiet cell (the same value every run) and a noisy one (±50%). */
const ADAPTIVE: MatrixInput = {
  name: 'adaptive',
  workload: 'noop',
  warmup: 0,
  repetitions: 'auto',
  minRepetitions: 6,
  maxRepetitions: 12,
  targetPrecision: '2%',
  params: { value: 1000, jitter: [0, 50] },
};

async function runLocally(input: MatrixInput): Promise<{ runs: RunResult[]; outcomes: readonly CellOutcome[] }> {
  const matrix = parseMatrix(input);
  const scratch = tempDir('fsbench-schedule-');
  let outcomes: readonly CellOutcome[] = [];
  try {
    const runs = await runMatrixLocally({
      matrix,
      cells: expandMatrix(matrix),
      scratchDir: scratch.dir,
      fingerprint: await collectFingerprint(),
      signal: new AbortController().signal,
      onResult: () => undefined,
      onCellsDone: (o) => {
        outcomes = o;
      },
      log: () => undefined,
    });
    return { runs, outcomes };
  } finally {
    scratch.remove();
  }
}

const runsOf = (runs: readonly RunResult[], jitter: number) => runs.filter((r) => r.params['jitter'] === jitter);
const values = (runs: readonly RunResult[]) => runs.flatMap((r) => (r.state === 'ok' && typeof r.metrics['value'] === 'number' ? [r.metrics['value']] : []));

describe('repetitions: auto in fsbench run', () => {
  it('stops a quiet cell at the minimum once its median is precise, and runs a noisy one to the maximum', async () => {
    const { runs, outcomes } = await runLocally(ADAPTIVE);
    const quiet = runsOf(runs, 0);
    const noisy = runsOf(runs, 50);
    expect(quiet).toHaveLength(6);
    expect(noisy).toHaveLength(12);
    expect(relativeHalfWidth(values(quiet))).toBe(0);
    // ±50% uniform noise: 12 runs cannot pin the median to ±2%.
    expect(relativeHalfWidth(values(noisy))).toBeGreaterThan(0.02);
    expect(outcomes.map((o) => [o.cell.params['jitter'], o.verdict, o.runs])).toEqual([
      [0, 'reached', 6],
      [50, 'max', 12],
    ]);
    // Every run says how it was scheduled, and the report built from the runs alone says which cell got there.
    for (const r of runs) expect(r.state === 'ok' && r.info).toMatchObject({ order: 'interleaved', precisionMetric: 'value', precisionTarget: 0.02 });
    const notes = buildReport(runs, { title: 't' }).cells.map((c) => [c.params['jitter'], c.notes.filter((n) => n.includes('repetitions: auto'))]);
    expect(notes).toEqual([
      [0, ['the median of value is known to ±0.0% (95% CI) after 6 runs: within the ±2.0% asked for (repetitions: auto).']],
      [50, [expect.stringMatching(/^the median of value is known only to ±\d+(\.\d)?% \(95% CI\) after 12 runs: short of the ±2\.0% asked for \(repetitions: auto\)\.$/)]],
    ]);
  });

  it('is refused with a message naming each field that contradicts it', () => {
    expect(() => parseMatrix({ name: 'x', workload: 'noop', repetitions: 5, minRepetitions: 3 })).toThrow(/minRepetitions: applies only with repetitions: auto/);
    expect(() => parseMatrix({ name: 'x', workload: 'noop', repetitions: 'auto', minRepetitions: 20, maxRepetitions: 10 })).toThrow(/minRepetitions: 20 is more than maxRepetitions \(10\)/);
    expect(() => parseMatrix({ name: 'x', workload: 'noop', repetitions: 'auto', precisionMetric: 'nope' })).toThrow(/precisionMetric: nope is not a metric of workload noop/);
    expect(() => parseMatrix({ name: 'x', workload: 'noop', repetitions: 'auto', targetPrecision: '150%' })).toThrow(/targetPrecision/);
    expect(() => parseMatrix({ name: 'x', workload: 'noop', seed: 7 })).toThrow(/seed: applies only with order: shuffled \(order is interleaved\)/);
  });
});

describe('order in fsbench run', () => {
  const ORDERED: MatrixInput = { name: 'ordered', workload: 'noop', warmup: 1, repetitions: 3, params: { value: [1, 2, 3] } };
  /** The runs in the order fsbench run made them, by the position it records with each: every run has its own, 0 to n-1. */
  const sequence = (runs: readonly RunResult[]) => {
    const placed = runs.map((r) => ({ r, position: r.state === 'ok' ? r.info['position'] : undefined }));
    expect(placed.map((p) => p.position).sort((a, b) => Number(a) - Number(b))).toEqual(runs.map((_, i) => i));
    return placed.sort((a, b) => Number(a.position) - Number(b.position)).map(({ r }) => `${String(r.params['value'])}.${r.repetition}`);
  };

  it('interleaved (the default) makes repetition r of every cell before any cell’s r+1', async () => {
    const { runs } = await runLocally(ORDERED);
    expect(sequence(runs)).toEqual(['1.0', '2.0', '3.0', '1.1', '2.1', '3.1', '1.2', '2.2', '3.2']);
  });

  it('sequential makes every repetition of a cell before the next cell', async () => {
    const { runs } = await runLocally({ ...ORDERED, order: 'sequential' });
    expect(sequence(runs)).toEqual(['1.0', '1.1', '1.2', '2.0', '2.1', '2.2', '3.0', '3.1', '3.2']);
    for (const r of runs) expect(r.state === 'ok' && r.info['order']).toBe('sequential');
  });

  it('shuffled draws each round’s order from the seed, records it, and the same seed makes the same order', async () => {
    const cells = 8;
    const matrix: MatrixInput = { name: 'shuffled', workload: 'noop', warmup: 0, repetitions: 4, order: 'shuffled', seed: 12345, params: { value: [1, 2, 3, 4, 5, 6, 7, 8] } };
    const first = await runLocally(matrix);
    const second = await runLocally(matrix);
    expect(sequence(first.runs)).toEqual(sequence(second.runs));
    const expected = runOrder(cells, 4, 'shuffled', 12345).map((s) => `${s.cell + 1}.${s.repetition}`);
    expect(sequence(first.runs)).toEqual(expected);
    // Shuffled: not the matrix order in every round (8! orders; the identity in all 4 is all but impossible).
    expect(expected).not.toEqual(runOrder(cells, 4, 'interleaved').map((s) => `${s.cell + 1}.${s.repetition}`));
    // Each round still visits every cell once.
    for (let round = 0; round < 4; round++) {
      expect(expected.slice(round * cells, (round + 1) * cells).map((k) => k.split('.')[0]).sort()).toEqual(['1', '2', '3', '4', '5', '6', '7', '8']);
    }
    for (const r of first.runs) expect(r.state === 'ok' && r.info).toMatchObject({ order: 'shuffled', seed: 12345 });
    expect(sequence((await runLocally({ ...matrix, seed: 54321 })).runs)).not.toEqual(expected);
  });
});

const Detail = z
  .object({
    state: z.string(),
    runs: z.number(),
    order: z.string(),
    seed: z.number().optional(),
    precision: z
      .object({ metric: z.string(), target: z.number(), reached: z.number(), atMaximum: z.number(), measuring: z.number(), stopped: z.number(), imprecise: z.array(z.object({ runs: z.number() }).loose()) })
      .nullable(),
  })
  .loose();
const Runs = z.object({
  runs: z.array(
    z
      .object({ params: z.record(z.string(), z.unknown()), repetition: z.number(), startedAt: z.iso.datetime(), finishedAt: z.iso.datetime(), state: z.string(), info: z.record(z.string(), z.unknown()).optional() })
      .loose(),
  ),
});

describe('through a coordinator', () => {
  it('queues further runs of a noisy cell as its results arrive, stops a quiet one early, and finishes the matrix', async () => {
    const c = await cluster.coordinator();
    await cluster.agent(c.prefix, 'host-a', 'alpha');
    const client = new CoordinatorClient(c.url);
    const submitted = z.object({ id: z.string(), runs: z.number() }).loose().parse(await client.json('POST', '/v1/matrices', ADAPTIVE));
    // What the limits counted: the most the matrix can make.
    expect(submitted.runs).toBe(24);
    const detail = await until(
      'the adaptive matrix to finish',
      async () => {
        const d = Detail.parse(await client.json('GET', `/v1/matrices/${submitted.id}`));
        return d.state === 'done' ? d : undefined;
      },
      { ms: 60_000, everyMs: 100 },
    );
    const { runs } = Runs.parse(await client.json('GET', `/v1/matrices/${submitted.id}/results?format=json`));
    expect(runs.filter((r) => r.params['jitter'] === 0)).toHaveLength(6);
    expect(runs.filter((r) => r.params['jitter'] === 50)).toHaveLength(12);
    expect(runs.every((r) => r.state === 'ok')).toBe(true);
    // The coordinator records the schedule with each run, as fsbench run does.
    for (const r of runs) expect(r.info).toMatchObject({ order: 'interleaved', precisionMetric: 'value', precisionTarget: 0.02 });
    // The expected runs came down to what was made once the quiet cell stopped.
    expect(detail.runs).toBe(18);
    expect(detail.precision).toMatchObject({ metric: 'value', target: 0.02, reached: 1, atMaximum: 1, measuring: 0, stopped: 0 });
    expect(detail.precision?.imprecise.map((x) => x.runs)).toEqual([12]);
    // The coordinator's report says it per cell too (its runs' info is not aggregated: the spec says it).
    const Report = z.object({ report: z.object({ cells: z.array(z.object({ params: z.record(z.string(), z.unknown()), notes: z.array(z.string()) }).loose()) }).loose() }).loose();
    const { report } = Report.parse(await client.json('GET', `/v1/matrices/${submitted.id}/results?format=json&limit=1`));
    const verdicts = report.cells.map((cell) => [cell.params['jitter'], cell.notes.some((n) => n.includes('within the ±2.0% asked for')), cell.notes.some((n) => n.includes('short of the ±2.0% asked for'))]);
    expect(verdicts).toEqual([
      [0, true, false],
      [50, false, true],
    ]);
  });

  it('queues a sequential matrix cell after cell and an interleaved one round by round, as the one agent runs them', async () => {
    const c = await cluster.coordinator();
    const client = new CoordinatorClient(c.url);
    const base = { workload: 'noop', warmup: 0, repetitions: 2, params: { value: [1, 2, 3] } };
    // Submitted before any agent is live, so the queue holds the whole matrix when the agent starts.
    const seq = z.object({ id: z.string() }).loose().parse(await client.json('POST', '/v1/matrices', { ...base, name: 'seq', order: 'sequential' }));
    const inter = z.object({ id: z.string() }).loose().parse(await client.json('POST', '/v1/matrices', { ...base, name: 'inter' }));
    const shuffled = z.object({ id: z.string() }).loose().parse(await client.json('POST', '/v1/matrices', { ...base, name: 'shuf', order: 'shuffled' }));
    await cluster.agent(c.prefix, 'host-a', 'alpha');
    const order = async (id: string) => {
      await until(`matrix ${id}`, async () => (Detail.parse(await client.json('GET', `/v1/matrices/${id}`)).state === 'done' ? true : undefined), { ms: 30_000, everyMs: 100 });
      const { runs } = Runs.parse(await client.json('GET', `/v1/matrices/${id}/results?format=json`));
      // An agent's runs carry no schedule position (that is fsbench run's): the one agent made them
      // one after another, so their spans are disjoint and their times order them. Each run must
      // start strictly after the one before it ended, or the times would not tell the order at all.
      const spans = runs.map((r) => ({ r, start: Date.parse(r.startedAt), end: Date.parse(r.finishedAt) })).sort((a, b) => a.start - b.start);
      for (let i = 1; i < spans.length; i++) {
        const [prev, next] = [spans[i - 1], spans[i]];
        expect(next?.start, 'runs of one agent overlap or tie, so their order is not known').toBeGreaterThan(prev?.start ?? Infinity);
        expect(next?.start).toBeGreaterThanOrEqual(prev?.end ?? Infinity);
      }
      return spans.map(({ r }) => `${String(r.params['value'])}.${r.repetition}`);
    };
    expect(await order(seq.id)).toEqual(['1.0', '1.1', '2.0', '2.1', '3.0', '3.1']);
    expect(await order(inter.id)).toEqual(['1.0', '2.0', '3.0', '1.1', '2.1', '3.1']);
    // A shuffled matrix submitted without a seed is given one, recorded in the matrix.
    const detail = Detail.parse(await client.json('GET', `/v1/matrices/${shuffled.id}`));
    expect(detail.order).toBe('shuffled');
    expect(detail.seed).toEqual(expect.any(Number));
    const expected = runOrder(3, 2, 'shuffled', detail.seed).map((s) => `${s.cell + 1}.${s.repetition}`);
    expect(await order(shuffled.id)).toEqual(expected);
  });
});
