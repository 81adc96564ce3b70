/**
 * Starts a coordinator: the database, the queues, the collector (which at once catches up on
 * runs that completed while no coordinator was running), what a previous process left unfinished
 * (recovery.ts), and the HTTP server. `stop()` undoes it all in reverse order.
 */
import type { Server } from 'node:http';
import { Counter } from 'prom-client';
import { messageOf } from '../contract/errors.js';
import { FSBENCH_VERSION } from '../host/version.js';
import { loggerOf, type LogSink } from '../log/index.js';
import { agentsKey } from '../queue/keys.js';
import { awaitRedis, connectRedis, serverNodes, shownRedis, type RedisChannel } from '../queue/redis.js';
import { RedisHealth } from '../queue/redis-health.js';
import { checkRedisSettings } from '../queue/redis-settings.js';
import { loadOrCreateJobKey, writePublicKeyCopy, type JobVerifier } from '../queue/signing.js';
import { defaultOf } from '../settings/index.js';
import { buildApp } from './app.js';
import { Enrollment, loadOrCreateReportKey } from './enrollment/index.js';
import { describeAuth, logTo } from './http/index.js';
import { AgentVersions, Collector, HostWatch } from './ingest/index.js';
import { Dispatcher, ProgressHub } from './matrices/index.js';
import { coordinatorMetrics } from './metrics/index.js';
import { Recovery } from './recovery.js';
import { Store } from './store/index.js';

export interface CoordinatorSettings extends RedisChannel {
  readonly queuePrefix: string;
  readonly port: number;
  readonly host: string;
  readonly token: string | undefined;
  readonly readAuth: 'open' | 'token';
  /** FSBENCH_ALLOWED_HOSTS: names an open read's Host may carry besides localhost and IP addresses (none when omitted). */
  readonly allowedHosts?: readonly string[];
  readonly dataDir: string;
  readonly maxAttempts: number;
  readonly maxBody: number;
  readonly maxRuns: number;
  readonly maxDuration: number;
  readonly maxQueued: number;
  readonly hostTimeout: number;
  /** FSBENCH_WRITE_LIMIT; writes are not limited when not given (tests that embed a coordinator). */
  readonly writeLimit?: number;
  /** FSBENCH_MAX_DOWNLOADS; the settings table's default when omitted. */
  readonly maxDownloads?: number;
  /** FSBENCH_MAX_STREAMS; the settings table's default when omitted. */
  readonly maxStreams?: number;
  /** FSBENCH_MAX_READS; the settings table's default when omitted. */
  readonly maxReads?: number;
  /** FSBENCH_READ_QUEUE; the settings table's default when omitted. */
  readonly readQueue?: number;
  /** FSBENCH_READ_LIMIT; comparisons, gates and history reads are not rate-limited when not given (tests that embed a coordinator). */
  readonly readLimit?: number;
  /** FSBENCH_MAX_READ_RUNS; the settings table's default when omitted. */
  readonly maxReadRuns?: number;
  /**
   * Comparisons, gates and history computed on the event loop (within the same limits): only to
   * measure what the read threads spare it (tests/reads.test.ts), deliberately not a setting.
   */
  readonly readsOnEventLoop?: boolean;
  /** FSBENCH_JOB_KEY_COPY: another file to write the public job key to, for agents (compose). */
  readonly jobKeyCopy?: string | undefined;
  /** FSBENCH_JOB_TTL; the settings table's default when omitted. */
  readonly jobTtl?: number;
  /** FSBENCH_ENROLL_TOKEN_COPY: a file kept holding one unused enrollment token, for this machine's agents (compose). */
  readonly enrollTokenCopy?: string | undefined;
  /**
   * Off only in `npm run bench:dispatch`, to measure what checking the agents' report signatures
   * costs: deliberately not a setting (see CollectorDeps.verifyReports).
   */
  readonly verifyReports?: boolean;
}

export interface RunningCoordinator {
  readonly url: string;
  readonly port: number;
  /** The public key agents verify this coordinator's jobs with (FSBENCH_JOB_KEY). */
  readonly jobKey: JobVerifier;
  stop(): Promise<void>;
}

/** How long the collector's read of the event streams waits (runs that gave up: ingest/collector.ts failedSweepMs). */
const COLLECT_POLL_MS = 100;
/** How often hosts of unfinished matrices are looked for (more often with a short FSBENCH_HOST_TIMEOUT). */
const HOST_CHECK_MS = 10_000;
/** How often agents' key announcements are read: enrolling with a token takes at most this long. */
const ENROLL_SYNC_MS = 1_000;
/** How often the coordinator PINGs Redis to know it answers (queue/redis-health.ts). */
const HEALTH_PROBE_MS = 1_000;
/**
 * How long the main connection may answer nothing while open before it is re-made: longer than
 * a Redis busy with a slow command or a fork is silent, about as long as the collector's watchdog.
 */
