/**
 * `npm run bench:history`: what history costs as it grows. 1,000 nightly matrices of one name,
 * each 100 cells x 3 runs on 2 machines (600,000 runs), stored through the coordinator's own
 * Store into SQLite, then:
 * - the first query, which summarises every finished matrix once (aggregating all their runs);
 * - later queries: the first page (50 series with their points and change points), one series by
 *   its cell's parameters, and the last page, each the median of 5;
 * each beside a bare scan of one matrix's rows in the same run. Results go to
 * bench/results/history.json.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expandMatrix, parseMatrix } from '../contract/matrix.js';
import { History } from '../coordinator/history/index.js';
import { Store, type StoredRun } from '../coordinator/store/index.js';
import { median } from '../stats/summary.js';
import { syntheticRunStream } from '../tests/fixtures/synthetic.js';

const HERE = fileURLToPath(import.meta.url);
const OUT = path.join(path.dirname(HERE), '..', '..', 'bench', 'results', 'history.json');
const DAY = 24 * 3600 * 1000;

function timed<T>(f: () => T): { ms: number; value: T } {
  const t = performance.now();
  const value = f();
  return { ms: performance.now() - t, value };
}

function main(): void {
  const matrices = Number(process.env['BENCH_MATRICES'] ?? '1000');
  const machines = ['box-a', 'box-b'];
  const spec = parseMatrix({ name: 'nightly', workload: 'inotify', repetitions: 3, warmup: 0, params: { files: Array.from({ length: 10 }, (_, i) => 64 * (i + 1)), writers: Array.from({ length: 10 }, (_, i) => i + 1) } });
  const cells = expandMatrix(spec);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'fsbench-bench-history-'));
  try {
    const store = Store.open(dir);
    const stored = timed(() => {
      for (let k = 0; k < matrices; k++) {
        const id = `night-${String(k).padStart(5, '0')}`;
        store.createMatrix({ id, spec, targets: machines.map((m) => ({ target: m, machine: m })), cells, expectedRuns: cells.length * 3 * machines.length, estimatedMs: 0 });
        store.markEnqueued(id);
        const batch: StoredRun[] = [];
        for (const [i, machine] of machines.entries()) {
          for (const result of syntheticRunStream(cells, 3, { matrixId: id, machine: { machine }, seed: k * 2 + i + 1, noise: 0.02 })) {
            const startedAt = new Date(Date.parse(result.startedAt) + k * DAY).toISOString();
            batch.push({ kind: 'result', matrixId: id, target: machine, result: { ...result, startedAt, finishedAt: startedAt }, attempts: 1 });
          }
        }
        store.storeRuns(batch);
        if ((k + 1) % 100 === 0) process.stderr.write(`bench:history: stored ${String(k + 1)} matrices\n`);
      }
      return matrices * cells.length * 3 * machines.length;
    });
    const history = new History(store);
    const first = timed(() => history.series({ name: 'nightly', limit: 50 }));
    const scan = () => timed(() => [...store.iterateRuns('night-00000')].length).ms;
    const again = (f: () => unknown) => median(Array.from({ length: 5 }, () => timed(f).ms));
    const page = again(() => history.series({ name: 'nightly', limit: 50 }));
    const one = again(() => history.series({ name: 'nightly', metric: 'eventsPerSec', machine: 'box-a', params: { files: 320, writers: 4 } }));
    const seriesCount = (() => {
      let n = 0;
      let after: string | undefined;
      for (;;) {
        const p = history.series({ name: 'nightly', limit: 500, ...(after === undefined ? {} : { after }) });
        n += p.series.length;
        if (p.next === null) return n;
        after = p.next;
      }
    })();
    const scanMs = median(Array.from({ length: 5 }, scan));
    const doc = {
      generatedAt: new Date().toISOString(),
      machine: { cpu: os.cpus()[0]?.model ?? 'unknown', cores: os.cpus().length, node: process.version },
      matrices,
      cellsPerMatrix: cells.length,
      machines: machines.length,
      runs: stored.value,
      series: seriesCount,
      storeMs: stored.ms,
      firstQueryMs: first.ms,
      pageOf50Ms: page,
      oneSeriesMs: one,
      pointsPerSeries: first.value.series[0]?.points.length ?? 0,
      scanOfOneMatrixMs: scanMs,
    };
    store.close();
    mkdirSync(path.dirname(OUT), { recursive: true });
    writeFileSync(OUT, `${JSON.stringify(doc, null, 2)}\n`);
    process.stdout.write(`${JSON.stringify(doc, null, 2)}\nwritten to ${OUT}\n`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main();
