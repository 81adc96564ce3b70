/**
 * `npm run bench:dispatch`: no-op cells through the whole distributed path (HTTP submit ->
 * coordinator -> BullMQ -> 2 agent processes -> reports collected into SQLite), side by side on
 * the same Redis with a bare BullMQ producer and worker doing the same number of jobs. Reports
 * cells/s, submit-to-stored latency p50/p99 and CPU seconds per process for each side, the
 * ratios, the coordinator's RSS, and whether its heap grows with finished runs (retention.ts).
 *
 *   node --expose-gc dist/bench/dispatch.js [--cells 10000] [--rounds 3] [--hosts 1]
 *     [--bare-workers 1,2] [--profile DIR] [--out bench/results/dispatch.json]
 *
 * Two bare sides (`--bare-workers`): the issue's bare pair, one producer and one worker process;
 * and, like with like, as many worker processes as fsbench has agents. Each agent is one
 * process taking one run at a time (its workers on the `any` queue and its host's queue share
 * one slot), so every bare worker has concurrency 1, and the producer calls addBulk with 1000
 * jobs at a time as the coordinator does. What fsbench adds on top: the HTTP submit and matrix
 * expansion, job data parsed with the schema, the no-op run through `runCell`, a report as the
 * job's return value, and the coordinator reading, validating and storing the reports in
 * SQLite. Each side's `setup` in the JSON says the same.
 *
 * Each `--hosts` value is one fsbench variant. `1` runs both agents on this kernel, as two
 * agents on one machine would; `2` gives them different host ids (FSBENCH_HOST_ID). No-op runs
 * measure nothing on the kernel, so they never take the host lock and both variants run two at
 * a time; the variants differ in the queues and locks the agents look at.
 *
 * From each side's CPU per run, the like-with-like ceiling: the best ratio these cores would allow
 * if an agent cost no more than a bare worker, since the coordinator's and Redis's CPU per run
 * are spent on the same cores (`likeWithLikeCeiling` in the JSON).
 *
 * Then the coordinator's CPU per run with `placement: all` over 2 and over 1,000 simulated hosts,
 * side by side, and what Redis holds per host and per queued run (host-scaling.ts;
 * `--scale-hosts 2,1000 --scale-runs 3000 --scale-rounds 3`). `--only hosts` runs that part
 * alone, `--only dispatch` the rest without it, each kept beside the other's figures in `--out`.
 *
 * `--profile DIR` writes a V8 CPU profile of every coordinator, agent and bare worker process
 * (and of the host-scaling sides' coordinators) there (open them in Chrome's DevTools); the processes run slower while profiled.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import { CoordinatorClient } from '../cli/client.js';
import { connectRedis } from '../queue/redis.js';
import { JOB_PUBLIC_KEY_FILE, writeNewJobKey } from '../queue/signing.js';
import { startRedis } from '../tests/fixtures/redis-server.js';
import { agentsProcess, coordinatorProcess, measureHostScaling } from './host-scaling.js';
import { measureRetention } from './retention.js';
import { child as nodeChild, stopChild, waitOutput, type Child } from '../tests/fixtures/processes.js';
import { median } from '../stats/summary.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const CLI = path.resolve(HERE, '..', 'cli', 'fsbench.js');
/** Cells per matrix: the contract caps a parameter list at 1000 values. */
const PER_MATRIX = 1000;

interface Side {
  readonly name: string;
  readonly jobs: number;
  readonly seconds: number;
  readonly perSecond: number;
  readonly latencyMs: { readonly p50: number; readonly p99: number; readonly max: number };
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? Number.NaN;
}

function side(name: string, start: number, done: readonly { created: number; finished: number }[]): Side {
  const end = Math.max(...done.map((d) => d.finished));
  const latencies = done.map((d) => d.finished - d.created).sort((a, b) => a - b);
  const seconds = (end - start) / 1000;
  return {
    name,
    jobs: done.length,
    seconds: Number(seconds.toFixed(3)),
    perSecond: Math.round(done.length / seconds),
    latencyMs: { p50: percentile(latencies, 50), p99: percentile(latencies, 99), max: latencies.at(-1) ?? Number.NaN },
  };
}

/** A bare worker, in a process of its own like an agent: returns what the no-op would, until SIGTERM. */
async function bareWorker(redisUrl: string, prefix: string): Promise<void> {
  const connection = connectRedis(redisUrl, 'bench-bare-worker');
  const worker = new Worker<unknown, unknown>('jobs', (job) => Promise.resolve({ value: job.id, elapsedMs: 0 }), { connection, prefix, concurrency: 1 });
  await worker.waitUntilReady();
  process.stdout.write('ready\n');
  await new Promise((resolve) => process.once('SIGTERM', resolve));
  await worker.close();
  await connection.quit();
}

