/**
 * Submitting a matrix, atomic from the client's view: a submission is refused whole, or stored
 * and every run queued. One at a time, so two submissions cannot both pass the queue limit
 * (FSBENCH_MAX_QUEUED) on the same count of waiting runs. One that fails after it stored the
 * matrix (Redis too slow: 503) deletes it and takes back every job it queued, including those
 * the enqueue adds after the answer went out; a client that retries with the same
 * `Idempotency-Key` gets the first answer instead of a second matrix.
 */
import { createHash, randomBytes } from 'node:crypto';
import { FsbenchError, messageOf } from '../../contract/errors.js';
import { expandMatrix, initialRepetitions, maxRepetitions, parseMatrix } from '../../contract/matrix.js';
import { newSeed } from '../../contract/schedule.js';
import { formatDuration } from '../../contract/units.js';
import { ANY_TARGET } from '../../queue/jobs.js';
import { liveAgents, type AgentStatus } from '../../queue/registry.js';
import type { Log } from '../../log/index.js';
import { enqueueRequest, resolveTargets, type EnqueueRequest } from './dispatch.js';
import { planMatrix } from './estimate.js';
import type { Enrollment } from '../enrollment/index.js';
import { withDeadline } from '../http/index.js';
import type { Submitted } from './answers.js';
import type { CoordinatorParts } from './parts.js';
import { summaryOf } from './progress.js';

/** How long an answer is kept for a retry with the same Idempotency-Key. */
const IDEMPOTENCY_KEEP_MS = 24 * 3_600_000;
/** Printable ASCII without spaces, as clients generate them (UUIDs, random strings). */
const KEY = /^[\x21-\x7e]{1,200}$/;

export interface SubmitAnswer {
  readonly status: number;
  readonly location: string;
  readonly body: Submitted;
}

export interface Limits {
  readonly maxBody: number;
  readonly maxRuns: number;
  readonly maxDuration: number;
  readonly maxQueued: number;
  /** Results requests answered at once (FSBENCH_MAX_DOWNLOADS); the settings table's default when omitted. */
  readonly maxDownloads?: number | undefined;
  /** Event streams open at once (FSBENCH_MAX_STREAMS); the settings table's default when omitted. */
  readonly maxStreams?: number | undefined;
}

export interface SubmitDeps extends CoordinatorParts {
  readonly limits: Limits;
  /** Hosts with an enrolled agent key (enrollment/); every live host counts when omitted. */
  readonly enrollment?: Pick<Enrollment, 'hostEnrolled' | 'sync'> | undefined;
  /** `fields` are for log pipelines (see log/index.ts). */
  readonly log: Log;
}

export class Submissions {
  /** The submission in progress: the next waits for it. */
  private tail: Promise<unknown> = Promise.resolve();
  /** Submissions under way by Idempotency-Key, for a retry that arrives before the first answer. */
  private readonly inflight = new Map<string, { hash: string; answer: Promise<SubmitAnswer> }>();
  /** Enqueueing in progress per matrix, so that a cancel waits for it before removing jobs. */
  readonly enqueueing = new Map<string, Promise<unknown>>();

  constructor(private readonly d: SubmitDeps) {}

  /** Validates `key` (the Idempotency-Key header); undefined when none was sent. */
  static key(header: string | undefined): string | undefined {
    if (header === undefined) return undefined;
    if (!KEY.test(header)) throw new FsbenchError('BODY_INVALID', 'the Idempotency-Key header must be 1-200 visible ASCII characters');
    return header;
  }

  async submit(input: unknown, key: string | undefined): Promise<SubmitAnswer> {
    if (key === undefined) return this.serialized(input);
    // The same key with another matrix is a client bug, not a retry.
    const hash = createHash('sha256').update(JSON.stringify(input)).digest('hex');
    const conflict = () =>
      new FsbenchError('CONFLICT', `the Idempotency-Key ${key} was used for another matrix: send a new key with each new submission`);
    const prior = this.d.store.answerFor(key);
    if (prior) {
      if (prior.requestHash !== hash) throw conflict();
      return { status: prior.status, ...(JSON.parse(prior.answer) as { location: string; body: Submitted }) };
    }
    const running = this.inflight.get(key);
    if (running) {
      if (running.hash !== hash) throw conflict();
      return running.answer;
    }
    const answer = this.serialized(input).then((a) => {
      // Only an accepted submission is kept: after a refusal or a 503 a retry should try again.
      this.d.store.rememberAnswer(key, hash, a.status, JSON.stringify({ location: a.location, body: a.body }), IDEMPOTENCY_KEEP_MS);
      return a;
    });
    this.inflight.set(key, { hash, answer });
    try {
      return await answer;
    } finally {
      this.inflight.delete(key);
    }
  }

  private serialized(input: unknown): Promise<SubmitAnswer> {
    const run = this.tail.then(() => this.once(input));
    this.tail = run.catch(() => undefined);
    return run;
  }

