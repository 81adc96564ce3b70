/**
 * What an agent does with one run job: parse it, take the host lock when the workload measures
 * the kernel, warm the cell up once per host (before the first of its repetitions this host
 * runs), run it through the same `runCell` as `fsbench run`, and complete the job with the run's
 * report (see queue/jobs.ts for where BullMQ puts it).
 *
 * A run that fails in the workload is a `failed` result, reported like any other: final, never
 * retried. A run this agent abandons (stopping, or its host lock lost) throws instead, so BullMQ
 * retries it, a bounded number of times.
 */
import { readdir } from 'node:fs/promises';
import type { Job } from 'bullmq';
import { UnrecoverableError } from 'bullmq';
import { errorLine } from '../contract/errors.js';
import { fingerprintHash, type MachineFingerprint } from '../contract/fingerprint.js';
import type { RunResult } from '../contract/result.js';
import { WORKLOADS } from '../contract/workloads/index.js';
import type { InterferenceThresholds } from '../contract/interference.js';
import type { HostBudget } from '../runner/host-budget.js';
import { runCell } from '../runner/run-cell.js';
import type { Journal } from '../host/journal.js';
import { QueuedRunJob, type RunJob, type RunReport, type SignedRunReport } from '../queue/jobs.js';
import { signatureDigest, type JobVerifier } from '../queue/signing.js';
import { reportMac } from '../queue/enrollment.js';
import type { Admission } from './admission.js';
import type { AgentIdentity } from './identity.js';
import type { WorkloadRunner } from '../workloads/workload.js';
import type { HostLock } from './host-lock.js';
import type { CurrentRun } from '../queue/registry.js';

export interface RunJobDeps {
  readonly lock: HostLock;
  /** The coordinator's public key: a job it did not sign is refused before anything runs. */
  readonly jobKey: JobVerifier;
  /** Where a verified job may run, and what ran here already: refusals come before any side effect. */
  readonly admission: Admission;
  /** This agent's key now (a rotation replaces it between runs): every report names it. */
  readonly identity: () => AgentIdentity;
  /** The secret this agent's reports are authenticated with (known once it is enrolled, before any job). */
  readonly reportMacKey: () => Buffer;
  readonly hostId: string;
  readonly journal: Journal;
  /** What this host lets a cell take; a cell asking for more is a failed run with the refusal's code. */
  readonly budget?: HostBudget;
  /** When a run counts as disturbed (FSBENCH_MAX_STEAL, FSBENCH_MAX_OUTSIDE_CPU). */
  readonly interference?: InterferenceThresholds;
  readonly scratchDir: string;
  readonly fingerprint: () => MachineFingerprint;
  /** Aborted when the agent must stop taking the lock and abandon what it runs. */
  readonly hardStop: AbortSignal;
  /** How long the lock stays held after a run, waiting for the next one. */
  readonly idleReleaseMs: number;
  readonly log: (line: string) => void;
  /** Puts a fingerprint where the coordinator finds it by hash (see fingerprintsKey). */
  readonly publishFingerprint: (hash: string, json: string) => Promise<void>;
  /** Runs cells with `container.*` parameters in fresh containers; absent without a Docker engine. */
  readonly sandbox?: WorkloadRunner | undefined;
  /** Whether this host has warmed the cell up already (see warmedKey), and telling that it has. */
  readonly warmed: (matrixId: string, cellId: string) => Promise<boolean>;
  readonly markWarmed: (matrixId: string, cellId: string) => Promise<void>;
}

export class RunExecutor {
  /** One run at a time in this process, whichever of its queues the job came from. */
  private slot: Promise<void> = Promise.resolve();
  private running: { run: CurrentRun; abort: AbortController } | null = null;
  /** Settles when the measurement in progress (if any) is over, its changes to the host undone. */
  private measuring: Promise<void> = Promise.resolve();
  private idleTimer: NodeJS.Timeout | undefined;
  /** Fingerprint JSON -> hash, for those published already (bounded). */
  private readonly published = new Map<string, string>();
  private last: { fingerprint: MachineFingerprint; hash: string } | undefined;
  runsDone = 0;
  /** Warmup runs made (thrown away), for the registry: they are work the estimate counts. */
  warmupsDone = 0;

  constructor(private readonly deps: RunJobDeps) {}

  get currentRun(): CurrentRun | null {
    return this.running?.run ?? null;
  }

  get busy(): boolean {
    return this.running !== null;
  }

