/** The no-op workload: reports `value` after `sleep`, touching nothing on the host. */
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
    const value = Number(cell.params['value'] ?? 0) * (1 + jitter * (2 * Math.random() - 1));
    return {
      metrics: { value, elapsedMs: performance.now() - start },
      limits: null,
      targetFs: null,
    };
  },
};