const SILENT_RECONNECT_MS = 10_000;
/** The longest a stopping coordinator waits for Redis to take its last writes. */
const STOP_REDIS_MS = 5_000;

/**
 * Runs `work` every `ms`, never two at once (a slow round skips the ticks it overlaps), logging
 * what fails; `stop()` clears the timer and waits for a round in progress.
 */
function everyInTurn(work: () => Promise<void>, ms: number, what: string, log: (line: string) => void): { stop: () => Promise<void> } {
  let running: Promise<void> | undefined;
  const timer = setInterval(() => {
    running ??= work()
      .catch((err: unknown) => {
        log(`${what}: ${messageOf(err)}`);
      })
      .finally(() => {
        running = undefined;
      });
  }, ms);
  return {
    stop: async () => {
      clearInterval(timer);
      await running;
    },
  };
}

/** `sink` receives every log line: a pino logger, or a function given each JSON line. */
export async function startCoordinator(s: CoordinatorSettings, sink: LogSink): Promise<RunningCoordinator> {
  const logger = loggerOf(sink, 'coordinator');
  const log = logTo(logger);
  const redis = connectRedis(s, 'fsbench-coordinator');
  await awaitRedis(redis, s, log);
  const redisLog = logger.child({ component: 'redis' });
  // Before anything is queued: a Redis that may evict keys would lose runs without a word.
  // On a Cluster, every node: any replica may become the primary of fsbench's slot.
  for (const server of serverNodes(redis)) {
    const shown = server.node === undefined ? shownRedis(s) : `${server.node} of ${shownRedis(s)}`;
    await checkRedisSettings(server.redis, shown, logTo(redisLog)).catch((err: unknown) => {
      redis.disconnect();
      throw err;
    });
  }
  let silentReconnects = 0;
  const health = new RedisHealth({
    url: shownRedis(s),
    log: logTo(redisLog),
    warn: logTo(redisLog, 'warn'),
    probeMs: HEALTH_PROBE_MS,
    reconnectSilentMs: SILENT_RECONNECT_MS,
    onSilentReconnect: () => {
      silentReconnects++;
    },
  });
  health.watch(redis, true);
  health.start(redis);
  const store = Store.open(s.dataDir, logTo(logger.child({ component: 'store' }), 'warn'));
  // The private key stays in the data directory; only the public key's fingerprint is logged.
  const jobKey = await loadOrCreateJobKey(s.dataDir);
  if (s.jobKeyCopy !== undefined) await writePublicKeyCopy(s.jobKeyCopy, jobKey.signer.verifier);
  log(
    `jobs signed with ${jobKey.created ? 'a new' : 'the'} key ${jobKey.signer.verifier.fingerprint}: give agents its public key ${jobKey.publicKeyFile}` +
      `${s.jobKeyCopy !== undefined ? ` (also written to ${s.jobKeyCopy})` : ''} as FSBENCH_JOB_KEY`,
    { event: 'coordinator.job-key', fingerprint: jobKey.signer.verifier.fingerprint, publicKeyFile: jobKey.publicKeyFile },
  );
  const dispatcher = new Dispatcher(redis, s.queuePrefix, s.maxAttempts, s.maxQueued, jobKey.signer, (jobs) => {
    store.issued.record(jobs);
  }, s.jobTtl ?? defaultOf('jobTtl'), (queue, err) => {
    if (!health.observe(err)) log(`queue ${queue}: ${messageOf(err)}`, { event: 'queue.error', queue });
  });
  const enrollment = new Enrollment({
    store,
    redis,
    prefix: s.queuePrefix,
    signer: jobKey.signer,
    log: logTo(logger.child({ component: 'enrollment' })),
    tokenCopy: s.enrollTokenCopy,
    reportKey: await loadOrCreateReportKey(s.dataDir),
  });
  await enrollment.start();
  await enrollment.sync();
  const hub = new ProgressHub(store);
  const metrics = coordinatorMetrics({ store, dispatcher, redis, prefix: s.queuePrefix, auth: { token: s.token, readAuth: s.readAuth }, enrollment });
  const droppedReports = new Counter({
    name: 'fsbench_reports_dropped_total',
    help: 'Reports and failed jobs found in Redis that this coordinator did not issue (forged or stale), dropped unstored, by reason',
    labelNames: ['reason'],
    registers: [metrics.registry],
  });
  const recovery = new Recovery({ store, dispatcher, hub, log });
  new Counter({
    name: 'fsbench_redis_silent_reconnects_total',
    help: "Times the coordinator's main Redis connection was re-made because it answered nothing while open (a connection fallen silent)",
    registers: [metrics.registry],
    collect() {
      this.reset();
      this.inc(silentReconnects);
    },
  });
  const collectorRestarts = new Counter({
    name: 'fsbench_collector_restarts_total',
    help: "Times the collector's reading connection was re-made because no read finished while Redis answered (a connection fallen silent)",
    registers: [metrics.registry],
  });
  const collector = new Collector({
    store,
    dispatcher,
    redis,
    prefix: s.queuePrefix,
    onChange: (ids) => {
      hub.changed(ids);
    },
    onStored: (runs) => {
      for (const run of runs) if (run.kind === 'result') metrics.observeRun(run.result);
      recovery.stored(runs);
    },
    onLost: (target) => recovery.reportsLost(target),
    log: logTo(logger.child({ component: 'collector' })),
    pollMs: COLLECT_POLL_MS,
    verifier: jobKey.signer.verifier,
    enrolledKey: (key) => enrollment.enrolled(key),
    revokedKey: (key) => enrollment.isRevoked(key),
    refreshKeys: () => enrollment.sync(),
    ...(s.verifyReports === false ? { verifyReports: false } : {}),
    maxAttempts: s.maxAttempts,
    onDropped: (reason, n) => {
      droppedReports.inc({ reason }, n);
    },
    reachable: () => health.view().reachable,
    onRestart: () => {
      collectorRestarts.inc();
    },
  });
  collector.start();
  const versions = new AgentVersions(FSBENCH_VERSION, (line, fields) => {
    logger.warn({ component: 'hosts', ...fields }, line);
  });
  const hosts = new HostWatch({
    store,
    dispatcher,
    redis,
    prefix: s.queuePrefix,
    timeoutMs: s.hostTimeout,
    onChange: (ids) => {
      hub.changed(ids);
    },
    log: logTo(logger.child({ component: 'hosts' })),
    onLive: (agents) => {
      versions.note(agents);
    },
  });
  const hostTimer = everyInTurn(() => hosts.check(), Math.min(HOST_CHECK_MS, s.hostTimeout / 2), 'watching hosts', log);
  const enrollTimer = everyInTurn(() => enrollment.sync(), ENROLL_SYNC_MS, 'enrolling agents', log);

  await recovery.atStart();
  const stopServerWatch = recovery.watchRedis(redis, agentsKey(s.queuePrefix));
  const auth = { token: s.token, readAuth: s.readAuth, allowedHosts: s.allowedHosts ?? [] };
  const app = buildApp({
    store,
    dispatcher,
    hub,
    redis,
    prefix: s.queuePrefix,
    auth,
    limits: { maxBody: s.maxBody, maxRuns: s.maxRuns, maxDuration: s.maxDuration, maxQueued: s.maxQueued, maxDownloads: s.maxDownloads, maxStreams: s.maxStreams },
    log,
    logger,
    writeLimit: s.writeLimit,
    reads: { maxReads: s.maxReads, readQueue: s.readQueue, readLimit: s.readLimit, maxReadRuns: s.maxReadRuns, onEventLoop: s.readsOnEventLoop },
    metrics,
    enrollment,
    redisHealth: () => health.view(),
  });
  const server = await new Promise<Server>((resolve, reject) => {
    const srv = app.listen(s.port, s.host, (err?: Error) => {
      if (err) reject(err);
      else resolve(srv);
    });
  });
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : s.port;
  const url = `http://${s.host.includes(':') ? `[${s.host}]` : s.host}:${port}`;
  log(`coordinator listening on ${url}; ${describeAuth(auth)}; database ${s.dataDir}`, {
    event: 'coordinator.started',
    url,
    writeLimitPerMinute: s.writeLimit ?? null,
  });

  let stopping: Promise<void> | undefined;
  return {
    url,
    port,
    jobKey: jobKey.signer.verifier,
    stop: () =>
      (stopping ??= (async () => {
        // Event streams never end by themselves: without this, close() would wait for them.
        server.closeAllConnections();
        await new Promise<void>((resolve) => {
          server.close(() => {
            resolve();
          });
        });
        // What is left needs Redis: each step is waited for only while Redis answers, all of
        // them together at most STOP_REDIS_MS, so that SIGTERM stops a coordinator whose Redis
        // is gone (ioredis never settles a command queued while it reconnects).
        stopServerWatch();
        health.stop();
        const deadline = Date.now() + STOP_REDIS_MS;
        const left = () => deadline - Date.now();
        await health.settle(hostTimer.stop(), left());
        await health.settle(enrollTimer.stop(), left());
        await health.settle(collector.stop(), left());
        await health.settle(dispatcher.close(), left());
        if ((await health.settle(redis.quit(), left())) !== 'done') {
          // Also ends its reconnect attempts, which would keep the process alive.
          redis.disconnect();
          log('coordinator stopped without waiting for Redis, which does not answer', { event: 'coordinator.stop-unreachable', reason: health.view().reason });
        }
        store.close();
        log('coordinator stopped');
      })()),
  };
}
