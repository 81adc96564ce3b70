/**
 * The wire protocol between the coordinator and its agents: queue names, job ids, the data a
 * run job carries and the report it completes with. Both sides import it, so the queue layout
 * is decided in one place.
 *
 * One job is one run (a cell, a repetition, a target). An agent completes the job with the
 * run's RunReport as its return value. BullMQ's completion script appends that value to the
 * queue's event stream (`<prefix>:<queue>:events`, event `completed`, the stream QueueEvents
 * reads) in the same atomic step that removes the job: the report is durable in Redis from the
 * moment the job is done, the agent sends nothing else, and runs finished while the coordinator
 * was down are read when it comes back. The coordinator reads the event streams from where its
 * database says it stopped (see collector.ts), so nothing is lost and nothing doubled.
 */
import { z } from 'zod';
import { Cell } from '../contract/matrix.js';
import { RunResultSansFingerprint } from '../contract/result.js';

/** The shared queue of runs placed `any`: whichever host is free takes the next one. */
export const ANY_TARGET = 'any';

/** Where a run goes: `any`, or one host (its boot id) for `all` and `{labels}` placements. */
export const Target = z.string().regex(/^[A-Za-z0-9._-]{1,64}$/);

/** BullMQ refuses ':' in queue names (it separates key parts), hence the dash. */
export function queueName(target: string): string {
  return target === ANY_TARGET ? 'any' : `host-${target}`;
}

/** An Ed25519 signature (64 bytes) in base64. */
export const JobSignature = z.string().regex(/^[A-Za-z0-9+/]{86}==$/, 'must be an Ed25519 signature in base64');

/** The BullMQ-qualified name of a target's queue (`<prefix>:<queue>`), as a job reports it (`queueQualifiedName`). */
export function qualifiedQueueName(prefix: string, target: string): string {
  return `${prefix}:${queueName(target)}`;
}

/**
 * What a run job asks for: what the coordinator signs and an agent runs. Besides the run, the
 * signature covers where the job may sit (its id and queue), when it is valid and a nonce, so a
 * saved job copied under another id, onto another host's queue, after its expiry or again after
 * it ran is refused by the agent (agent/admission.ts) rather than run.
 */
export const RunJob = z
  .object({
    matrixId: z.string().regex(/^[a-z0-9]{1,32}$/),
    cell: Cell,
    repetition: z.number().int().nonnegative(),
    /** Throw-away runs an agent makes first when its previous run was not of this cell. */
    warmup: z.number().int().min(0).max(100),
    target: Target,
    /** The job's id: always jobId(matrixId, cell.id, target, repetition). */
    id: z.string().max(256),
    /** The queue it was put on: qualifiedQueueName(prefix, target). */
    queue: z.string().max(256),
    /** When the coordinator signed it, and until when an agent may start it (ms since the epoch). */
    issuedAt: z.number().int().nonnegative(),
    expiresAt: z.number().int().nonnegative(),
    /** 16 random bytes (base64url): which issuance this is, remembered by the agent that ran it. */
    nonce: z.string().regex(/^[A-Za-z0-9_-]{22}$/),
  })
  .strict();
export type RunJob = z.infer<typeof RunJob>;

/**
 * A run job as it sits on a queue: the run and the coordinator's signature over it (see
 * signing.ts). The signature may be missing here so that an agent can tell an unsigned job
 * (JOB_UNSIGNED, someone else wrote to Redis) from one it cannot read (JOB_INVALID).
 */
export const QueuedRunJob = RunJob.extend({ signature: z.string().max(1000).optional() }).strict();
export type SignedRunJob = RunJob & { readonly signature: string };

/** Deterministic, so re-enqueueing after a crash adds nothing that is already queued. */
export function jobId(matrixId: string, cellId: string, target: string, repetition: number): string {
  return `${matrixId}.${cellId}.${target}.${repetition}`;
}

/** BullMQ names a job too; one name for every run keeps the queues uniform. */
export const RUN_JOB_NAME = 'run';

/**
 * Retries: a thrown error (an abandoned run) counts against `attempts`; a dead agent's run is
 * retried by the stalled-job check up to `maxStalledCount` times. Completed jobs are removed at
 * once (their report is in the queue's event stream); failed ones, which gave up, are kept until
 * the coordinator has stored them as failed runs.
 */
export function runJobOptions(maxAttempts: number): { attempts: number; removeOnComplete: true; removeOnFail: false } {
  return { attempts: maxAttempts, removeOnComplete: true, removeOnFail: false };
}

/**
 * How many entries a queue's event stream keeps before BullMQ trims the oldest. BullMQ's default
 * (10,000) would drop reports the coordinator has not read yet whenever it is down or slow for a
 * few thousand runs. A run makes a handful of events at most (waiting and completed, a few more
 * when retried), and no more runs can complete unread than were queued, so 10 per
 * queued run never trims a report. The coordinator trims what it has stored, so in normal
 * operation the streams stay short whatever this says.
 */
export function eventStreamLength(maxQueued: number): number {
  return Math.max(10_000, 10 * maxQueued);
}

/**
 * What a run job completes with: which run (from the job), its result (from the runner) and
 * its fingerprint by hash (see fingerprintsKey), which would otherwise be most of every report.
 * It names the job it answers (id and a hash of its signature) and the host that ran it, and is
 * authenticated by that host's agent key (SignedRunReport).
 */
export const RunReport = z
  .object({
    matrixId: RunJob.shape.matrixId,
    target: Target,
    cellId: z.string(),
    repetition: z.number().int().nonnegative(),
    /** How many times an agent started the run, this one included. */
    attempts: z.number().int().positive(),
    fingerprint: z.string().regex(/^[0-9a-f]{16}$/),
    result: RunResultSansFingerprint,
    jobId: RunJob.shape.id,
    /** SHA-256 (base64url) of the job's signature: which issuance of the run this answers. */
    jobSignature: z.string().regex(/^[A-Za-z0-9_-]{43}$/),
    hostId: Target,
  })
  .strict();
export type RunReport = z.infer<typeof RunReport>;

/**
 * A job's return value: the report as the exact JSON text that was authenticated (so no
 * re-serialisation can change the bytes), the agent key's fingerprint, and the HMAC under the
 * secret that key shares with the coordinator (queue/enrollment.ts).
 */
export const SignedRunReport = z
  .object({
    report: z.string().max(4 * 1024 * 1024),
    key: z.string().regex(/^SHA256:[A-Za-z0-9+/]{43}$/),
    mac: z.string().regex(/^[A-Za-z0-9_-]{43}$/),
  })
  .strict();
export type SignedRunReport = z.infer<typeof SignedRunReport>;