  /**
   * The live agents of hosts with an enrolled key: a registry entry is a claim anyone with Redis
   * can write. A host enrolled a moment ago (not synced yet) is looked for once more.
   */
  private async enrolledAgents(): Promise<AgentStatus[]> {
    const live = await withDeadline(liveAgents(this.d.redis, this.d.prefix), 'reading the live agents');
    const { enrollment } = this.d;
    if (!enrollment) return live;
    if (live.some((a) => !enrollment.hostEnrolled(a.hostId))) await withDeadline(enrollment.sync(), 'reading the agent keys');
    return live.filter((a) => enrollment.hostEnrolled(a.hostId));
  }

  private async once(input: unknown): Promise<SubmitAnswer> {
    const { store, dispatcher, limits } = this.d;
    const parsed = parseMatrix(input);
    // A shuffled order is recorded with its seed, so that it can be made again.
    const matrix = parsed.order === 'shuffled' && parsed.seed === undefined ? { ...parsed, seed: newSeed() } : parsed;
    const cells = expandMatrix(matrix);
    const agents = await this.enrolledAgents();
    const targets = resolveTargets(matrix.placement, agents);
    const any = targets[0]?.target === ANY_TARGET;
    // Under `repetitions: auto` the limits count the most runs the matrix can make.
    const plan = planMatrix(cells, {
      repetitions: maxRepetitions(matrix),
      warmup: matrix.warmup,
      any,
      targets: targets.length,
      liveHosts: new Set(agents.map((a) => a.hostId)).size,
    });
    if (plan.total > limits.maxRuns) {
      throw new FsbenchError(
        'MATRIX_TOO_LARGE',
        `the matrix asks for ${plan.total} runs (${plan.measured} measured: ${cells.length} cells x ${matrix.repetitions === 'auto' ? `up to ${maxRepetitions(matrix)}` : matrix.repetitions} repetitions x ${any ? 'any host' : `${targets.length} hosts`}; and up to ${plan.warmups} warmups, once per cell and host), more than this coordinator's limit of ${limits.maxRuns} (FSBENCH_MAX_RUNS)`,
      );
    }
    if (plan.estimatedMs > limits.maxDuration) {
      throw new FsbenchError(
        'MATRIX_TOO_LONG',
        `the matrix would take about ${formatDuration(plan.estimatedMs)}, more than this coordinator's limit of ${formatDuration(limits.maxDuration)} (FSBENCH_MAX_DURATION): split it or shorten its runs`,
      );
    }
    const waiting = await withDeadline(dispatcher.waiting([ANY_TARGET, ...targets.map((t) => t.target)]), 'counting the queued runs');
    const queued = (plan.measured / maxRepetitions(matrix)) * initialRepetitions(matrix);
    if (waiting + queued > limits.maxQueued) {
      throw new FsbenchError(
        'QUEUE_FULL',
        `${waiting} runs are waiting and this matrix adds ${queued}, more than the limit of ${limits.maxQueued} (FSBENCH_MAX_QUEUED): try again later`,
        [],
        { 'Retry-After': '60' },
      );
    }
    const id = randomBytes(8).toString('hex');
    const planned = store.createMatrix({ id, spec: matrix, targets, cells, expectedRuns: plan.measured, estimatedMs: plan.estimatedMs });
    const request: EnqueueRequest = enqueueRequest(id, matrix, cells, targets, planned);
    let abandoned = false;
    const enqueue = dispatcher.enqueue({ ...request, stillWanted: () => !abandoned && store.getMatrix(id)?.state !== 'cancelled' });
    this.enqueueing.set(id, enqueue);
    try {
      await withDeadline(enqueue, 'enqueueing the runs');
      store.markEnqueued(id);
    } catch (err) {
      // The client hears 503 and may retry: leave no matrix and, once the enqueue has stopped
      // (at its next chunk), no job of this one behind.
      abandoned = true;
      store.deleteMatrix(id);
      void enqueue
        .catch(() => undefined)
        .then(() => dispatcher.cancel(request))
        .then((removed) => {
          this.d.log(`matrix ${id} (${matrix.name}) refused while enqueueing: its ${removed} queued runs were taken back`, { event: 'matrix.rolledBack', matrixId: id, removedRuns: removed });
        })
        .catch((e: unknown) => {
          this.d.log(`matrix ${id}: taking back its queued runs failed (${messageOf(e)}); agents will find no matrix for them`);
        });
      throw err;
    } finally {
      this.enqueueing.delete(id);
    }
    const m = store.getMatrix(id);
    if (!m) throw new FsbenchError('INTERNAL', `matrix ${id} vanished while it was submitted`);
    this.d.log(`matrix ${id} (${matrix.name}): ${cells.length} cells, ${plan.measured} runs and up to ${plan.warmups} warmups on ${targets.map((t) => t.machine ?? t.target).join(', ')}`, {
      event: 'matrix.submitted',
      matrixId: id,
      matrixName: matrix.name,
      cells: cells.length,
      runs: plan.measured,
      warmups: plan.warmups,
    });
    return {
      status: 202,
      location: `/v1/matrices/${id}`,
      body: {
        ...summaryOf(m),
        estimatedDurationMs: plan.estimatedMs,
        estimatedDuration: formatDuration(plan.estimatedMs),
        warmups: plan.warmups,
        ...(agents.length === 0 ? { warnings: ['no agent is live: the runs wait in the queue until one starts'] } : {}),
      },
    };
  }
}
