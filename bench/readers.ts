/**
 * `npm run bench:readers`: a coordinator under heavy readers. A real coordinator process (and a
 * real redis-server, and one agent process running a long no-op matrix so that progress events
 * flow) serves, all at once:
 * - 20 clients each downloading every page of a large stored matrix with `histograms=1`
 *   (2,000 inotify cells x 10 runs, synthetic, each run with a latency histogram of 128
 *   buckets), following `next` and waiting `Retry-After` when the download cap refuses them;
 * - 200 clients on the event stream of the running matrix, then a probe opening 20 streams more
 *   than the stream cap leaves room for, which must be refused;
 * while a worker thread (its own event loop, so the clients' work does not delay it) asks
 * `/healthz` every 50 ms and the coordinator's RSS is read from /proc every 100 ms.
 *
 *   node dist/bench/readers.js [--cells 2000] [--repetitions 10] [--buckets 128]
 *     [--downloads 20] [--streams 200] [--out bench/results/readers.json]
 *
 * The coordinator runs with its default caps (FSBENCH_MAX_DOWNLOADS, FSBENCH_MAX_STREAMS) unless
 * the environment sets them. Results go to bench/results/readers.json. This is a benchmark, not
 * a test: the machine is shared and its figures move with its neighbours.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { z } from 'zod';
import { parseMatrix, type Cell } from '../contract/matrix.js';
import type { RunResult } from '../contract/result.js';
import { loadSettings } from '../settings/index.js';
import { JOB_PUBLIC_KEY_FILE, writeNewJobKey } from '../queue/signing.js';
import { Store, type StoredRun } from '../coordinator/store/index.js';
import { startRedis } from '../tests/fixtures/redis-server.js';
import { inotifySweepCells, syntheticRunStream } from '../tests/fixtures/synthetic.js';
import { child, stopChild, waitOutput } from '../tests/fixtures/processes.js';
import { messageOf } from '../contract/errors.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const CLI = path.resolve(HERE, '..', 'cli', 'fsbench.js');
const HEALTHZ_EVERY_MS = 50;
const RSS_EVERY_MS = 100;
/** What the issue asks of /healthz while the readers run. */
const HEALTHZ_TARGET_MS = 200;

/** The coordinator's event-loop delay since the previous scrape, from its Prometheus metrics. */
async function eventLoopDelay(url: string): Promise<{ p99Ms: number; maxMs: number }> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const seconds = (name: string) => {
    const m = new RegExp(`^fsbench_nodejs_eventloop_lag_${name}_seconds (\\S+)$`, 'm').exec(text);
    const v = Number(m?.[1]);
    if (!Number.isFinite(v)) throw new Error(`the coordinator's /metrics has no fsbench_nodejs_eventloop_lag_${name}_seconds`);
    return round1(v * 1000);
  };
  return { p99Ms: seconds('p99'), maxMs: seconds('max') };
}

// ---- the /healthz sampler, in a worker thread ----

const SamplerData = z.object({ url: z.string(), everyMs: z.number() });

async function sampler(): Promise<void> {
  const { url, everyMs } = SamplerData.parse(workerData);
  const samples: { at: number; ms: number; ok: boolean }[] = [];
  const state = { stop: false };
  parentPort?.once('message', () => {
    state.stop = true;
  });
  while (!state.stop) {
    const t0 = performance.now();
    let ok = false;
    try {
      const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(10_000) });
      await res.arrayBuffer();
      ok = res.status === 200;
    } catch {
      ok = false;
    }
    const ms = performance.now() - t0;
    samples.push({ at: Date.now(), ms, ok });
    await sleep(Math.max(0, everyMs - ms));
  }
  parentPort?.postMessage(samples);
}

// ---- helpers ----

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? Number.NaN;
}

const round1 = (x: number) => Math.round(x * 10) / 10;
const mib = (bytes: number) => round1(bytes / 2 ** 20);

