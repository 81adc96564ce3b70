/**
 * The inotify throughput workload on this host: prepares the target and kernel limits, runs the
 * native writers with the chosen watcher (the probe's own reader on an inotify instance or a
 * fanotify group, or a Node library), and turns what was counted into the contract's metrics.
 */
import { z } from 'zod';
import { FsbenchError, messageOf } from '../../contract/errors.js';
import type { Cell } from '../../contract/matrix.js';
import { InotifyMetrics, inotifyParams } from '../../contract/workloads/inotify/index.js';
import { defaultValue } from '../../contract/params.js';
import { Teardown } from '../../host/journal.js';
import type { RunContext, WorkloadOutcome, WorkloadRunner } from '../workload.js';
import { applyFanotifyLimits, applyLimits } from './limits.js';
import { KernelRefusal, runProbe, type ProbeArgs, type ProbeOutput } from './probe.js';
import { prepareTarget, tmpfsBytes } from './target.js';
import { startWatcher, waitQuiet, type NodeWatcher } from './watchers.js';

/** The cell's parameters, parsed from the job's generic values into their types. */
const Params = z.object({
  backend: z.enum(['inotify', 'fanotify', 'parcel', 'fswatch', 'chokidar']),
  writers: z.number().int(),
  files: z.number().int(),
  bufferBytes: z.number().int(),
  duration: z.number().int(),
  writeBytes: z.number().int(),
  maxQueuedEvents: z.union([z.number().int(), z.literal('system')]),
  watch: z.enum(['files', 'dir']),
  target: z.string(),
  pin: z.boolean(),
  readerNice: z.number().int(),
  mode: z.enum(['concurrent', 'drain']),
  drainTimeout: z.number().int(),
  latencySampling: z.number().int(),
  mark: z.enum(['inode', 'dir', 'mount', 'filesystem']),
  fanotifyReport: z.enum(['dfid-name', 'fid']),
  fanotifyUnlimitedQueue: z.boolean(),
});
type Params = z.infer<typeof Params>;

const NS_PER_MS = 1e6;

function perSec(count: number, ns: number): number {
  return ns > 0 ? count / (ns / 1e9) : 0;
}

function probeArgs(p: Params, dir: string, reader: ProbeArgs['reader']): ProbeArgs {
  return {
    dir,
    files: p.files,
    writers: p.writers,
    durationMs: p.duration,
    writeBytes: p.writeBytes,
    bufferBytes: p.bufferBytes,
    watch: p.watch,
    mode: p.mode,
    reader,
    pin: p.pin,
    readerNice: p.readerNice,
    drainTimeoutMs: p.drainTimeout,
    sampleEvery: p.latencySampling,
    ...(p.backend === 'fanotify'
      ? { backend: 'fanotify' as const, mark: p.mark, fanotifyReport: p.fanotifyReport, unlimitedQueue: p.fanotifyUnlimitedQueue }
      : {}),
  };
}

