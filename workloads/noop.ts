/** The no-op workload: reports `value` after `sleep`, touching nothing on the host. */
import { setTimeout as sleep } from 'node:timers/promises';
import { FsbenchError } from '../contract/errors.js';
import type { WorkloadRunner } from './workload.js';

export const noopWorkload: WorkloadRunner = {
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
    return {
      metrics: { value: Number(cell.params['value'] ?? 0), elapsedMs: performance.now() - start },
      limits: null,
      targetFs: null,
    };
  },
};
