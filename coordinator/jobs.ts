/**
 * The wire protocol between the coordinator and its agents: queue names, job ids and the data a
 * run job carries. Both sides import it, so the queue layout is decided in one place.
 *
 * One job is one run (a cell, a repetition, a target). An agent appends the run's RunResult to
 * the results stream (one per installation) *before* it completes the job, and completed jobs
 * are removed at once: the stream entry is the result, durable in Redis until the coordinator
 * has stored it, which is why agents never need HTTP and why runs finished while the
 * coordinator was down are not lost. A crash between the two leaves the job to be retried, and
 * the second report of the run is ignored when stored.
 */
import { z } from 'zod';
import { Cell } from '../contract/matrix.js';
import { RunResult } from '../contract/result.js';
import { redisKey } from './redis.js';

/** The shared queue of runs placed `any`: whichever host is free takes the next one. */
export const ANY_TARGET = 'any';

/** Where a run goes: `any`, or one host (its boot id) for `all` and `{labels}` placements. */
export const Target = z.string().regex(/^[A-Za-z0-9._-]{1,64}$/);

/** BullMQ refuses ':' in queue names (it separates key parts), hence the dash. */
export function queueName(target: string): string {
  return target === ANY_TARGET ? 'any' : `host-${target}`;
}

export const RunJob = z
  .object({
    matrixId: z.string().regex(/^[a-z0-9]{1,32}$/),
    cell: Cell,
    repetition: z.number().int().nonnegative(),
    /** Throw-away runs an agent makes first when its previous run was not of this cell. */
    warmup: z.number().int().min(0).max(100),
    target: Target,
  })
  .strict();
export type RunJob = z.infer<typeof RunJob>;

/** Deterministic, so re-enqueueing after a crash adds nothing that is already queued. */
export function jobId(matrixId: string, cellId: string, target: string, repetition: number): string {
  return `${matrixId}.${cellId}.${target}.${repetition}`;
}

/** BullMQ names a job too; one name for every run keeps the queues uniform. */
export const RUN_JOB_NAME = 'run';

/**
 * Retries: a thrown error (an abandoned run) counts against `attempts`; a dead agent's run is
 * retried by the stalled-job check up to `maxStalledCount` times. Completed jobs are removed at
 * once (their result is in the results stream); failed ones, which gave up, are kept until the
 * coordinator has stored them as failed runs.
 */
export function runJobOptions(maxAttempts: number): { attempts: number; removeOnComplete: true; removeOnFail: false } {
  return { attempts: maxAttempts, removeOnComplete: true, removeOnFail: false };
}

/** The Redis stream agents append results to and the coordinator drains. */
export function resultsStream(prefix: string): string {
  return redisKey(prefix, 'run-results');
}

/** The one field of a results stream entry: a RunReport as JSON. */
export const REPORT_FIELD = 'run';

/** A results stream entry: which run (from the job) and its result (from the runner). */
export const RunReport = z
  .object({
    matrixId: RunJob.shape.matrixId,
    target: Target,
    cellId: z.string(),
    repetition: z.number().int().nonnegative(),
    /** How many times an agent started the run, this one included. */
    attempts: z.number().int().positive(),
    result: RunResult,
  })
  .strict();
export type RunReport = z.infer<typeof RunReport>;
