/**
 * Part of `npm run bench:dispatch`: what the coordinator pays per run as the hosts grow. The
 * same number of no-op runs, placed with `placement: all` over 2 and over 1,000 simulated hosts
 * (agents with distinct host ids, many to a process: a process per agent would measure this
 * machine's two cores, not the coordinator), side by side in one run. The coordinator is a
 * process of its own, so its CPU (user + system, from /proc) is its alone; it is read from the
 * submission until the last run is stored, and again over a stretch with nothing to do, which
 * is what watching that many hosts costs by itself.
 *
 * At the most hosts a second side runs with the coordinator not checking the agents' report
 * signatures (startCoordinator's bench-only `verifyReports: false`; the agents sign either way),
 * so what checking them costs is measured side by side, as a share of the coordinator's CPU per run.
 * The agents enroll with one-time tokens, as a fleet would.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { startAgent } from '../agent/agent.js';
import type { RunningAgent } from '../agent/contract.js';
import { CoordinatorClient } from '../cli/client.js';
import { startCoordinator } from '../coordinator/server.js';
import { generateKeyPairSync } from 'node:crypto';
import { authenticate } from '../coordinator/ingest/index.js';
import type { EnrolledKey } from '../coordinator/enrollment/index.js';
import { reportMac, reportMacKey } from '../queue/enrollment.js';
import { loadSettings } from '../settings/index.js';
import { child, stopChild, waitOutput, type Child } from '../tests/fixtures/processes.js';
import { connectRedis } from '../queue/redis.js';
import type { Redis } from 'ioredis';
import { median } from '../stats/summary.js';

/** Cells per matrix: the contract caps a parameter list at 1000 values. */
const PER_MATRIX = 1000;
/** Processes the simulated hosts' agents share. */
const AGENT_PROCESSES = 2;
/** How long the idle coordinator is watched. */
const IDLE_MS = 5000;

export interface HostScalingSide {
  readonly hosts: number;
  /** Whether the coordinator checked each report's signature (always, outside this bench). */
  readonly verifyReports: boolean;
  readonly runs: number;
  readonly seconds: number;
  readonly coordinatorCpuSeconds: number;
  readonly coordinatorCpuMsPerRun: number;
  /** CPU the coordinator used per second with every agent live and no work: polling and watching. */
  readonly coordinatorIdleCpuMsPerSecond: number;
  /**
   * CPU per run less what the coordinator spends idle over as long (idle rate x duration): what
   * runs cost it, without the polling that a slower side (this machine is shared) pays more of.
   */
  readonly coordinatorNetCpuMsPerRun: number;
  /**
   * Redis (INFO memory) with no agent, with every host's agent registered and idle, and with
   * every run queued (the agents stopped meanwhile): used_memory, which counts each client
   * connection's buffers, and used_memory_dataset, the keys alone.
   */
  readonly redisMemory: {
    readonly clients: { readonly empty: number; readonly registered: number };
    readonly bytesPerHost: number;
    readonly datasetBytesPerHost: number;
    readonly bytesPerQueuedRun: number;
    readonly datasetBytesPerQueuedRun: number;
  };
}

export interface HostScaling {
  readonly setup: string;
  readonly rounds: { readonly round: number; readonly sides: HostScalingSide[] }[];
  /** Coordinator CPU per run at the most hosts / at the fewest, per round and their median (reports checked on both). */
  readonly ratio: { readonly median: number; readonly perRound: number[] };
  /**
   * At the most hosts: (net CPU per run checking report MACs - without) / net CPU per run
   * checking them, per round and the median: the share of the coordinator's CPU per run that
   * checking reports costs.
   */
  /** At the most hosts, medians over the rounds' sides that checked reports (HostScalingSide.redisMemory). */
  readonly redisMemory: { readonly hosts: number; readonly bytesPerHost: number; readonly datasetBytesPerHost: number; readonly bytesPerQueuedRun: number; readonly datasetBytesPerQueuedRun: number };
  readonly reportChecks: {
    readonly hosts: number;
    readonly median: number;
    readonly perRound: number[];
    /**
     * The check alone (collector.ts `authenticate`: key lookup, HMAC, compare) over a 2 KiB report,
     * timed in this process, and as a share of the median net CPU per run checking them: the
     * side-by-side figure is within the rounds' noise (a few percent either way), this one is not.
     */
    readonly directMicrosecondsPerReport: number;
    readonly directShare: number;
  };
}