/** Metrics of the raw reader. In drain mode the rate is the read path alone: events over the drain. */
function rawMetrics(p: Params, out: ProbeOutput): InotifyMetrics {
  const readerCpuNs = out.reader.userNs + out.reader.sysNs;
  const us = (v: number | null) => (v === null ? null : v / 1000);
  return {
    writes: out.writes,
    writesPerSec: perSec(out.writes, out.writeNs),
    events: out.events,
    eventsPerSec: perSec(out.events, p.mode === 'drain' ? out.drainNs : out.elapsedNs),
    overflows: out.overflows,
    reads: out.reads,
    bytesRead: out.bytesRead,
    meanEventsPerRead: out.reads > 0 ? out.records / out.reads : 0,
    maxEventsPerRead: out.maxRecordsPerRead,
    coalescedFraction: out.writes > 0 ? 1 - out.events / out.writes : 0,
    writesPerEvent: out.events > 0 ? out.writes / out.events : null,
    elapsedMs: out.elapsedNs / NS_PER_MS,
    writeMs: out.writeNs / NS_PER_MS,
    drainMs: out.drainNs / NS_PER_MS,
    drainTimedOut: out.drainTimedOut,
    readerUserMs: out.reader.userNs / NS_PER_MS,
    readerSysMs: out.reader.sysNs / NS_PER_MS,
    readerCpuFraction: out.elapsedNs > 0 ? readerCpuNs / out.elapsedNs : 0,
    readerVoluntaryCtxSwitches: out.reader.voluntaryCtxSwitches,
    readerInvoluntaryCtxSwitches: out.reader.involuntaryCtxSwitches,
    writersUserMs: out.writers.userNs / NS_PER_MS,
    writersSysMs: out.writers.sysNs / NS_PER_MS,
    latencySamples: out.latency.samples,
    latencyP50Us: us(out.latency.p50Ns),
    latencyP90Us: us(out.latency.p90Ns),
    latencyP99Us: us(out.latency.p99Ns),
    latencyMaxUs: us(out.latency.maxNs),
    peakRssBytes: out.maxRssBytes,
    // Only a fanotify run can see other files' events (mount and filesystem marks) or afford FIONREAD samples.
    foreignEvents: p.backend === 'fanotify' ? out.foreignEvents : null,
    maxQueueDepth: p.backend === 'fanotify' ? out.maxQueueDepth : null,
  };
}

/** Runs the native writers with a Node watcher in this process, measuring what it delivers. */
async function runNodeBackend(p: Params, dir: string, ctx: RunContext): Promise<{ metrics: InotifyMetrics; errors: string[] }> {
  const backend = p.backend === 'parcel' || p.backend === 'chokidar' ? p.backend : 'fswatch';
  let watcher: NodeWatcher | undefined;
  let cpuBefore = process.resourceUsage();
  try {
    const out = await runProbe(probeArgs(p, dir, 'none'), {
      signal: ctx.signal,
      onReady: async () => {
        watcher = await startWatcher(backend, dir, p.watch, p.files);
        cpuBefore = process.resourceUsage();
      },
    });
    if (!watcher) throw new FsbenchError('BACKEND_FAILED', 'the probe never signalled that its files were ready');
    const drainStart = performance.now();
    // Quiet for 1 s: @parcel/watcher may hold a batch back for up to 500 ms.
    const timedOut = await waitQuiet(watcher.delivery, 1000, p.drainTimeout, ctx.signal);
    if (ctx.signal.aborted) throw new FsbenchError('CANCELLED', 'the run was cancelled');
    const drainNs = (Math.max(watcher.delivery.lastEventAt, drainStart) - drainStart) * NS_PER_MS;
    const elapsedNs = out.writeNs + drainNs;
    const cpu = process.resourceUsage();
    const d = watcher.delivery;
    const userNs = (cpu.userCPUTime - cpuBefore.userCPUTime) * 1000;
    const sysNs = (cpu.systemCPUTime - cpuBefore.systemCPUTime) * 1000;
    return {
      errors: d.errors,
      metrics: {
        writes: out.writes,
        writesPerSec: perSec(out.writes, out.writeNs),
        events: d.events,
        eventsPerSec: perSec(d.events, elapsedNs),
        overflows: null,
        reads: d.batches,
        bytesRead: null,
        meanEventsPerRead: d.batches > 0 ? d.events / d.batches : 0,
        maxEventsPerRead: d.maxBatch,
        coalescedFraction: out.writes > 0 ? 1 - d.events / out.writes : 0,
        writesPerEvent: d.events > 0 ? out.writes / d.events : null,
        elapsedMs: elapsedNs / NS_PER_MS,
        writeMs: out.writeNs / NS_PER_MS,
        drainMs: drainNs / NS_PER_MS,
        drainTimedOut: timedOut ? 1 : 0,
        readerUserMs: userNs / NS_PER_MS,
        readerSysMs: sysNs / NS_PER_MS,
        readerCpuFraction: elapsedNs > 0 ? (userNs + sysNs) / elapsedNs : 0,
        readerVoluntaryCtxSwitches: cpu.voluntaryContextSwitches - cpuBefore.voluntaryContextSwitches,
        readerInvoluntaryCtxSwitches: cpu.involuntaryContextSwitches - cpuBefore.involuntaryContextSwitches,
        writersUserMs: out.writers.userNs / NS_PER_MS,
        writersSysMs: out.writers.sysNs / NS_PER_MS,
        latencySamples: 0,
        latencyP50Us: null,
        latencyP90Us: null,
        latencyP99Us: null,
        latencyMaxUs: null,
        peakRssBytes: process.resourceUsage().maxRSS * 1024,
        foreignEvents: null,
        maxQueueDepth: null,
      },
    };
  } finally {
    await watcher?.close();
  }
}