/** Node flags for the coordinator and agent processes (`--profile DIR` adds --cpu-prof). */
let childNodeFlags: string[] = [];

/** A node child with this run's profiling flags (`--profile`). */
function child(args: string[], env: Record<string, string> = {}): Child {
  return nodeChild(args, env, childNodeFlags);
}

async function bare(redisUrl: string, n: number, when: string, workers: number): Promise<Side & { workers: number; setup: string; cpuSeconds: { workers: number; redis: number } }> {
  const prefix = `bench-bare-${when}-${workers}`.replace(/\W+/g, '-');
  const procs = Array.from({ length: workers }, () => child([fileURLToPath(import.meta.url), '--role', 'bare-worker', '--redis', redisUrl, '--prefix', prefix]));
  for (const w of procs) await waitOutput(w.output, /ready/);
  // From here on: what starting a worker costs (loading modules) is not the jobs' cost.
  const workerCpuBefore = await Promise.all(procs.map((w) => cpuSecondsOf(w.proc.pid)));
  const connection = connectRedis(redisUrl, 'bench-bare-producer');
  const q = new Queue<unknown, unknown>('jobs', { connection, prefix });
  const redisCpuBefore = await redisCpuSeconds(connection);
  const start = Date.now();
  for (let i = 0; i < n; i += PER_MATRIX) {
    const jobs = Array.from({ length: Math.min(PER_MATRIX, n - i) }, (_, k) => ({
      name: 'run',
      data: { matrixId: 'bare', cell: { id: (i + k).toString(16).padStart(12, '0'), workload: 'noop', params: { sleep: 0, value: i + k } }, repetition: 0, warmup: 0, target: 'any' },
      opts: { jobId: `bare.${i + k}` },
    }));
    await q.addBulk(jobs);
  }
  // Timing comes from the jobs' own timestamps; this only decides when to stop the workers.
  while ((await q.getJobCountByTypes('completed')) < n) await sleep(50);
  const workerCpu = (await Promise.all(procs.map((w) => cpuSecondsOf(w.proc.pid)))).map((c, i) => c - (workerCpuBefore[i] ?? Number.NaN));
  const redisCpu = (await redisCpuSeconds(connection)) - redisCpuBefore;
  await Promise.all(procs.map((w) => stopChild(w.proc)));
  const done: { created: number; finished: number }[] = [];
  for (let i = 0; i < n; i += 1000) {
    for (const j of await q.getJobs(['completed'], i, i + 999, true)) done.push({ created: j.timestamp, finished: j.finishedOn ?? Number.NaN });
  }
  await q.obliterate({ force: true });
  await q.close();
  await connection.quit();
  return {
    ...side(`bare BullMQ, 1 producer + ${workers} worker process(es)`, start, done),
    workers,
    cpuSeconds: { workers: sum(workerCpu), redis: round(redisCpu) },
    setup: `1 producer (addBulk, 1000 jobs per call, jobs kept on completion), ${workers} worker process(es) with concurrency 1 returning a constant`,
  };
}

const MatrixView = z.object({ id: z.string(), state: z.string(), createdAt: z.string(), progress: z.object({ stored: z.number() }) }).loose();
const MatrixList = z.object({ matrices: z.array(MatrixView) }).loose();
const Results = z.object({ runs: z.array(z.object({ storedAt: z.string() }).loose()) }).loose();

/** CPU seconds (user + system) a process has used so far; NaN once it is gone. */
async function cpuSecondsOf(pid: number | undefined): Promise<number> {
  const stat = await readFile(`/proc/${pid ?? 0}/stat`, 'utf8').catch(() => '');
  // Fields after the parenthesised command name, which may itself hold spaces.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** CPU seconds Redis has used so far (INFO cpu), to charge each side its share. */
async function redisCpuSeconds(redis: Redis): Promise<number> {
  const info = await redis.info('cpu');
  const field = (key: string) => Number(new RegExp(`^${key}:([\\d.]+)`, 'm').exec(info)?.[1] ?? Number.NaN);
  return field('used_cpu_user') + field('used_cpu_sys');
}

const round = (x: number) => Number(x.toFixed(2));
const sum = (xs: readonly number[]) => round(xs.reduce((a, b) => a + b, 0));

async function rssOf(pid: number | undefined): Promise<{ rss: number; hwm: number }> {
  const status = await readFile(`/proc/${pid ?? 0}/status`, 'utf8').catch(() => '');
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN) * 1024;
  return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
}

