/**
 * What tests ask of a coordinator over HTTP, as a client would: a read parsed by its schema, a
 * submission, and waiting for a state to be reached.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'vitest';
import { z } from 'zod';

/** GET `url`, which must answer 200, parsed by `schema`. */
export async function getJson<T>(url: string, schema: z.ZodType<T>): Promise<T> {
  const res = await fetch(url);
  expect(res.status).toBe(200);
  return schema.parse(await res.json());
}

/** POSTs a matrix to the coordinator at `base`, which must accept it; its id. */
export async function submitMatrix(base: string, matrix: unknown): Promise<string> {
  const res = await fetch(`${base}/v1/matrices`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(matrix) });
  expect(res.status).toBe(202);
  return z.object({ id: z.string() }).parse(await res.json()).id;
}

export interface UntilOptions {
  /** How long to wait in all (30 s). */
  readonly ms?: number;
  /** Between two probes (50 ms). */
  readonly everyMs?: number;
  /** Probe again after a probe throws (a service still starting), naming the last error on timeout (false). */
  readonly retryErrors?: boolean;
}

/** The first value `probe` returns other than undefined; an error naming `what` after `ms`. */
export async function until<T>(what: string, probe: () => Promise<T | undefined>, o: UntilOptions = {}): Promise<T> {
  const deadline = Date.now() + (o.ms ?? 30_000);
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (err) {
      if (o.retryErrors !== true) throw err;
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last instanceof Error ? `: ${last.message}` : ''}`);
    await sleep(o.everyMs ?? 50);
  }
}