/** The agents of `count` simulated hosts in this process, until SIGTERM (`--role agents`). */
export async function agentsProcess(count: number, first: number): Promise<void> {
  const s = loadSettings(['redisUrl', 'redisCa', 'redisCert', 'redisKey', 'redisPasswordFile', 'redisSentinels', 'redisMaster', 'redisSentinelUser', 'redisSentinelPassword', 'redisSentinelTls', 'queuePrefix', 'machine', 'labels', 'scratch', 'hostId', 'heartbeat', 'stallTimeout', 'maxAttempts', 'stopGrace', 'jobKey'], {});
  const quiet = () => undefined;
  // One token per host, in the order of the hosts (`side` makes them).
  const tokens = (process.env['BENCH_ENROLL_TOKENS'] ?? '').split(',');
  const agents: RunningAgent[] = [];
  for (let i = first; i < first + count; i += 10) {
    const batch = Array.from({ length: Math.min(10, first + count - i) }, (_, k) => {
      const n = String(i + k).padStart(3, '0');
      return startAgent({ ...s, hostId: `bench-host-${n}`, machine: `bench-${n}`, scratch: path.join(s.scratch, n), enrollToken: tokens[i + k - first] }, quiet);
    });
    agents.push(...(await Promise.all(batch)));
  }
  await Promise.all(agents.map((a) => a.enrolled));
  process.stdout.write('ready\n');
  await new Promise((resolve) => process.once('SIGTERM', resolve));
  await Promise.all(agents.map((a) => a.stop()));
}

/** Microseconds the coordinator's check of one report's MAC takes, median of 5 batches of 20,000. */
function reportCheckMicroseconds(): number {
  const agent = generateKeyPairSync('x25519');
  const coordinator = generateKeyPairSync('x25519');
  const key = 'SHA256:bench';
  const enrolled: EnrolledKey = {
    key,
    publicKey: generateKeyPairSync('ed25519').publicKey,
    reportKeyPem: '',
    hostId: 'bench-host',
    machine: 'bench',
    macKey: reportMacKey(coordinator.privateKey, agent.publicKey, key, 'bench-host'),
  };
  const keys = new Map([[key, enrolled]]);
  // About a noop report's size with its result's info and limits.
  const report = JSON.stringify({ pad: 'x'.repeat(2000) });
  const envelope = { report, key, mac: reportMac(reportMacKey(agent.privateKey, coordinator.publicKey, key, 'bench-host'), report) };
  const batches: number[] = [];
  for (let b = 0; b < 5; b++) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < 20_000; i++) if (authenticate(envelope, (k) => keys.get(k)) !== enrolled) throw new Error('the check failed');
    batches.push(Number(process.hrtime.bigint() - start) / 1000 / 20_000);
  }
  return Number(median(batches).toFixed(2));
}

/** A coordinator from the environment's settings, checking report signatures or not (`--role coordinator`). */
export async function coordinatorProcess(verifyReports: boolean): Promise<void> {
  const s = loadSettings(['redisUrl', 'queuePrefix', 'port', 'host', 'token', 'readAuth', 'dataDir', 'maxAttempts', 'maxBody', 'maxRuns', 'maxDuration', 'maxQueued', 'hostTimeout'], {});
  const c = await startCoordinator({ ...s, verifyReports }, (line: string) => {
    process.stdout.write(`${line}\n`);
  });
  await new Promise((resolve) => process.once('SIGTERM', resolve));
  await c.stop();
}