async function fsbench(redisUrl: string, n: number, hosts: number, roundNo: number) {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'fsbench-bench-'));
  // A prefix per round, as the bare sides have: a round must not start on the last one's keys.
  const prefix = `bench-fsbench-${hosts}-${roundNo}`;
  // The coordinator's key made first, so the agents can be given its public key.
  await writeNewJobKey(dataDir);
  const env = {
    REDIS_URL: redisUrl, FSBENCH_QUEUE_PREFIX: prefix, FSBENCH_DATA_DIR: dataDir, FSBENCH_PORT: '0', FSBENCH_SCRATCH: path.join(dataDir, 'scratch'),
    FSBENCH_JOB_KEY: path.join(dataDir, JOB_PUBLIC_KEY_FILE),
  };
  const coord = child([CLI, 'coordinator'], env);
  const url = (await waitOutput(coord.output, /listening on (http:\/\/\S+);/))[1] ?? '';
  const client = new CoordinatorClient(url);
  // Each host's key is enrolled with a one-time token, as on a fleet. Two agents of one host share
  // its key, as compose's replicas share their state volume: the first enrolls it, the second
  // starts once it is enrolled (a second key for an enrolled host waits for an approval).
  const { tokens } = z.object({ tokens: z.array(z.string()) }).loose().parse(await client.json('POST', '/v1/agents/tokens', { count: hosts > 1 ? 2 : 1 }));
  const agents: ReturnType<typeof child>[] = [];
  for (const i of [0, 1]) {
    const host = hosts > 1 ? i : 0;
    const agent = child([CLI, 'agent'], {
      ...env, FSBENCH_JOB_KEY: path.join(dataDir, 'job-key.pub.pem'), FSBENCH_MACHINE: `agent${host}`, FSBENCH_STATE_DIR: path.join(dataDir, 'state', String(host)),
      FSBENCH_ENROLL_TOKEN: tokens[host] ?? '', ...(hosts > 1 ? { FSBENCH_HOST_ID: `bench-host-${i}` } : {}),
    });
    agents.push(agent);
    await waitOutput(agent.output, /waiting for runs/);
  }
  const redisClient = connectRedis(redisUrl, 'bench-cpu');
  const redisCpuBefore = await redisCpuSeconds(redisClient);
  const cpuBefore = await Promise.all([coord, ...agents].map((p) => cpuSecondsOf(p.proc.pid)));
  const ids: string[] = [];
  const rssSamples: { ms: number; stored: number; rssBytes: number }[] = [];
  const start = Date.now();
  for (let i = 0; i < n; i += PER_MATRIX) {
    const count = Math.min(PER_MATRIX, n - i);
    const matrix = { name: `dispatch-${i / PER_MATRIX}`, workload: 'noop', repetitions: 1, warmup: 0, params: { value: Array.from({ length: count }, (_, k) => i + k) } };
    ids.push(z.object({ id: z.string() }).loose().parse(await client.json('POST', '/v1/matrices', matrix)).id);
  }
  // One list request per poll: the summaries carry the stored counters, so watching costs the
  // coordinator little next to the runs it is storing.
  for (;;) {
    const list = MatrixList.parse(await client.json('GET', `/v1/matrices?limit=${ids.length}`)).matrices.filter((m) => ids.includes(m.id));
    const stored = list.reduce((sum, m) => sum + m.progress.stored, 0);
    rssSamples.push({ ms: Date.now() - start, stored, rssBytes: (await rssOf(coord.proc.pid)).rss });
    if (list.length === ids.length && list.every((m) => m.state === 'done')) break;
    await sleep(250);
  }
  const { hwm } = await rssOf(coord.proc.pid);
  const cpuAfter = await Promise.all([coord, ...agents].map((p) => cpuSecondsOf(p.proc.pid)));
  const cpu = cpuAfter.map((c, i) => c - (cpuBefore[i] ?? Number.NaN));
  const cpuSeconds = { coordinator: round(cpu[0] ?? Number.NaN), agents: sum(cpu.slice(1)), redis: round((await redisCpuSeconds(redisClient)) - redisCpuBefore) };
  await redisClient.quit();
  const done: { created: number; finished: number }[] = [];
  for (const id of ids) {
    const created = Date.parse(MatrixView.parse(await client.json('GET', `/v1/matrices/${id}`)).createdAt);
    for (const r of Results.parse(await client.json('GET', `/v1/matrices/${id}/results`)).runs) done.push({ created, finished: Date.parse(r.storedAt) });
  }
  await Promise.all(agents.map((a) => stopChild(a.proc)));
  await stopChild(coord.proc);
  await rm(dataDir, { recursive: true, force: true });
  const label = hosts > 1 ? `fsbench (coordinator + 2 agent processes, ${hosts} simulated hosts)` : 'fsbench (coordinator + 2 agent processes on one host)';
  const setup =
    `HTTP submit of ${ids.length} matrices of up to ${PER_MATRIX} cells, coordinator` +
    ' enqueueing with addBulk (1000 per call, removed on completion), ' +
    '2 agent processes each running one run at a time (no host lock: no-op runs do not measure the kernel), ' +
    "each report the job's return value, read from the queue's event stream and stored by the coordinator in SQLite in batches";
  return { ...side(label, start, done), setup, cpuSeconds, coordinatorPeakRssBytes: hwm, coordinatorRssSamples: rssSamples };
}

