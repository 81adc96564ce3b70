/**
 * An agent: BullMQ workers on the shared `any` queue and on its host's queue, one run at a time,
 * under the host lock when the workload measures the kernel, each job completed with its run's
 * report. SIGTERM stops taking jobs, lets the current run finish for the grace period, then
 * abandons it (cleaned up by the workload, the job retried elsewhere).
 */
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { DelayedError, Worker, type Job } from 'bullmq';
import type { RedisConnection } from '../queue/redis.js';
import type { AgentSettings, RunningAgent } from './contract.js';
import { FsbenchError, messageOf } from '../contract/errors.js';
import type { MachineFingerprint } from '../contract/fingerprint.js';
import { ANY_TARGET, qualifiedQueueName, queueName, type SignedRunReport } from '../queue/jobs.js';
import { fingerprintsKey, warmedKey } from '../queue/keys.js';
import { awaitRedis, connectRedis, shownRedis } from '../queue/redis.js';
import { RedisHealth, type HealthLog } from '../queue/redis-health.js';
import { collectFingerprint } from '../host/fingerprint.js';
import { connectSandbox, dockerFingerprintIfAny } from '../sandbox/index.js';
import { Journal } from '../host/journal.js';
import type { HostBudget } from '../runner/host-budget.js';
import { loadWatcherList } from '../host/watcher-list.js';
import { defaultOf } from '../settings/index.js';
import { Heartbeat } from './heartbeat.js';
import { Watchdog, watchdogBound } from './watchdog.js';
import { startHealthFile } from './health-file.js';
import { HostLock } from './host-lock.js';
import type { AgentStatus } from '../queue/registry.js';
import { RunExecutor } from './run-job.js';
import { loadJobVerifier } from '../queue/signing.js';
import { ensureSafeDir } from '../host/safe-dir.js';
import { Admission } from './admission.js';
import { kernelBootId, machineName } from './naming.js';
import { awaitEnrollment, currentApproval, hostStateDir, loadOrCreateAgentKey } from './identity.js';
import { ApprovalWatch } from './approval-watch.js';
import { finishBegunRotation, KeyRotation } from './rotation.js';
import { readFile } from 'node:fs/promises';
import { EnrollToken } from '../queue/enrollment.js';

const FINGERPRINT_REFRESH_MS = 60_000;
const STATE_PURPOSE = { what: 'the agent state directory', setting: 'FSBENCH_STATE_DIR' };
/**
 * A matrix's record of warmed cells lasts as long as a job stays valid under the default
 * FSBENCH_JOB_TTL (the coordinator's own is not known here); a run that finds it gone only warms
 * up again.
 */
const WARMED_KEEP_MS = defaultOf('jobTtl');

/** The longest a stopping agent waits for Redis to take its last writes, once its run is over. */
const STOP_REDIS_MS = 5_000;


