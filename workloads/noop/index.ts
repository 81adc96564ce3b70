/** The no-op workload: reports `value` after `sleep` and the rate of `spin`'s CPU work, touching nothing on the host. */
import { setTimeout as sleep } from 'node:timers/promises';
import { FsbenchError } from '../../contract/errors.js';
import type { WorkloadSlice } from '../workload.js';

export const noopWorkload: WorkloadSlice = {
  // It touches nothing on the host.
  hostNeeds: () => [],
  async run(cell, ctx) {
    const start = performance.now();
    const ms = Number(cell.params['sleep'] ?? 0);
    if (ms > 0) {
      try {
        await sleep(ms, undefined, { signal: ctx.signal });
      } catch {
        throw new FsbenchError('CANCELLED', 'the run was cancelled');
      }
    }
    const jitter = Number(cell.params['jitter'] ?? 0) / 100;
    const noise = () => 1 + jitter * (2 * Math.random() - 1);
    const value = Number(cell.params['value'] ?? 0) * noise();
    const spinMs = Number(cell.params['spin'] ?? 0);
    const ops = spinMs > 0 ? spin(spinMs, Number(cell.params['slowdown'] ?? 0) / 100, ctx.signal) * noise() : null;
    return {
      metrics: { value, elapsedMs: performance.now() - start, opsPerSec: ops },
      limits: null,
      targetFs: null,
    };
  },
};

/** The unit of work: a fixed number of integer multiply-adds. */
const UNIT = 2000;

/**
 * Repeats units of work for `ms` milliseconds and returns units per second; with `slowdown` s
 * each unit does 1 / (1 - s) times the work, so the rate drops by s. Checks the clock and the
 * abort every 64 units.
 */
function spin(ms: number, slowdown: number, signal: AbortSignal): number {
  const steps = Math.round(UNIT / (1 - slowdown));
  const start = performance.now();
  let units = 0;
  let x = 1;
  for (;;) {
    for (let u = 0; u < 64; u++) {
      for (let i = 0; i < steps; i++) x = (Math.imul(x, 1103515245) + 12345) | 0;
      units++;
    }
    const elapsed = performance.now() - start;
    if (signal.aborted) throw new FsbenchError('CANCELLED', 'the run was cancelled');
    if (elapsed >= ms) {
      // The result is read, so the optimiser cannot drop the work that made it.
      if (x === 0x7fffffff) units++;
      return (units / elapsed) * 1000;
    }
  }
}
