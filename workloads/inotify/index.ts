/**
 * The inotify throughput workload on this host: prepares the target and kernel limits, runs the
 * native writers with the chosen watcher (the probe's own reader on an inotify instance or a
 * fanotify group, or a Node library), and turns what was counted into the contract's metrics.
 */
import type { z } from 'zod';
import { FsbenchError, messageOf } from '../../contract/errors.js';
import type { Cell } from '../../contract/matrix.js';
import { paramsSchema } from '../../contract/params.js';
import { formatSize } from '../../contract/units.js';
import { inotifySpecs, type InotifyMetrics } from '../../contract/workloads/inotify/index.js';
import type { ProcessUsage } from '../../host/process-usage.js';
import { Teardown } from '../../host/teardown.js';
import { cellParams, type HostNeed, type RunContext, type WorkloadOutcome, type WorkloadSlice } from '../workload.js';
import { applyFanotifyLimits, applyLimits } from './limits.js';
import { KernelRefusal, runProbe, type ProbeArgs, type ProbeOutput } from './probe.js';
import { prepareTarget, tmpfsBytes } from './target.js';
import { startProgramWatcher } from './programs.js';
import { startWatcher, waitQuiet, type Watcher } from './watchers.js';

/** The cell's parameters, typed, derived from the contract's declaration (the container's included, for the host check). */
const Params = paramsSchema(inotifySpecs);
type Params = z.output<typeof Params>;

/**
 * The largest value FSBENCH_MAX_QUEUED_EVENTS takes: a host that sets it allows any queue, and
 * only such a host lets fanotify queue without bound (FAN_UNLIMITED_QUEUE).
 */
const UNBOUNDED_QUEUE = 2 ** 31 - 1;

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

/** The watcher of a backend that is not the native reader: a Node library in this process, or a program. */
function startBackend(p: Params, dir: string, signal: AbortSignal): Promise<Watcher> {
  switch (p.backend) {
    case 'inotifywait':
    case 'watchman':
      return startProgramWatcher(p.backend, dir, p.watch, p.files, signal);
    case 'parcel':
    case 'chokidar':
      return startWatcher(p.backend, dir, p.watch, p.files);
    default:
      return startWatcher('fswatch', dir, p.watch, p.files);
  }
}

/** Runs the native writers with a library or program watcher, measuring what it delivers. */
async function runWatcherBackend(p: Params, dir: string, ctx: RunContext): Promise<{ metrics: InotifyMetrics; errors: string[] }> {
  let watcher: Watcher | undefined;
  let cpuBefore: ProcessUsage | undefined;
  try {
    const out = await runProbe(probeArgs(p, dir, 'none'), {
      signal: ctx.signal,
      onReady: async () => {
        watcher = await startBackend(p, dir, ctx.signal);
        cpuBefore = watcher.usage();
      },
    });
    if (!watcher || !cpuBefore) throw new FsbenchError('BACKEND_FAILED', 'the probe never signalled that its files were ready');
    const drainStart = performance.now();
    // Quiet for 1 s: @parcel/watcher may hold a batch back for up to 500 ms.
    const timedOut = await waitQuiet(watcher.delivery, 1000, p.drainTimeout, ctx.signal);
    if (ctx.signal.aborted) throw new FsbenchError('CANCELLED', 'the run was cancelled');
    const drainNs = (Math.max(watcher.delivery.lastEventAt, drainStart) - drainStart) * NS_PER_MS;
    const elapsedNs = out.writeNs + drainNs;
    const cpu = watcher.usage();
    const d = watcher.delivery;
    const userNs = (cpu.userMs - cpuBefore.userMs) * NS_PER_MS;
    const sysNs = (cpu.sysMs - cpuBefore.sysMs) * NS_PER_MS;
    return {
      errors: d.errors,
      metrics: {
        writes: out.writes,
        writesPerSec: perSec(out.writes, out.writeNs),
        events: d.events,
        eventsPerSec: perSec(d.events, elapsedNs),
        overflows: watcher.overflows(),
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
        readerVoluntaryCtxSwitches: cpu.voluntaryCtxSwitches - cpuBefore.voluntaryCtxSwitches,
        readerInvoluntaryCtxSwitches: cpu.involuntaryCtxSwitches - cpuBefore.involuntaryCtxSwitches,
        writersUserMs: out.writers.userNs / NS_PER_MS,
        writersSysMs: out.writers.sysNs / NS_PER_MS,
        latencySamples: 0,
        latencyP50Us: null,
        latencyP90Us: null,
        latencyP99Us: null,
        latencyMaxUs: null,
        peakRssBytes: cpu.peakRssBytes,
        foreignEvents: null,
        maxQueueDepth: null,
      },
    };
  } finally {
    await watcher?.close();
  }
}