  /**
   * Resolves when no measurement is going on: what a stopping agent waits for whatever Redis does,
   * since recording the run's end in Redis may never happen while Redis is gone.
   */
  untilMeasured(): Promise<void> {
    return this.measuring;
  }

  /** Aborts the run in progress (the lock was lost, or the grace period ran out). */
  abandon(reason: string): void {
    this.running?.abort.abort(new Error(reason));
  }

  /**
   * The BullMQ processor: what it returns is the job's return value, the run's report. It takes
   * no abort signal from BullMQ, which would make one per job for cancelJob(), never used here:
   * runs are abandoned through `abandon()` and `hardStop`.
   */
  readonly process = async (job: Job<unknown, unknown>): Promise<SignedRunReport> => {
    const parsed = QueuedRunJob.safeParse(job.data);
    if (!parsed.success) {
      const why = parsed.error.issues.map((i) => `${i.path.join('.') || '(job)'}: ${i.message}`).join('; ');
      // BullMQ keeps only the message (as the job's failedReason): the code goes in it, as the CLI prints it.
      throw new UnrecoverableError(errorLine('JOB_INVALID', `job ${job.id ?? '?'} is not a valid run job: ${why}; run agents and coordinator of one fsbench version`));
    }
    const { signature, ...data } = parsed.data;
    // Before the slot, the lock, warmups or the journal: a forged job touches nothing on this host.
    if (signature === undefined || !this.deps.jobKey.verify(data, signature)) {
      const what = signature === undefined ? 'carries no signature' : `is not signed by the coordinator key ${this.deps.jobKey.fingerprint}`;
      throw new UnrecoverableError(
        errorLine('JOB_UNSIGNED', `job ${job.id ?? '?'} ${what}: refused without running it (written to Redis by someone without the coordinator's key, or FSBENCH_JOB_KEY is another coordinator's)`),
      );
    }
    // Signed, but maybe a replayed copy: refused as well before anything happens.
    const refusal = await this.deps.admission.refusal(data, job);
    if (refusal !== null) {
      await this.deps.admission.count(refusal.code);
      throw new UnrecoverableError(errorLine(refusal.code, `${refusal.why}: refused without running it`));
    }
    const release = await this.takeSlot();
    try {
      // Run here already (a retry after Redis lost its completion, or a copy replayed): the same report, nothing run again.
      const before = await this.deps.admission.ranBefore(data);
      if (before !== null) {
        this.deps.log(`job ${data.id} ran on this host already: its report is sent again, nothing is run`);
        return before;
      }
      const { fingerprint, ...result } = await this.runOne(data);
      const report: RunReport = {
        matrixId: data.matrixId,
        target: data.target,
        cellId: data.cell.id,
        repetition: data.repetition,
        attempts: Math.max(1, job.attemptsStarted),
        fingerprint: await this.fingerprintHash(fingerprint),
        result,
        jobId: data.id,
        jobSignature: signatureDigest(signature),
        hostId: this.deps.hostId,
      };
      const text = JSON.stringify(report);
      const signed: SignedRunReport = { report: text, key: this.deps.identity().fingerprint, mac: reportMac(this.deps.reportMacKey(), text) };
      await this.deps.admission.ranNow(data, signed);
      return signed;
    } finally {
      this.running = null;
      release();
    }
  };

  /** The fingerprint's hash, published first if this agent has not published it yet. */
  private async fingerprintHash(fingerprint: MachineFingerprint): Promise<string> {
    // Runs of one agent mostly carry the very same fingerprint object (see runCell).
    if (fingerprint === this.last?.fingerprint) return this.last.hash;
    const json = JSON.stringify(fingerprint);
    let hash = this.published.get(json);
    if (hash === undefined) {
      hash = fingerprintHash(json);
      await this.deps.publishFingerprint(hash, json);
      if (this.published.size >= 100) this.published.clear();
      this.published.set(json, hash);
    }
    this.last = { fingerprint, hash };
    return hash;
  }

  /**
   * Publishes fingerprints again from the next run on: Redis may have come back without them
   * (restarted without persistence), and a report naming an unknown hash cannot be stored.
   */
  forgetPublished(): void {
    this.published.clear();
    this.last = undefined;
  }