/** CPU seconds (user + system) a process has used so far. */
async function cpuSecondsOf(pid: number | undefined): Promise<number> {
  const stat = await readFile(`/proc/${pid ?? 0}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime and stime, in clock ticks (100 per second on Linux).
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** INFO memory's used_memory and used_memory_dataset, and INFO clients' connected_clients. */
async function redisMemory(redis: Redis): Promise<{ used: number; dataset: number; clients: number }> {
  const info = `${await redis.info('memory')}\n${await redis.info('clients')}`;
  const field = (key: string) => Number(new RegExp(`^${key}:(\\d+)`, 'm').exec(info)?.[1] ?? Number.NaN);
  return { used: field('used_memory'), dataset: field('used_memory_dataset'), clients: field('connected_clients') };
}

/**
 * The agents of one simulated host per token, in `processes` processes of `self --role agents`
 * (bench/dispatch.js), with the coordinator's settings in `env`: a process per agent would
 * measure this machine's cores, not the coordinator. Wait for them with simulatedHostsReady.
 */
export function startSimulatedHosts(self: string, env: Record<string, string>, tokens: readonly string[], processes = AGENT_PROCESSES): Child[] {
  const hosts = tokens.length;
  return Array.from({ length: processes }, (_, p) => {
    const first = Math.floor((p * hosts) / processes);
    const count = Math.floor(((p + 1) * hosts) / processes) - first;
    const c = child([self, '--role', 'agents', '--agents', String(count), '--first', String(first)], { ...env, BENCH_ENROLL_TOKENS: tokens.slice(first, first + count).join(',') });
    // Said at once: the side waiting for its runs only notices at its next poll, a test never.
    c.proc.once('exit', (code, signal) => {
      if (code !== 0 && signal !== 'SIGTERM' && signal !== 'SIGKILL') process.stderr.write(`agents ${first}-${first + count - 1} exited (${code ?? signal ?? '?'}):\n${c.output().slice(-4000)}\n`);
    });
    return c;
  });
}

/** Once every simulated host's agent is enrolled; 1,000 of them take a minute or two here. */
export async function simulatedHostsReady(procs: readonly Child[], ms = 300_000): Promise<void> {
  await Promise.all(procs.map((p) => waitOutput(p.output, /ready/, ms)));
}

const Agents = z.object({ hosts: z.number() }).loose();
const Created = z.object({ id: z.string(), runs: z.number() }).loose();
const Matrix = z.object({ state: z.string() }).loose();

const Tokens = z.object({ tokens: z.array(z.string()) }).loose();

async function side(redisUrl: string, self: string, hosts: number, runs: number, round: number, verifyReports: boolean, nodeFlags: readonly string[]): Promise<HostScalingSide> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'fsbench-bench-hosts-'));
  const env = { REDIS_URL: redisUrl, FSBENCH_QUEUE_PREFIX: `bench-hosts-${hosts}-${round}-${verifyReports ? 'v' : 'n'}`, FSBENCH_DATA_DIR: dataDir, FSBENCH_PORT: '0', FSBENCH_SCRATCH: path.join(dataDir, 'scratch') };
  const coord = child([self, '--role', 'coordinator', '--verify-reports', verifyReports ? 'on' : 'off'], env, nodeFlags);
  const procs: ReturnType<typeof child>[] = [];
  try {
    const url = (await waitOutput(coord.output, /listening on (http:\/\/\S+);/))[1] ?? '';
    const client = new CoordinatorClient(url);
    const { tokens } = Tokens.parse(await client.json('POST', '/v1/agents/tokens', { count: hosts, ttl: '1h' }));
    const redis = connectRedis(redisUrl, 'bench-hosts-memory');
    let memory: HostScalingSide['redisMemory'];
    let before: number;
    let start: number;
    const ids: string[] = [];
    let placed = 0;
    try {
      const empty = await redisMemory(redis);
      procs.push(...startSimulatedHosts(self, { ...env, FSBENCH_JOB_KEY: path.join(dataDir, 'job-key.pub.pem') }, tokens));
      await simulatedHostsReady(procs);
      while (Agents.parse(await client.json('GET', '/v1/agents')).hosts < hosts) await sleep(100);
      const registered = await redisMemory(redis);
      // The agents stopped (SIGSTOP) while the runs are queued, so that Redis holds every one of
      // them when it is measured; their heartbeats lapse only after 5 missed beats (10 s), longer
      // than submitting takes, and they take the runs once continued.
      for (const p of procs) p.proc.kill('SIGSTOP');
      try {
        before = await cpuSecondsOf(coord.proc.pid);
        start = Date.now();
        const cells = Math.ceil(runs / hosts);
        for (let i = 0; i < cells; i += PER_MATRIX) {
          const values = Array.from({ length: Math.min(PER_MATRIX, cells - i) }, (_, k) => i + k);
          const m = Created.parse(await client.json('POST', '/v1/matrices', { name: `hosts-${hosts}-${i}`, workload: 'noop', repetitions: 1, warmup: 0, placement: 'all', params: { value: values } }));
          ids.push(m.id);
          placed += m.runs;
        }
        const queued = await redisMemory(redis);
        process.stderr.write(`hosts ${hosts}: Redis used_memory ${empty.used} B empty, ${registered.used} B registered, ${queued.used} B with ${placed} runs queued (dataset ${empty.dataset}, ${registered.dataset}, ${queued.dataset}); clients ${empty.clients}, ${registered.clients}\n`);
        memory = {
          clients: { empty: empty.clients, registered: registered.clients },
          bytesPerHost: Math.round((registered.used - empty.used) / hosts),
          datasetBytesPerHost: Math.round((registered.dataset - empty.dataset) / hosts),
          bytesPerQueuedRun: Math.round((queued.used - registered.used) / placed),
          datasetBytesPerQueuedRun: Math.round((queued.dataset - registered.dataset) / placed),
        };
      } finally {
        for (const p of procs) p.proc.kill('SIGCONT');
      }
    } finally {
      await redis.quit();
    }
    for (const id of ids) {
      while (Matrix.parse(await client.json('GET', `/v1/matrices/${id}`)).state !== 'done') {
        // An agents' process gone would leave its hosts' runs waiting for ever.
        const gone = procs.find((p) => p.proc.exitCode !== null || p.proc.signalCode !== null);
        if (gone) throw new Error(`an agents' process exited (${gone.proc.exitCode ?? gone.proc.signalCode ?? '?'}) before its runs were done:\n${gone.output().slice(-4000)}`);
        await sleep(250);
      }
    }
    const seconds = (Date.now() - start) / 1000;
    const busy = (await cpuSecondsOf(coord.proc.pid)) - before;
    const idleBefore = await cpuSecondsOf(coord.proc.pid);
    await sleep(IDLE_MS);
    const idle = (await cpuSecondsOf(coord.proc.pid)) - idleBefore;
    const idleRate = idle / (IDLE_MS / 1000);
    return {
      hosts,
      verifyReports,
      runs: placed,
      coordinatorNetCpuMsPerRun: Number((((busy - idleRate * seconds) * 1000) / placed).toFixed(3)),
      seconds: Number(seconds.toFixed(2)),
      coordinatorCpuSeconds: Number(busy.toFixed(2)),
      coordinatorCpuMsPerRun: Number(((busy * 1000) / placed).toFixed(3)),
      coordinatorIdleCpuMsPerSecond: Number(((idle * 1000) / (IDLE_MS / 1000)).toFixed(1)),
      redisMemory: memory,
    };
  } finally {
    await Promise.all(procs.map((p) => stopChild(p.proc)));
    await stopChild(coord.proc);
    await rm(dataDir, { recursive: true, force: true });
  }
}