async function rssOf(pid: number | undefined): Promise<{ rss: number; hwm: number }> {
  const status = await readFile(`/proc/${pid ?? 0}/status`, 'utf8').catch(() => '');
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN) * 1024;
  return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
}

/** 2,000 cells of the benchmarks' inotify sweep (fewer with --cells). */
function benchCells(n: number): Cell[] {
  return inotifySweepCells('readers', 5).slice(0, n);
}

/** A latency histogram as wide as a real run's (the probe's log-linear buckets, non-empty ones only). */
function widen(r: RunResult, buckets: number): RunResult {
  if (r.state !== 'ok') return r;
  const b = Array.from({ length: buckets }, (_, i): [number, number, number] => {
    const low = Math.round(8192 * 2 ** (i / 32));
    return [low, Math.round(8192 * 2 ** ((i + 1) / 32)), 1 + ((i * 7 + r.repetition) % 50)];
  });
  return { ...r, histograms: { writeToEventLatency: { unit: 'ns', buckets: b } } };
}

function populate(dataDir: string, id: string, cells: readonly Cell[], repetitions: number, buckets: number): number {
  const store = Store.open(dataDir);
  try {
    const spec = parseMatrix({ name: id, workload: 'inotify', repetitions, warmup: 0 });
    store.createMatrix({ id, spec, targets: [{ target: 'any', machine: null }], cells, expectedRuns: cells.length * repetitions, estimatedMs: 0 });
    store.markEnqueued(id);
    let batch: StoredRun[] = [];
    for (const result of syntheticRunStream(cells, repetitions, { matrixId: id, machine: { machine: 'bench' }, seed: 7 })) {
      batch.push({ kind: 'result', matrixId: id, target: 'any', result: widen(result, buckets), attempts: 1 });
      if (batch.length === 5000) {
        store.storeRuns(batch);
        batch = [];
      }
    }
    if (batch.length > 0) store.storeRuns(batch);
    return cells.length * repetitions;
  } finally {
    store.close();
  }
}

// ---- the readers ----

interface DownloadStats {
  pages: number;
  bytes: number;
  refused: number;
  runs: number | null;
  ms: number;
  error: string | null;
}

const NEXT = /"next":(null|"([A-Za-z0-9_-]*)")\}\s*$/;
const FullPage = z.object({ runs: z.array(z.unknown()), next: z.string().nullable() }).loose();

/**
 * Every page of one matrix's runs with histograms. Only the first client parses its pages (to
 * count the runs); the others count bytes and read `next` from the end of the body, so the
 * bench's own CPU goes to the coordinator's sockets rather than to JSON.parse.
 */
async function download(url: string, id: string, parse: boolean): Promise<DownloadStats> {
  const s: DownloadStats = { pages: 0, bytes: 0, refused: 0, runs: parse ? 0 : null, ms: 0, error: null };
  const t0 = performance.now();
  let cursor: string | null = null;
  try {
    for (;;) {
      const q = new URLSearchParams({ histograms: '1' });
      if (cursor !== null) q.set('cursor', cursor);
      const res = await fetch(`${url}/v1/matrices/${id}/results?${q.toString()}`);
      if (res.status === 503) {
        s.refused++;
        await res.arrayBuffer();
        // As a polite client does: wait what Retry-After says, plus a little so the refused do not return in step.
        await sleep(Number(res.headers.get('retry-after') ?? '1') * 1000 + Math.random() * 500);
        continue;
      }
      if (res.status !== 200 || !res.body) throw new Error(`HTTP ${res.status}`);
      const body: ReadableStream<Uint8Array> = res.body;
      // Only the parsing client keeps its pages; the others keep the last chunks, where `next` is.
      const kept: Uint8Array[] = [];
      let keptBytes = 0;
      for await (const chunk of body) {
        s.bytes += chunk.byteLength;
        kept.push(chunk);
        keptBytes += chunk.byteLength;
        while (!parse && kept.length > 1 && keptBytes - (kept[0]?.byteLength ?? 0) >= 4096) keptBytes -= kept.shift()?.byteLength ?? 0;
      }
      const text = Buffer.concat(kept).toString('utf8');
      const tail = text.slice(-4096);
      s.pages++;
      let next: string | null;
      if (parse) {
        const page = FullPage.parse(JSON.parse(text));
        s.runs = (s.runs ?? 0) + page.runs.length;
        next = page.next;
      } else {
        const m = NEXT.exec(tail);
        if (!m) throw new Error('a page without `next` at its end');
        next = m[1] === 'null' ? null : (m[2] ?? null);
      }
      if (next === null) break;
      cursor = next;
    }
  } catch (err) {
    s.error = messageOf(err);
  }
  s.ms = performance.now() - t0;
  return s;
}