  /**
   * Restores what a dead agent's run left on this host when nothing here runs: an exclusive run
   * would do it when it takes the lock, but a host that only gets runs that do not measure the
   * kernel would otherwise keep the changed limits. Cheap when the journal is empty (one readdir).
   */
  async recoverLeftovers(): Promise<void> {
    if (this.running !== null || this.deps.lock.held) return;
    const names = await readdir(this.deps.journal.dir).catch(() => []);
    if (!names.some((n) => n.endsWith('.json'))) return;
    const release = await this.takeSlot();
    try {
      // Taking the lock runs the recovery; a holder that is measuring keeps it, and its entries.
      // Held by this agent since the check above (a run came and went): no run is going on now.
      if (await this.deps.lock.tryOnce()) await this.deps.lock.release();
    } finally {
      release();
    }
  }

  private async takeSlot(): Promise<() => void> {
    let release = (): void => undefined;
    const previous = this.slot;
    this.slot = new Promise<void>((resolve) => {
      release = resolve;
    });
    await previous;
    this.cancelIdleRelease();
    return () => {
      if (this.deps.lock.held) this.scheduleIdleRelease();
      release();
    };
  }

  private cancelIdleRelease(): void {
    if (this.idleTimer === undefined) return;
    clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
  }

  private scheduleIdleRelease(): void {
    this.cancelIdleRelease();
    this.idleTimer = setTimeout(() => {
      this.idleTimer = undefined;
      if (this.running === null) void this.deps.lock.release().catch(() => undefined);
    }, this.deps.idleReleaseMs);
  }

  /**
   * Runs that measure the kernel hold the host lock ("never two measurements on one kernel at
   * once"); the others neither take it nor keep it from an agent that wants to measure.
   */
  private async runOne(job: RunJob): Promise<RunResult> {
    const { lock, hardStop } = this.deps;
    if (WORKLOADS[job.cell.workload].exclusive) {
      if (lock.held && lock.shouldYield) await lock.release(true);
      try {
        await lock.acquire(hardStop);
      } catch {
        throw new Error('abandoned: the agent is stopping and did not get the host lock');
      }
    } else if (lock.held) {
      await lock.release();
    }
    // One controller per run, tied to hardStop by a listener removed after the run: cheaper than
    // AbortSignal.any(), whose dependants pile up on hardStop until a garbage collection.
    const abort = new AbortController();
    const onHardStop = (): void => {
      abort.abort(hardStop.reason);
    };
    if (hardStop.aborted) onHardStop();
    else hardStop.addEventListener('abort', onHardStop, { once: true });
    let measured = (): void => undefined;
    this.measuring = new Promise<void>((resolve) => {
      measured = resolve;
    });
    try {
      return await this.measure(job, abort);
    } finally {
      measured();
      hardStop.removeEventListener('abort', onHardStop);
    }
  }

  private async measure(job: RunJob, abort: AbortController): Promise<RunResult> {
    const { signal } = abort;
    this.running = {
      run: { matrixId: job.matrixId, cellId: job.cell.id, repetition: job.repetition, startedAt: new Date().toISOString() },
      abort,
    };
    const ctx = {
      scratchDir: this.deps.scratchDir,
      journal: this.deps.journal,
      ...(this.deps.budget ? { budget: this.deps.budget } : {}),
      ...(this.deps.interference ? { interference: this.deps.interference } : {}),
      signal,
      ...(this.deps.sandbox ? { sandbox: this.deps.sandbox } : {}),
      log: (line: string) => {
        this.deps.log(`${job.matrixId} ${job.cell.id}#${job.repetition}: ${line}`);
      },
    };
    const request = { matrix: job.matrixId, cell: job.cell, repetition: job.repetition, fingerprint: this.deps.fingerprint() };
    // Warmups once per cell and host, before the first repetition this host runs: what the
    // coordinator's estimate and limits count. Marked only when they all ran.
    if (job.warmup > 0 && !(await this.deps.warmed(job.matrixId, job.cell.id))) {
      for (let i = 0; i < job.warmup && !signal.aborted; i++) {
        await runCell(request, ctx);
        this.warmupsDone++;
      }
      if (!signal.aborted) await this.deps.markWarmed(job.matrixId, job.cell.id);
    }
    const result = signal.aborted ? null : await runCell(request, ctx);
    if (result === null || signal.aborted) {
      const why = signal.reason instanceof Error ? signal.reason.message : 'the run was aborted';
      throw new Error(`abandoned: ${why}`);
    }
    this.runsDone++;
    return result;
  }

  /** Stops the idle timer; the caller releases the lock. */
  dispose(): void {
    this.cancelIdleRelease();
  }
}