/** Rounds of every host count, the order alternating so drift favours neither. */
/** `coordinatorNodeFlags`: node flags of each side's coordinator process (bench:dispatch's `--profile`). */
export async function measureHostScaling(redisUrl: string, self: string, hostCounts: readonly number[], runs: number, rounds: number, coordinatorNodeFlags: readonly string[] = []): Promise<HostScaling> {
  const result: HostScaling['rounds'] = [];
  const most = Math.max(...hostCounts);
  // Every host count with reports checked, and the most hosts once more without.
  const plan: [number, boolean][] = [...hostCounts.map((h): [number, boolean] => [h, true]), [most, false]];
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? plan : [...plan].reverse();
    const sides: HostScalingSide[] = [];
    for (const [hosts, verify] of order) {
      const s = await side(redisUrl, self, hosts, runs, round, verify, coordinatorNodeFlags);
      process.stderr.write(
        `hosts round ${round + 1}: ${hosts} hosts${verify ? '' : ', reports not checked'}: ${s.coordinatorCpuMsPerRun} ms coordinator CPU per run, idle ${s.coordinatorIdleCpuMsPerSecond} ms/s\n`,
      );
      sides.push(s);
    }
    result.push({ round, sides: sides.sort((a, b) => a.hosts - b.hosts || Number(b.verifyReports) - Number(a.verifyReports)) });
  }
  const checked = (r: HostScaling['rounds'][number]) => r.sides.filter((x) => x.verifyReports);
  const perRound = result.map((r) => Number(((checked(r).at(-1)?.coordinatorCpuMsPerRun ?? Number.NaN) / (checked(r)[0]?.coordinatorCpuMsPerRun ?? Number.NaN)).toFixed(3)));
  // Net of idle polling: what a run costs, which is what checking its report adds to.
  const checkShare = result.map((r) => {
    const on = r.sides.find((x) => x.hosts === most && x.verifyReports)?.coordinatorNetCpuMsPerRun ?? Number.NaN;
    const off = r.sides.find((x) => x.hosts === most && !x.verifyReports)?.coordinatorNetCpuMsPerRun ?? Number.NaN;
    return Number(((on - off) / on).toFixed(3));
  });
  const direct = reportCheckMicroseconds();
  const perRunChecked = median(result.map((r) => r.sides.find((x) => x.hosts === most && x.verifyReports)?.coordinatorNetCpuMsPerRun ?? Number.NaN));
  const mostChecked = result.flatMap((r) => r.sides.filter((x) => x.hosts === most && x.verifyReports));
  const memoryMedian = (f: (m: HostScalingSide['redisMemory']) => number) => median(mostChecked.map((x) => f(x.redisMemory)));
  return {
    setup:
      `${runs} no-op runs per side, placement: all (cells = runs / hosts), submitted over HTTP; a coordinator process; ` +
      `the hosts' agents in-process in ${AGENT_PROCESSES} processes, distinct FSBENCH_HOST_ID each, default heartbeat; ` +
      `coordinator CPU from the submission until the last run is stored, then ${IDLE_MS / 1000} s idle; ` +
      'Redis INFO memory before the agents start, once every host is registered, and with every run queued (agents stopped with SIGSTOP while submitting)',
    rounds: result,
    ratio: { median: median(perRound), perRound },
    redisMemory: {
      hosts: most,
      bytesPerHost: memoryMedian((m) => m.bytesPerHost),
      datasetBytesPerHost: memoryMedian((m) => m.datasetBytesPerHost),
      bytesPerQueuedRun: memoryMedian((m) => m.bytesPerQueuedRun),
      datasetBytesPerQueuedRun: memoryMedian((m) => m.datasetBytesPerQueuedRun),
    },
    reportChecks: {
      hosts: most,
      median: median(checkShare),
      perRound: checkShare,
      directMicrosecondsPerReport: direct,
      directShare: Number((direct / (perRunChecked * 1000)).toFixed(4)),
    },
  };
}