interface Stream {
  readonly status: number;
  readonly counter: { events: number };
  readonly close: () => void;
  readonly done: Promise<void>;
}

const PROGRESS = 'event: progress';

/** One event-stream client: counts the progress events it receives until closed. */
async function openStream(url: string, id: string): Promise<Stream> {
  const abort = new AbortController();
  const res = await fetch(`${url}/v1/matrices/${id}/events`, { signal: abort.signal });
  const counter = { events: 0 };
  let done = Promise.resolve();
  if (res.status === 200 && res.body) {
    const body: ReadableStream<Uint8Array> = res.body;
    done = (async () => {
      const decoder = new TextDecoder();
      // The end of the text before, so a marker split between two chunks is still seen once.
      let carry = '';
      try {
        for await (const chunk of body) {
          const text = carry + decoder.decode(chunk, { stream: true });
          counter.events += text.split(PROGRESS).length - 1;
          carry = text.slice(-(PROGRESS.length - 1));
        }
      } catch {
        // Aborted by close(): the end of this client.
      }
    })();
  } else {
    await res.arrayBuffer().catch(() => undefined);
  }
  return { status: res.status, counter, close: () => { abort.abort(); }, done };
}

const Created = z.object({ id: z.string() }).loose();
const Detail = z.object({ state: z.string() }).loose();

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      cells: { type: 'string', default: '2000' },
      repetitions: { type: 'string', default: '10' },
      buckets: { type: 'string', default: '128' },
      downloads: { type: 'string', default: '20' },
      streams: { type: 'string', default: '200' },
      out: { type: 'string', default: path.resolve(HERE, '..', '..', 'bench', 'results', 'readers.json') },
    },
  });
  const cellCount = Number(values.cells);
  const repetitions = Number(values.repetitions);
  const buckets = Number(values.buckets);
  const downloads = Number(values.downloads);
  const streams = Number(values.streams);
  const caps = loadSettings(['maxDownloads', 'maxStreams']);

  const redis = await startRedis();
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'fsbench-readers-'));
  const procs: ChildProcess[] = [];
  try {
    const t0 = performance.now();
    const runs = populate(dataDir, 'large', benchCells(cellCount), repetitions, buckets);
    process.stderr.write(`stored ${runs} runs in ${Math.round(performance.now() - t0)} ms\n`);
    await writeNewJobKey(dataDir);
    const env = {
      FSBENCH_JOB_KEY: path.join(dataDir, JOB_PUBLIC_KEY_FILE),
      REDIS_URL: redis.url,
      FSBENCH_QUEUE_PREFIX: 'bench-readers',
      FSBENCH_DATA_DIR: dataDir,
      FSBENCH_PORT: '0',
      FSBENCH_SCRATCH: path.join(dataDir, 'scratch'),
      FSBENCH_MAX_DOWNLOADS: String(caps.maxDownloads),
      FSBENCH_MAX_STREAMS: String(caps.maxStreams),
    };
    const coord = child([CLI, 'coordinator'], env);
    procs.push(coord.proc);
    const url = (await waitOutput(coord.output, /listening on (http:\/\/\S+);/))[1] ?? '';
    // Enrolled with a one-time token, as any agent.
    const tokens = await fetch(`${url}/v1/agents/tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    const [token = ''] = z.object({ tokens: z.array(z.string()) }).loose().parse(await tokens.json()).tokens;
    const agent = child([CLI, 'agent'], { ...env, FSBENCH_MACHINE: 'bench-agent', FSBENCH_ENROLL_TOKEN: token });
    procs.push(agent.proc);
    await waitOutput(agent.output, /waiting for runs/);

    // A matrix that runs for longer than the bench: a stored run every 200 ms or so, each a progress event to every stream.
    const live = { name: 'live', workload: 'noop', repetitions: 1, warmup: 0, params: { value: Array.from({ length: 1000 }, (_, i) => i), sleep: '200ms' } };
    const submitted = await fetch(`${url}/v1/matrices`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(live) });
    const liveId = Created.parse(await submitted.json()).id;
    for (;;) {
      const d = Detail.parse(await (await fetch(`${url}/v1/matrices/${liveId}`)).json());
      if (d.state === 'running') break;
      await sleep(100);
    }

    // Idle: what the coordinator holds before the readers come.
    await sleep(2000);
    const idle = await rssOf(coord.proc.pid);

    const healthz = new Worker(fileURLToPath(import.meta.url), { workerData: { url, everyMs: HEALTHZ_EVERY_MS } });
    const healthzSamples = new Promise<{ at: number; ms: number; ok: boolean }[]>((resolve) => healthz.once('message', resolve));
    const rss: { at: number; rss: number }[] = [];
    const sampling = { on: true };
    const rssLoop = (async () => {
      while (sampling.on) {
        rss.push({ at: Date.now(), rss: (await rssOf(coord.proc.pid)).rss });
        await sleep(RSS_EVERY_MS);
      }
    })();
    await sleep(500);
    // prom-client resets its event-loop delay histogram at each scrape: this one starts the window.
    await eventLoopDelay(url);
    const loadStart = Date.now();

    const clients = await Promise.all(Array.from({ length: streams }, () => openStream(url, liveId)));
    const probe = await Promise.all(Array.from({ length: caps.maxStreams - streams + 20 }, () => openStream(url, liveId)));
    const downloaded = await Promise.all(Array.from({ length: downloads }, (_, i) => download(url, 'large', i === 0)));
    const loadEnd = Date.now();
    const loop = await eventLoopDelay(url);
    const eventsReceived = clients.reduce((n, c) => n + c.counter.events, 0);
    for (const c of [...clients, ...probe]) c.close();
    await Promise.all([...clients, ...probe].map((c) => c.done));
    sampling.on = false;
    await rssLoop;
    healthz.postMessage('stop');
    const samples = await healthzSamples;
    await healthz.terminate();
    const hwm = (await rssOf(coord.proc.pid)).hwm;

    const during = samples.filter((s) => s.at >= loadStart && s.at <= loadEnd);
    const sorted = during.map((s) => s.ms).sort((a, b) => a - b);
    const rssDuring = rss.filter((s) => s.at >= loadStart && s.at <= loadEnd).map((s) => s.rss);
    const peakDuring = Math.max(...rssDuring);
    const report = {
      date: new Date().toISOString(),
      machine: { cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model ?? 'unknown', node: process.version, memoryBytes: os.totalmem(), loadAverage: os.loadavg() },
      setup: {
        matrix: { cells: cellCount, repetitions, runs, histogramBuckets: buckets },
        downloads,
        streams,
        caps,
        healthzEveryMs: HEALTHZ_EVERY_MS,
      },
      seconds: round1((loadEnd - loadStart) / 1000),
      coordinatorRss: {
        idleMiB: mib(idle.rss),
        peakDuringLoadMiB: mib(peakDuring),
        growthMiB: mib(peakDuring - idle.rss),
        processPeakMiB: mib(hwm),
      },
      healthz: {
        samples: during.length,
        failed: during.filter((s) => !s.ok).length,
        p50Ms: round1(percentile(sorted, 50)),
        p99Ms: round1(percentile(sorted, 99)),
        maxMs: round1(sorted.at(-1) ?? Number.NaN),
        over200Ms: during.filter((s) => s.ms > HEALTHZ_TARGET_MS).length,
      },
      // The coordinator's own event-loop delay over the load: how long it kept a request waiting,
      // apart from the time the shared cores gave to other processes (the clients, Redis, the agent).
      coordinatorEventLoopDelay: loop,
      downloads: {
        completed: downloaded.filter((d) => d.error === null).length,
        failed: downloaded.filter((d) => d.error !== null).map((d) => d.error),
        pages: downloaded.reduce((n, d) => n + d.pages, 0),
        bytes: downloaded.reduce((n, d) => n + d.bytes, 0),
        refusedThenRetried: downloaded.reduce((n, d) => n + d.refused, 0),
        runsCountedByFirstClient: downloaded[0]?.runs ?? null,
        secondsEach: downloaded.map((d) => round1(d.ms / 1000)),
      },
      streams: {
        served: clients.filter((c) => c.status === 200).length,
        refused: clients.filter((c) => c.status === 503).length,
        progressEventsReceived: eventsReceived,
        capProbe: { opened: probe.length, served: probe.filter((c) => c.status === 200).length, refused: probe.filter((c) => c.status === 503).length },
      },
      rssSamplesMiB: rss.map((s) => ({ s: round1((s.at - loadStart) / 1000), mib: mib(s.rss) })),
    };
    mkdirSync(path.dirname(values.out), { recursive: true });
    writeFileSync(values.out, `${JSON.stringify(report, null, 2)}\n`);
    const h = report.healthz;
    const d = report.downloads;
    const st = report.streams;
    const r = report.coordinatorRss;
    process.stdout.write(
      [
        `${downloads} downloads of ${runs} runs with histograms (${cellCount} cells x ${repetitions}), ${streams} event streams, ${report.seconds} s (caps: ${caps.maxDownloads} downloads, ${caps.maxStreams} streams)`,
        `  coordinator RSS: idle ${r.idleMiB} MiB, peak during the load ${r.peakDuringLoadMiB} MiB (growth ${r.growthMiB} MiB), process peak ${r.processPeakMiB} MiB`,
        `  /healthz during the load: p50 ${h.p50Ms} ms, p99 ${h.p99Ms} ms, max ${h.maxMs} ms over ${h.samples} samples; ${h.over200Ms} above ${HEALTHZ_TARGET_MS} ms, ${h.failed} failed`,
        `  coordinator event-loop delay during the load: p99 ${report.coordinatorEventLoopDelay.p99Ms} ms, max ${report.coordinatorEventLoopDelay.maxMs} ms`,
        `  downloads: ${d.completed} of ${downloads} completed, ${d.pages} pages, ${mib(d.bytes)} MiB; ${d.refusedThenRetried} pages refused (503) and retried after Retry-After; the first client counted ${String(d.runsCountedByFirstClient)} runs`,
        `  event streams: ${st.served} served, ${st.refused} refused, ${st.progressEventsReceived} progress events received; cap probe: ${st.capProbe.opened} more opened, ${st.capProbe.served} served, ${st.capProbe.refused} refused`,
        `written to ${values.out}`,
      ].join('\n') + '\n',
    );
    if (d.failed.length > 0) process.stderr.write(`failed downloads: ${d.failed.join('; ')}\n`);
  } finally {
    for (const p of procs.reverse()) await stopChild(p);
    await redis.stop();
    await rm(dataDir, { recursive: true, force: true });
  }
}

if (isMainThread) await main();
else await sampler();