function parseParams(cell: Cell): Params {
  const withDefaults: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(inotifyParams)) withDefaults[name] = cell.params[name] ?? defaultValue(spec);
  return Params.parse(withDefaults);
}

export const inotifyWorkload: WorkloadRunner = {
  async run(cell: Cell, ctx: RunContext): Promise<WorkloadOutcome> {
    const p = parseParams(cell);
    const teardown = new Teardown(ctx.journal);
    let outcome: WorkloadOutcome | undefined;
    try {
      const markers = p.latencySampling > 0 ? p.writers : 0;
      const maxQueuedEvents = p.maxQueuedEvents === 'system' ? undefined : p.maxQueuedEvents;
      const info: Record<string, string | number | boolean | null> = { targetDir: p.target };
      // A fanotify run uses no inotify watch or instance: the inotify limits are neither changed
      // nor recorded (they did not apply); fanotify's queue limit goes into the info instead.
      let limits: WorkloadOutcome['limits'] = null;
      if (p.backend === 'fanotify') {
        // Before the probe starts: fanotify_init copies the limit into the new group.
        const queue = await applyFanotifyLimits(teardown, maxQueuedEvents);
        info['fanotifyMaxQueuedEvents'] = p.fanotifyUnlimitedQueue ? 'unlimited' : queue;
      } else {
        limits = await applyLimits(teardown, { maxQueuedEvents, watches: p.watch === 'files' ? p.files + markers : 1, instances: 1 });
      }
      const bytes = tmpfsBytes(p.files + markers, p.writeBytes);
      const target = await prepareTarget(teardown, p.target, ctx.scratchDir, bytes);
      if (ctx.signal.aborted) throw new FsbenchError('CANCELLED', 'the run was cancelled');
      let metrics: InotifyMetrics;
      let histograms: WorkloadOutcome['histograms'] = {};
      if (p.backend === 'inotify' || p.backend === 'fanotify') {
        const out = await runProbe(probeArgs(p, target.dir, 'full'), { signal: ctx.signal }).catch((err: unknown) => {
          // The probe names the call and the path; which filesystem said no is the other half.
          if (err instanceof KernelRefusal) throw new KernelRefusal(`${err.skipReason} (target filesystem: ${target.fsType ?? 'unknown'})`);
          throw err;
        });
        metrics = rawMetrics(p, out);
        info['pinned'] = out.pinned;
        info['readerCpu'] = out.readerCpu;
        info['markerWrites'] = out.markerWrites;
        if (out.latency.buckets.length > 0) histograms = { writeToEventLatency: { unit: 'ns', buckets: out.latency.buckets } };
      } else {
        const r = await runNodeBackend(p, target.dir, ctx);
        metrics = r.metrics;
        info['overflowVisible'] = false;
        info['backendErrors'] = r.errors.length > 0 ? r.errors.slice(0, 5).join('; ') : null;
      }
      outcome = { metrics, histograms, info, limits, targetFs: target.fsType };
    } finally {
      // Runs even when the measurement threw; a teardown failure must not hide that error.
      const cleanup = teardown.dispose();
      if (outcome) await cleanup;
      else await cleanup.catch((err: unknown) => {
        ctx.log(`cleanup after a failed run: ${messageOf(err)}`);
      });
    }
    return outcome;
  },
};