/** `log` takes a line and, for events a log pipeline filters on, fields (JSON lines). */
export async function startAgent(s: AgentSettings, log: HealthLog): Promise<RunningAgent> {
  // First of all: an agent that cannot tell its coordinator's jobs from forged ones runs none.
  const jobKey = await loadJobVerifier(s.jobKey);
  const hostId = s.hostId ?? (await kernelBootId());
  // Before anything else touches the scratch directory: refused (DIRECTORY_UNSAFE) unless only root controls it and the journal directory.
  const journal = await Journal.open(s.journalDir ?? path.join(s.scratch, 'journal'), { scratch: s.scratch, targets: s.allowedTargets ?? [], hostId });
  // The key that signs this agent's reports: in a directory only root controls, like the scratch.
  const stateDir = await ensureSafeDir(hostStateDir(s.stateDir ?? path.join(s.scratch, 'agent'), hostId), STATE_PURPOSE);
  // Replaced by a rotation, between runs.
  let identity = await loadOrCreateAgentKey(stateDir);
  // Once enrolled, the name the approval binds the key to.
  let machine = await machineName(s, log);
  const agentId = `${machine ?? 'agent'}-${process.pid}-${randomUUID().slice(0, 8)}`;
  // Sandbox mode needs a Docker engine; without one, container.* cells fail with SANDBOX_UNAVAILABLE.
  const sandbox = await connectSandbox({ log });
  const fingerprintNow = async (): Promise<MachineFingerprint> => {
    const f = await collectFingerprint({ machine, labels: s.labels }, s.scratch);
    return { ...f, container: { ...f.container, docker: await dockerFingerprintIfAny(sandbox?.docker) } };
  };
  let fingerprint: MachineFingerprint = await fingerprintNow();
  const budget: HostBudget = {
    allowedTargets: s.allowedTargets ?? defaultOf('allowedTargets'),
    maxQueuedEvents: s.maxQueuedEvents ?? defaultOf('maxQueuedEvents'),
    maxWatches: s.maxWatches ?? defaultOf('maxWatches'),
    // Read once: a list that cannot be trusted stops the agent at start, not a run later.
    watchers: await loadWatcherList(s.watchers),
  };
  const redis: RedisConnection = connectRedis(s, `fsbench-agent-${agentId}`);
  await awaitRedis(redis, s, log);
  const redisHealth = new RedisHealth({ url: shownRedis(s), log, probeMs: s.heartbeat });
  redisHealth.watch(redis, true);
  redisHealth.start(redis);
  const health = s.healthFile === undefined ? undefined : await startHealthFile({ file: s.healthFile, intervalMs: s.heartbeat, redis: () => redisHealth.view(), log });
  const startedAt = new Date().toISOString();
  const hardStop = new AbortController();
  const admission = new Admission({ redis, prefix: s.queuePrefix, hostId, stateDir });
  await admission.prune();

  const pollMs = Math.max(20, Math.min(250, Math.round(s.heartbeat / 4)));
  const lock = new HostLock(redis, {
    prefix: s.queuePrefix,
    hostId,
    owner: agentId,
    ttlMs: 5 * s.heartbeat,
    pollMs,
    maxHoldMs: 10 * s.heartbeat,
    log,
    onAcquired: async () => {
      // The journal is the host's: what dead writers left is undone, never a live run's (its owner lock is held), whatever Redis says.
      for (const line of await journal.recover()) log(`restored what a dead run left: ${line}`);
      const swept = await sandbox?.recover(s.scratch).catch((err: unknown) => {
        log(`sandbox sweep failed: ${messageOf(err)}`);
        return [];
      });
      for (const line of swept ?? []) log(`removed what a dead run container left: ${line}`);
    },
    onLost: () => {
      log('host lock lost (Redis unreachable or the lock lapsed): abandoning the current run');
      exec.abandon('the host lock was lost');
    },
  });
  const warmedHere = new Set<string>();
  /** Agreed with the coordinator once enrolled; the workers start only then. */
  let macKey: Buffer | undefined;
  const exec: RunExecutor = new RunExecutor({
    lock,
    jobKey,
    admission,
    identity: () => identity,
    reportMacKey: () => {
      if (macKey === undefined) throw new FsbenchError('INTERNAL', 'a job was taken before the agent was enrolled');
      return macKey;
    },
    hostId,
    journal,
    budget,
    ...(s.maxSteal === undefined || s.maxOutsideCpu === undefined ? {} : { interference: { maxSteal: s.maxSteal, maxOutsideCpu: s.maxOutsideCpu } }),
    scratchDir: s.scratch,
    fingerprint: () => fingerprint,
    hardStop: hardStop.signal,
    idleReleaseMs: pollMs,
    publishFingerprint: async (hash, json) => {
      await redis.hset(fingerprintsKey(s.queuePrefix), hash, json);
    },
    log,
    sandbox: sandbox ?? undefined,
    warmed: async (matrixId, cellId) => {
      const member = `${hostId} ${cellId}`;
      if (warmedHere.has(`${matrixId} ${member}`)) return true;
      return (await redis.sismember(warmedKey(s.queuePrefix, matrixId), member)) === 1;
    },
    markWarmed: async (matrixId, cellId) => {
      const key = warmedKey(s.queuePrefix, matrixId);
      await redis.multi().sadd(key, `${hostId} ${cellId}`).pexpire(key, WARMED_KEEP_MS).exec();
      // Remembered here too, so the next repetition asks Redis nothing; bounded like every cache.
      if (warmedHere.size >= 10_000) warmedHere.clear();
      warmedHere.add(`${matrixId} ${hostId} ${cellId}`);
    },
  });

  redis.on('ready', () => {
    exec.forgetPublished();
  });

  const status = (): AgentStatus => ({
    agentId,
    hostId,
    machine: fingerprint.machine,
    labels: [...s.labels],
    pid: process.pid,
    startedAt,
    lastHeartbeat: new Date().toISOString(),
    ttlMs: 5 * s.heartbeat,
    holdsHostLock: lock.held,
    currentRun: exec.currentRun,
    runsDone: exec.runsDone,
    warmupsDone: exec.warmupsDone,
    workerRestarts,
    fingerprint,
  });
  const heartbeat = new Heartbeat({ redis, prefix: s.queuePrefix, intervalMs: s.heartbeat, lock, status, busy: () => exec.busy, log });

  let workers: Worker<unknown, unknown>[] = [];
  /** Jobs in this agent's hands, and when it last took or finished one: what the watchdog reads. */
  let inHand = 0;
  let lastActivity = Date.now();
  let workerRestarts = 0;
  /** From now on runs measure and report under `name`, the machine name the key's approval binds. */
  const runAs = async (name: string): Promise<void> => {
    machine = name;
    fingerprint = await fingerprintNow();
  };
  const approval = new ApprovalWatch({
    // An approval naming another machine than the one this agent runs as is the operator's rename:
    // followed before the next job, and kept nowhere but in the approval the coordinator holds.
    check: async () => {
      const a = await currentApproval({ redis, prefix: s.queuePrefix, identity, hostId, jobKey });
      if (a !== null && a.machine !== fingerprint.machine) {
        log(`this machine was renamed by the operator, from ${fingerprint.machine} to ${a.machine}: its runs are ${a.machine}'s from now on`, {
          event: 'agent.renamed', from: fingerprint.machine, machine: a.machine,
        });
        await runAs(a.machine);
      }
      if (a !== null && !rotation.underway && (a.rotate === true || (await rotation.due()))) {
        rotation.begin(a.rotate === true ? 'the operator asked for it' : 'the key is older than FSBENCH_KEY_MAX_AGE');
      }
      return a;
    },
    intervalMs: Math.max(250, s.heartbeat),
    onLost: () => {
      for (const w of workers) void w.pause(true);
    },
    onBack: () => {
      for (const w of workers) void w.resume();
    },
    log,
  });
  const stopRotating = new AbortController();
  const rotation = new KeyRotation({
    redis,
    prefix: s.queuePrefix,
    stateDir,
    hostId,
    labels: s.labels,
    machine: () => fingerprint.machine,
    jobKey,
    maxAgeMs: s.keyMaxAge ?? defaultOf('keyMaxAge'),
    current: () => identity,
    // Waits for the run in hand: a rotation happens between runs.
    pause: async () => {
      await Promise.all(workers.map((w) => w.pause()));
    },
    resume: async () => {
      if (!stopRotating.signal.aborted && (await approval.checkNow())) for (const w of workers) void w.resume();
    },
    switchTo: (next, key) => {
      identity = next;
      macKey = key;
    },
    log,
    signal: stopRotating.signal,
    pollMs: Math.max(100, Math.min(1_000, s.heartbeat)),
  });
  const processJob = async (job: Job<unknown, unknown>, token?: string): Promise<SignedRunReport> => {
    // In hand from here: while its approval is looked at, too, the watchdog must not take this agent for idle.
    inHand++;
    lastActivity = Date.now();
    try {
      // Revoked since the last look: the job goes back unrun, no attempt counted, for an enrolled host.
      if (!(await approval.checkNow())) {
        await job.moveToDelayed(Date.now() + Math.max(250, s.heartbeat), token);
        throw new DelayedError();
      }
      return await exec.process(job);
    } finally {
      inHand--;
      lastActivity = Date.now();
    }
  };
  /** The workers of `any` and this host's queue; each makes its own blocking connection (a duplicate of `redis`). */
  const makeWorkers = (): Worker<unknown, unknown>[] =>
    [ANY_TARGET, hostId].map((target) => {
      const w = new Worker<unknown, unknown>(queueName(target), processJob, {
        connection: redis,
        prefix: s.queuePrefix,
        concurrency: 1,
        lockDuration: s.stallTimeout,
        stalledInterval: s.stallTimeout,
        maxStalledCount: Math.max(0, s.maxAttempts - 1),
      });
      w.on('error', (err) => {
        if (!redisHealth.observe(err)) log(`queue ${w.name}: ${err.message}`);
      });
      w.on('failed', (job, err) => {
        log(`job ${job?.id ?? '?'} on ${w.name}: ${err.message}`);
      });
      return w;
    });
  const watchdog = new Watchdog({
    boundMs: watchdogBound(s.stallTimeout),
    intervalMs: Math.max(250, Math.min(5_000, Math.round(s.stallTimeout / 2))),
    waiting: async () => {
      const counts = await Promise.all(
        [ANY_TARGET, hostId].map(async (t) => {
          const q = qualifiedQueueName(s.queuePrefix, t);
          return (await redis.llen(`${q}:wait`)) + (await redis.zcard(`${q}:prioritized`));
        }),
      );
      return counts.reduce((a, b) => a + b, 0);
    },
    // Not approved, it takes nothing on purpose: no stuck worker to recreate.
    idle: () => inHand === 0 && !exec.busy && approval.holds && !rotation.underway,
    lastActivity: () => lastActivity,
    reachable: () => redisHealth.isReachable,
    silentFor: () => {
      const v = redisHealth.view();
      return !v.reachable && redis.status === 'ready' ? Date.now() - Date.parse(v.since) : 0;
    },
    restart: async (waiting, idleMs) => {
      workerRestarts++;
      const why =
        waiting < 0
          ? `Redis answered nothing for ${Math.round(idleMs / 1000)} s on connections still open`
          : `${waiting} run(s) wait on queues ${ANY_TARGET} and ${hostId} but none was taken for ${Math.round(idleMs / 1000)} s while idle`;
      log(`watchdog: ${why}: recreating the workers and their connections (restart ${workerRestarts})`, { event: 'agent.watchdog-restart', waiting, idleMs, workerRestarts });
      // A new socket for the main connection; ioredis sends again what waited on the old one.
      if (waiting < 0) redis.disconnect(true);
      const old = workers;
      workers = makeWorkers();
      // Forced: the old ones' blocking connections are what is stuck, and a graceful close would wait on them.
      await Promise.all(old.map((w) => w.close(true).catch(() => undefined)));
    },
    log,
  });
  let refresh: NodeJS.Timeout | undefined;
  let recovery: NodeJS.Timeout | undefined;
  let recovering: Promise<void> | undefined;
  /** Heartbeats, recovery and the workers: once the key is enrolled, never before. */
  const begin = async (): Promise<void> => {
    await heartbeat.start();
    // Undo now whatever a killed run left on this host; if another agent holds the lock, it did so
    // when it took it, and whoever takes it next does so again.
    if (await lock.tryOnce()) await lock.release();
    workers = makeWorkers();
    approval.start();
    watchdog.start();
    refresh = setInterval(() => {
      fingerprintNow().then(
        (f) => {
          // A rename while this was collected: the fingerprint taken for the new name stands.
          if (f.machine === machine) fingerprint = f;
        },
        () => undefined,
      );
      // What ran, kept until its jobs expired: a long-lived agent drops the past days too.
      admission.prune().catch(() => undefined);
    }, FINGERPRINT_REFRESH_MS);
    recovery = setInterval(() => {
      recovering ??= exec
        .recoverLeftovers()
        .catch((err: unknown) => {
          log(`restoring what a dead run left: ${messageOf(err)}`);
        })
        .finally(() => {
          recovering = undefined;
        });
    }, s.heartbeat);
    log(`agent ${agentId} on host ${hostId} (${fingerprint.machine}, labels: ${s.labels.join(',') || 'none'}, key ${identity.fingerprint}) waiting for runs signed with ${jobKey.fingerprint}`);
  };
  const stopWaiting = new AbortController();
  // A rotation the coordinator finished while this host's agents were down: the new key is the one enrolled.
  identity =
    (await finishBegunRotation({ redis, prefix: s.queuePrefix, stateDir, hostId, jobKey }).catch((err: unknown) => {
      log(`key rotation: ${messageOf(err)}`);
      return null;
    })) ?? identity;
  const enrolled = awaitEnrollment({
    redis,
    prefix: s.queuePrefix,
    identity,
    hostId,
    machine: fingerprint.machine,
    labels: s.labels,
    // Read at each look: the coordinator rewrites its copy once a token is used, for the next host's key.
    token: async () => {
      if (s.enrollTokenCopy === undefined) return s.enrollToken;
      const text = (await readFile(s.enrollTokenCopy, 'utf8').catch(() => '')).trim();
      return EnrollToken.safeParse(text).success ? text : s.enrollToken;
    },
    jobKey,
    log,
    signal: stopWaiting.signal,
  }).then(async (bound) => {
    macKey = bound.macKey;
    if (bound.machine !== fingerprint.machine) {
      log(`this key is enrolled as machine ${bound.machine}, not ${fingerprint.machine}: its runs are ${bound.machine}'s`, { event: 'agent.machine-bound', machine: bound.machine });
      await runAs(bound.machine);
    }
    // The approval's name from now on, whatever the hostname becomes.
    machine = bound.machine;
    await begin();
  });
  enrolled.catch((err: unknown) => {
    if (!stopWaiting.signal.aborted) log(`enrollment: ${messageOf(err)}`);
  });

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      // Stopping closes connections on purpose: not an outage to report.
      redisHealth.stop();
      watchdog.stop();
      approval.stop();
      stopWaiting.abort();
      stopRotating.abort();
      await redisHealth.settle(enrolled, STOP_REDIS_MS);
      await redisHealth.settle(rotation.settled(), STOP_REDIS_MS);
      clearInterval(refresh);
      clearInterval(recovery);
      const grace = setTimeout(() => {
        log(`the current run did not finish within ${s.stopGrace} ms: abandoning it`);
        hardStop.abort(new Error('the agent is stopping'));
      }, s.stopGrace);
      // The run in progress is waited for whatever Redis does: it undoes its changes to the host.
      // What needs Redis afterwards is waited for only while Redis answers, all of it at most
      // STOP_REDIS_MS more, since ioredis never settles a command queued while it reconnects.
      const closing = Date.now();
      for (const w of workers) void w.pause(true);
      await exec.untilMeasured();
      // With Redis reachable, close() waits for the job in progress and BullMQ records it
      // (completed, or failed to retry). Without, only a forced close ends BullMQ's timers (its
      // lock renewal), which would otherwise keep the process alive; the job, unrecorded, is
      // found stalled and run again, and this host answers with the report it kept (admission).
      const closed = Promise.all(workers.map((w) => w.close(!redisHealth.isReachable)));
      let waited = await redisHealth.settle(closed, closing + s.stopGrace + STOP_REDIS_MS - Date.now());
      // A job taken just before the pause may have started measuring meanwhile.
      await exec.untilMeasured();
      clearTimeout(grace);
      const deadline = Date.now() + STOP_REDIS_MS;
      const left = () => deadline - Date.now();
      // Ends the workers' own connections (BullMQ's duplicates), whose reconnect attempts would keep the process alive.
      if (waited !== 'done') for (const w of workers) void w.disconnect().catch(() => undefined);
      await redisHealth.settle(recovering ?? Promise.resolve(), left());
      hardStop.abort(new Error('the agent stopped'));
      exec.dispose();
      await health?.stop();
      await redisHealth.settle(heartbeat.stop(agentId), left());
      await redisHealth.settle(lock.release(), left());
      waited = await redisHealth.settle(redis.quit(), left());
      if (waited !== 'done') {
        redis.disconnect();
        log('agent stopped without waiting for Redis, which does not answer', { event: 'agent.stop-unreachable', reason: redisHealth.view().reason });
      }
      await journal.close();
      await admission.close();
      log(`agent ${agentId} stopped after ${exec.runsDone} runs`);
    })();
    return stopping;
  };
  return {
    agentId,
    hostId,
    get key() {
      return identity.fingerprint;
    },
    enrolled,
    approved: () => approval.holds,
    stop,
  };
}
