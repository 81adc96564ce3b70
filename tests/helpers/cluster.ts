/**
 * A real redis-server for one test file, and coordinators and agents in the test process
 * against it, each stopped (and its directories removed) after the test that started it, or
 * after the file when started in beforeAll. Call `useCluster()` at the top level of a test
 * file: it registers the hooks.
 *
 * One job key pair per cluster: each coordinator's data directory is given its private key
 * before the coordinator starts (unless it has one already), and each agent its public key, so
 * agents run the jobs of any coordinator of the file, whichever starts first.
 */
import { generateKeyPairSync } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { QueueEvents } from 'bullmq';
import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';
import { startAgent } from '../../agent/agent.js';
import type { AgentSettings, RunningAgent } from '../../agent/contract.js';
import { startCoordinator, type CoordinatorSettings, type RunningCoordinator } from '../../coordinator/server.js';
import type { LogSink } from '../../log/index.js';
import { JOB_KEY_FILE } from '../../queue/signing.js';
import { startRedis, uniquePrefix, type TestRedis } from '../fixtures/redis-server.js';
import { preEnroll } from './enroll.js';

/** Agent settings marked with `enrollsItself(over)` start unenrolled: their test approves them. */
const enrollItself = new WeakSet<object>();
export function enrollsItself<T extends object>(over: T): T {
  enrollItself.add(over);
  return over;
}

export interface Cluster {
  /** The file's redis-server (started in beforeAll). */
  readonly redis: () => TestRedis;
  /** A coordinator on a free port with its own queue prefix and data directory (`over.dataDir`'s is removed after, too); its log lines go to `sink` (none by default). */
  coordinator(over?: Partial<CoordinatorSettings>, sink?: LogSink): Promise<RunningCoordinator & { prefix: string; dataDir: string }>;
  /** The public job key (PEM) the cluster's agents are given (FSBENCH_JOB_KEY). */
  readonly jobKey: string;
  /** Its private key (PEM): what each coordinator of the cluster signs with. */
  readonly jobPrivateKey: string;
  /** An agent on `hostId` with its own scratch directory. */
  agent(prefix: string, hostId: string, machine: string, labels?: string[], over?: Partial<AgentSettings>): Promise<RunningAgent>;
  /** Runs after the current test (after the file, from beforeAll), in reverse order of registration. */
  cleanup(fn: () => Promise<void>): void;
}

const quiet = () => undefined;

export function useCluster(name = 'test'): Cluster {
  let redis: TestRedis | undefined;
  const perTest: (() => Promise<void>)[] = [];
  const perFile: (() => Promise<void>)[] = [];
  let inTest = false;
  const cleanups = { push: (fn: () => Promise<void>) => (inTest ? perTest : perFile).push(fn) };
  const keys = generateKeyPairSync('ed25519');
  const privatePem = keys.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const jobKey = keys.publicKey.export({ type: 'spki', format: 'pem' }).toString();
  beforeAll(async () => {
    redis = await startRedis();
  });
  beforeEach(() => {
    inTest = true;
  });
  afterEach(async () => {
    inTest = false;
    for (const c of perTest.splice(0).reverse()) await c();
  });
  afterAll(async () => {
    for (const c of perFile.splice(0).reverse()) await c();
    await redis?.stop();
  });
  const server = (): TestRedis => {
    if (!redis) throw new Error('the cluster is used before its beforeAll ran');
    return redis;
  };
  return {
    redis: server,
    jobKey,
    jobPrivateKey: privatePem,
    cleanup: (fn) => cleanups.push(fn),
    async coordinator(over = {}, sink = quiet) {
      const dataDir = over.dataDir ?? (await mkdtemp(path.join(os.tmpdir(), `fsbench-${name}-coord-`)));
      const prefix = over.queuePrefix ?? uniquePrefix(name);
      // 'wx': a data directory reused from an earlier coordinator keeps its key.
      await writeFile(path.join(dataDir, JOB_KEY_FILE), privatePem, { mode: 0o600, flag: 'wx' }).catch((err: unknown) => {
        if (!(err instanceof Error && 'code' in err && err.code === 'EEXIST')) throw err;
      });
      const c = await startCoordinator(
        {
          redisUrl: server().url, queuePrefix: prefix, port: 0, host: '127.0.0.1', token: undefined, readAuth: 'open', dataDir,
          maxAttempts: 3, maxBody: 64 * 1024, maxRuns: 100_000, maxDuration: 86_400_000, maxQueued: 200_000, hostTimeout: 600_000,
          ...over,
        },
        sink,
      );
      cleanups.push(async () => {
        await c.stop();
        await rm(dataDir, { recursive: true, force: true });
      });
      return { ...c, prefix, dataDir };
    },
    async agent(prefix, hostId, machine, labels = [], over = {}) {
      const scratch = await mkdtemp(path.join(os.tmpdir(), `fsbench-${name}-agent-`));
      // Enrolled before it starts, unless the test enrolls it itself (a token, or `agents approve`).
      const stateDir = over.stateDir ?? path.join(scratch, 'agent');
      if (over.enrollToken === undefined && !enrollItself.has(over)) await preEnroll(server().url, prefix, privatePem, stateDir, hostId, machine);
      // An agent refusing to start (a test of that) leaves no directory behind.
      const a = await startAgent(
        { redisUrl: server().url, queuePrefix: prefix, machine, labels, scratch, hostId, heartbeat: 100, stallTimeout: 2000, maxAttempts: 3, stopGrace: 1000, jobKey, stateDir, ...over },
        quiet,
      ).catch(async (err: unknown) => {
        await rm(scratch, { recursive: true, force: true });
        throw err;
      });
      cleanups.push(async () => {
        await a.stop();
        await rm(scratch, { recursive: true, force: true });
      });
      return a;
    },
  };
}

/**
 * The events of queue `name` under `prefix`, read from the stream's start: a reader from `$`
 * (BullMQ's default) misses whatever happens before its first XREAD, which waitUntilReady does
 * not wait for, so an agent quick to take or fail a job could go unseen. Meant for a prefix of
 * the test's own.
 */
export function queueEventsFromStart(name: string, url: string, prefix: string): QueueEvents {
  return new QueueEvents(name, { connection: { url }, prefix, lastEventId: '0-0' });
}