const mib = (bytes: number) => Math.round(bytes / 2 ** 20);


function positiveInts(flag: string, text: string): number[] {
  const xs = text.split(',').map(Number);
  if (xs.length === 0 || !xs.every((x) => Number.isInteger(x) && x >= 1)) throw new Error(`--${flag} must be positive integers separated by commas`);
  return xs;
}

type Bare = Awaited<ReturnType<typeof bare>>;
type Ours = Awaited<ReturnType<typeof fsbench>>;
type Round = { round: number; bare: Bare[]; fsbench: (Ours & { hosts: number })[] };

/**
 * The best like-with-like ratio this machine's cores allow, whatever the agents do. Every run
 * needs the coordinator's CPU (signing the job, checking and storing the report) and its share
 * of Redis's; suppose an agent cost no more per run than a bare worker. With every core busy
 * all the time, fsbench would then reach cores / (coordinator + Redis + bare worker CPU per
 * run) runs/s, and the ceiling is that over the bare workers' rate in the same round. An upper
 * bound: no side here keeps every core busy, and agents cost more than bare workers. Measured
 * against the bare side with as many worker processes as fsbench has agents (2).
 */
function likeWithLikeCeiling(results: readonly Round[], cores: number) {
  const ms = (seconds: number, jobs: number) => (seconds * 1000) / jobs;
  const hostsList = [...new Set(results.flatMap((r) => r.fsbench.map((x) => x.hosts)))];
  return hostsList.flatMap((hosts) => {
    const rounds = results.flatMap((r) => {
      const ours = r.fsbench.find((x) => x.hosts === hosts);
      const theirs = r.bare.find((x) => x.workers === 2);
      if (ours === undefined || theirs === undefined) return [];
      const perRun = {
        coordinator: ms(ours.cpuSeconds.coordinator, ours.jobs),
        redis: ms(ours.cpuSeconds.redis, ours.jobs),
        agents: ms(ours.cpuSeconds.agents, ours.jobs),
        bareWorker: ms(theirs.cpuSeconds.workers, theirs.jobs),
      };
      const best = (cores * 1000) / (perRun.coordinator + perRun.redis + perRun.bareWorker);
      return [{ perRun, ratio: Number((best / theirs.perSecond).toFixed(3)) }];
    });
    if (rounds.length === 0) return [];
    const med = (key: keyof (typeof rounds)[number]['perRun']) => Number(median(rounds.map((r) => r.perRun[key])).toFixed(3));
    return [{
      fsbenchHosts: hosts,
      cores,
      median: median(rounds.map((r) => r.ratio)),
      perRound: rounds.map((r) => r.ratio),
      msPerRun: { coordinator: med('coordinator'), redis: med('redis'), agents: med('agents'), bareWorker: med('bareWorker') },
    }];
  });
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      role: { type: 'string', default: 'bench' },
      redis: { type: 'string', default: '' },
      prefix: { type: 'string', default: '' },
      cells: { type: 'string', default: '10000' },
      rounds: { type: 'string', default: '3' },
      hosts: { type: 'string', default: '1' },
      'bare-workers': { type: 'string', default: '1,2' },
      'scale-hosts': { type: 'string', default: '2,1000' },
      'scale-runs': { type: 'string', default: '3000' },
      'scale-rounds': { type: 'string', default: '3' },
      only: { type: 'string', default: '' },
      agents: { type: 'string', default: '1' },
      first: { type: 'string', default: '0' },
      'verify-reports': { type: 'string', default: 'on' },
      profile: { type: 'string', default: '' },
      out: { type: 'string', default: path.resolve(HERE, '..', '..', 'bench', 'results', 'dispatch.json') },
    },
  });
  if (values.role === 'bare-worker') {
    await bareWorker(values.redis, values.prefix);
    return;
  }
  if (values.role === 'agents') {
    await agentsProcess(Number(values.agents), Number(values.first));
    return;
  }
  if (values.role === 'coordinator') {
    await coordinatorProcess(values['verify-reports'] !== 'off');
    return;
  }
  const [n = 0] = positiveInts('cells', values.cells);
  const [rounds = 0] = positiveInts('rounds', values.rounds);
  const hostsList = positiveInts('hosts', values.hosts);
  const bareList = positiveInts('bare-workers', values['bare-workers']);
  if (values.profile !== '') childNodeFlags = ['--cpu-prof', '--cpu-prof-dir', path.resolve(values.profile)];
  const scaleHosts = positiveInts('scale-hosts', values['scale-hosts']);
  const [scaleRuns = 0] = positiveInts('scale-runs', values['scale-runs']);
  const [scaleRounds = 0] = positiveInts('scale-rounds', values['scale-rounds']);
  const redis = await startRedis();
  const hostScaling = () => measureHostScaling(redis.url, fileURLToPath(import.meta.url), scaleHosts, scaleRuns, scaleRounds, childNodeFlags);
  const printHostScaling = (h: Awaited<ReturnType<typeof hostScaling>>) => {
    for (const hosts of scaleHosts) {
      const sides = h.rounds.flatMap((r) => r.sides.filter((x) => x.hosts === hosts && x.verifyReports));
      const perRun = median(sides.map((x) => x.coordinatorCpuMsPerRun));
      const idle = median(sides.map((x) => x.coordinatorIdleCpuMsPerSecond));
      process.stdout.write(`${scaleRuns} runs, placement all over ${hosts} hosts, median of ${scaleRounds}: coordinator CPU ${perRun} ms per run; idle ${idle} ms per second\n`);
    }
    process.stdout.write(`  ratio (coordinator CPU per run, ${scaleHosts.at(-1) ?? 0} hosts / ${scaleHosts[0] ?? 0}): median ${h.ratio.median}, rounds ${h.ratio.perRound.join(', ')}\n`);
    const m = h.redisMemory;
    process.stdout.write(
      `  Redis at ${m.hosts} hosts (used_memory, with each connection's buffers; keys alone): ${m.bytesPerHost} B (${m.datasetBytesPerHost} B) per registered host, ` +
        `${m.bytesPerQueuedRun} B (${m.datasetBytesPerQueuedRun} B) per queued run\n`,
    );
    process.stdout.write(
      `  checking report MACs at ${h.reportChecks.hosts} hosts: ${(h.reportChecks.median * 100).toFixed(1)}% of coordinator CPU per run (net of idle) side by side (median; rounds ` +
        `${h.reportChecks.perRound.map((x) => `${(x * 100).toFixed(1)}%`).join(', ')}); the check alone ${h.reportChecks.directMicrosecondsPerReport} us per report, ` +
        `${(h.reportChecks.directShare * 100).toFixed(2)}% of it\n`,
    );
  };
  try {
    if (values.only === 'hosts') {
      // Only this part, kept beside the rest of an earlier full run's figures.
      const h = await hostScaling();
      const previous = z.record(z.string(), z.unknown()).parse(JSON.parse(await readFile(values.out, 'utf8').catch(() => '{}')));
      mkdirSync(path.dirname(values.out), { recursive: true });
      writeFileSync(values.out, `${JSON.stringify({ ...previous, hostScaling: { date: new Date().toISOString(), ...h } }, null, 2)}\n`);
      printHostScaling(h);
      process.stdout.write(`written to ${values.out}\n`);
      return;
    }
    // Rounds, each side by side, and medians over them: this machine is shared and noisy, and a
    // ratio is only fair between measurements made close together. Within a round the order
    // alternates, so drift during a round favours neither side.
    const results: Round[] = [];
    for (let round = 0; round < rounds; round++) {
      const r: Round = { round, bare: [], fsbench: [] };
      const runBare = async () => {
        for (const w of bareList) r.bare.push(await bare(redis.url, n, `round ${round + 1}`, w));
      };
      const runOurs = async () => {
        for (const hosts of hostsList) r.fsbench.push({ ...(await fsbench(redis.url, n, hosts, round)), hosts });
      };
      if (round % 2 === 0) {
        await runBare();
        await runOurs();
      } else {
        await runOurs();
        await runBare();
      }
      for (const x of [...r.bare, ...r.fsbench]) process.stderr.write(`round ${round + 1}: ${x.name}: ${x.perSecond}/s\n`);
      results.push(r);
    }
    const retention = await measureRetention(redis.url, CLI, [Math.min(n, 2000), n, n, n]);
    // `--only dispatch`: the host scaling of an earlier run kept as it was.
    const previousScaling =
      values.only === 'dispatch' ? z.object({ hostScaling: z.unknown() }).loose().safeParse(JSON.parse(await readFile(values.out, 'utf8').catch(() => '{}'))).data?.hostScaling : undefined;
    const scaling = values.only === 'dispatch' ? undefined : await hostScaling();
    const ratios = hostsList.flatMap((hosts) =>
      bareList.map((workers) => {
        const perRound = results.map((r) => {
          const ours = r.fsbench.find((x) => x.hosts === hosts)?.perSecond ?? Number.NaN;
          const theirs = r.bare.find((x) => x.workers === workers)?.perSecond ?? Number.NaN;
          return Number((ours / theirs).toFixed(3));
        });
        return { fsbenchHosts: hosts, bareWorkerProcesses: workers, median: median(perRound), perRound };
      }),
    );
    const ceiling = likeWithLikeCeiling(results, os.cpus().length);
    const report = {
      date: new Date().toISOString(),
      machine: { cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model ?? 'unknown', node: process.version, memoryBytes: os.totalmem(), loadAverage: os.loadavg() },
      cells: n,
      rounds: results.map((r) => ({ ...r, fsbench: r.fsbench.map((x) => ({ ...x, coordinatorRssSamples: undefined })) })),
      ratios,
      likeWithLikeCeiling: ceiling,
      coordinatorPeakRssMiB: Math.max(...results.flatMap((r) => r.fsbench.map((x) => mib(x.coordinatorPeakRssBytes)))),
      coordinatorRssSamples: results[0]?.fsbench[0]?.coordinatorRssSamples ?? [],
      coordinatorRetention: retention,
      hostScaling: scaling === undefined ? previousScaling : { date: new Date().toISOString(), ...scaling },
    };
    mkdirSync(path.dirname(values.out), { recursive: true });
    writeFileSync(values.out, `${JSON.stringify(report, null, 2)}\n`);
    const rate = (xs: readonly { perSecond: number }[]) => `${median(xs.map((x) => x.perSecond))}/s`;
    for (const w of bareList) {
      process.stdout.write(`${n} runs, median of ${rounds}: bare BullMQ, 1 producer + ${w} worker process(es): ${rate(results.flatMap((r) => r.bare.filter((x) => x.workers === w)))}\n`);
    }
    for (const hosts of hostsList) {
      const ours = results.flatMap((r) => r.fsbench.filter((x) => x.hosts === hosts));
      process.stdout.write(`${n} runs, median of ${rounds}: ${ours[0]?.name ?? ''}: ${rate(ours)}\n`);
    }
    for (const r of ratios) {
      process.stdout.write(`  ratio (fsbench, ${r.fsbenchHosts} host(s)) / (bare, ${r.bareWorkerProcesses} worker process(es)): median ${r.median}, rounds ${r.perRound.join(', ')}\n`);
    }
    for (const c of ceiling) {
      process.stdout.write(
        `  like-with-like ceiling (fsbench, ${c.fsbenchHosts} host(s)): with agents as cheap as bare workers, ${c.cores} cores would allow at most ${c.median}x ` +
          `(rounds ${c.perRound.join(', ')}); CPU ms per run: coordinator ${c.msPerRun.coordinator}, Redis ${c.msPerRun.redis}, agents ${c.msPerRun.agents}, bare worker ${c.msPerRun.bareWorker}\n`,
      );
    }
    process.stdout.write(`  coordinator RSS peak ${report.coordinatorPeakRssMiB} MiB\n`);
    const heap = retention.heapAfterGcMiB.map((h) => `${h.heapMiB} MiB after ${h.runs} runs`).join(', ');
    process.stdout.write(`  coordinator heap after full collections: ${heap}\n`);
    if (scaling !== undefined) printHostScaling(scaling);
    process.stdout.write(`written to ${values.out}\n`);
  } finally {
    await redis.stop();
  }
}

await main();