/**
 * The kernel limits, memory and space a run takes: the queue it sets (a host-wide sysctl), the
 * watches or marks it adds, and its files, in a private tmpfs (memory, also when the sandbox's
 * work directory is a tmpfs) or in the target directory.
 */
function hostNeeds(cell: Cell): HostNeed[] {
  const p = cellParams(Params, cell);
  const fanotify = p.backend === 'fanotify';
  // The native readers watch one marker file per writer besides the files (latency sampling).
  const markers = (p.backend === 'inotify' || fanotify) && p.latencySampling > 0 ? p.writers : 0;
  const files = p.files + markers;
  const needs: HostNeed[] = [];
  const queue = p.maxQueuedEvents;
  if (queue !== 'system') {
    const sysctl = fanotify ? 'fs.fanotify.max_queued_events' : 'fs.inotify.max_queued_events';
    needs.push({
      kind: 'limit',
      cap: 'maxQueuedEvents',
      value: queue,
      refusal: (cap) =>
        `maxQueuedEvents ${queue} is above the ${cap} this host allows on its host-wide ${sysctl} (FSBENCH_MAX_QUEUED_EVENTS): ` +
        'ask for less, or raise the cap on the host',
    });
  }
  // No limit at all: the queue grows with whatever the writers outpace, in kernel memory.
  if (fanotify && p.fanotifyUnlimitedQueue) {
    needs.push({
      kind: 'limit',
      cap: 'maxQueuedEvents',
      value: UNBOUNDED_QUEUE,
      refusal: (cap) =>
        `fanotifyUnlimitedQueue lets the kernel queue events without bound, above the ${cap} this host allows ` +
        `(FSBENCH_MAX_QUEUED_EVENTS): use maxQueuedEvents instead, or set the cap to ${UNBOUNDED_QUEUE} on the host to allow it`,
    });
  }
  // fanotify's inode marks are its per-file watches (fs.fanotify.max_user_marks); one mark otherwise.
  const watches = (fanotify ? p.mark === 'inode' : p.watch === 'files') ? files : 1;
  needs.push({
    kind: 'limit',
    cap: 'maxWatches',
    value: watches,
    refusal: (cap) =>
      `the run needs ${watches} ${fanotify ? 'fanotify marks' : 'inotify watches'} (files + latency markers), above the ${cap} ` +
      `this host allows (FSBENCH_MAX_WATCHES): use fewer files or ${fanotify ? 'mark: dir' : 'watch: dir'}, or raise the cap on the host`,
  });
  const tmpfs = p.target === 'tmpfs' || p['container.storage'] === 'tmpfs';
  if (p.target !== 'tmpfs' && tmpfs) needs.push({ kind: 'directory', path: p.target });
  if (tmpfs) {
    needs.push({
      kind: 'memory',
      bytes: tmpfsBytes(files, p.writeBytes),
      what: `a tmpfs for ${files} files of ${formatSize(p.writeBytes)} writes`,
      fix: 'lower files or writeBytes, or use a target directory on disk',
    });
  } else {
    // Files never grow (writes at offset 0): each takes its write rounded up to a page.
    needs.push({
      kind: 'space',
      dir: p.target,
      bytes: files * Math.ceil(Math.max(1, p.writeBytes) / 4096) * 4096,
      what: `${files} files of ${formatSize(p.writeBytes)}`,
      fix: 'lower files or writeBytes',
    });
  }
  return needs;
}

export const inotifyWorkload: WorkloadSlice = {
  hostNeeds,
  async run(cell: Cell, ctx: RunContext): Promise<WorkloadOutcome> {
    const p = cellParams(Params, cell);
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
        const r = await runWatcherBackend(p, target.dir, ctx);
        metrics = r.metrics;
        info['overflowVisible'] = metrics.overflows !== null;
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
