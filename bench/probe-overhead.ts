/**
 * `npm run bench`: does measuring change what is measured? The full probe (per-read statistics,
 * overflow counting, latency sampling) against a bare read loop with the same buffer, alternated
 * in one run on one machine so noise hits both alike; the ratio of medians is the result.
 * Also peak memory: it must follow the read buffer, not the number of events.
 * Writes bench/results/probe-overhead.json.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Journal } from '../host/journal.js';
import { Teardown } from '../host/teardown.js';
import { PACKAGE_ROOT } from '../host/native.js';
import { median } from '../stats/summary.js';
import { applyLimits } from '../workloads/inotify/limits.js';
import { runProbe, type ProbeArgs, type ProbeOutput } from '../workloads/inotify/probe.js';
import { prepareTarget } from '../workloads/inotify/target.js';

const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 7);
const DURATION_MS = Number(process.env['BENCH_DURATION_MS'] ?? 2000);

interface Sample {
  readonly eventsPerSec: number;
  /** Reader CPU per event: less sensitive to scheduling noise than a rate on a shared machine. */
  readonly readerCpuNsPerEvent: number;
  readonly events: number;
  readonly overflows: number;
  readonly maxRssBytes: number;
}

/** The workload's own definition: over the whole run when concurrent, over the drain alone in drain mode. */
function sample(out: ProbeOutput, mode: 'concurrent' | 'drain'): Sample {
  const ns = mode === 'drain' ? out.drainNs : out.elapsedNs;
  return {
    eventsPerSec: ns > 0 ? out.events / (ns / 1e9) : 0,
    readerCpuNsPerEvent: out.events > 0 ? (out.reader.userNs + out.reader.sysNs) / out.events : 0,
    events: out.events,
    overflows: out.overflows,
    maxRssBytes: out.maxRssBytes,
  };
}

async function main(): Promise<void> {
  const scratch = path.join(os.tmpdir(), 'fsbench-bench');
  const journal = await Journal.open(path.join(scratch, 'journal'));
  await journal.recover();
  const teardown = new Teardown(journal);
  const signal = new AbortController().signal;
  try {
    // A 1M-event queue, so neither reader loses events to overflow and the comparison is of reading.
    const limits = await applyLimits(teardown, { maxQueuedEvents: 1_048_576, watches: 1024 + 128, instances: 1 });
    const target = await prepareTarget(teardown, 'tmpfs', scratch, 64 * 1024 ** 2);
    const base: ProbeArgs = {
      dir: target.dir,
      files: 1024,
      writers: 128,
      durationMs: DURATION_MS,
      writeBytes: 1,
      bufferBytes: 8 * 1024 ** 2,
      watch: 'files',
      mode: 'concurrent',
      reader: 'full',
      pin: false,
      readerNice: 0,
      drainTimeoutMs: 30_000,
      sampleEvery: 256,
    };
    const modes = ['concurrent', 'drain'] as const;
    const samples = { concurrent: { full: [] as Sample[], bare: [] as Sample[] }, drain: { full: [] as Sample[], bare: [] as Sample[] } };
    for (let i = 0; i < ROUNDS; i++) {
      for (const mode of modes) {
        // Alternate which goes first, so a drift in machine load does not favour one side.
        const order: ('full' | 'bare')[] = i % 2 === 0 ? ['full', 'bare'] : ['bare', 'full'];
        for (const reader of order) {
          const out = await runProbe({ ...base, mode, reader }, { signal });
          const s = sample(out, mode);
          samples[mode][reader].push(s);
          process.stderr.write(`round ${i + 1}/${ROUNDS} ${mode} ${reader}: ${Math.round(s.eventsPerSec)} events/s\n`);
        }
      }
    }
    // The same comparison for the fanotify backend (inode marks, the default report): its reader
    // must cost as little next to a bare fanotify loop. fanotify merges every queued write into one
    // event per file, so its queue never nears the default limit and needs no change.
    const fan: ProbeArgs = { ...base, backend: 'fanotify', mark: 'inode', fanotifyReport: 'dfid-name' };
    const fanSamples = { full: [] as Sample[], bare: [] as Sample[] };
    for (let i = 0; i < ROUNDS; i++) {
      const order: ('full' | 'bare')[] = i % 2 === 0 ? ['full', 'bare'] : ['bare', 'full'];
      for (const reader of order) {
        const s = sample(await runProbe({ ...fan, reader }, { signal }), 'concurrent');
        fanSamples[reader].push(s);
        process.stderr.write(`round ${i + 1}/${ROUNDS} fanotify ${reader}: ${Math.round(s.eventsPerSec)} events/s\n`);
      }
    }
    const fanShort = await runProbe({ ...fan, durationMs: 500 }, { signal });
    const fanLong = await runProbe({ ...fan, durationMs: 2000 }, { signal });

    // Memory against events: the same buffer for 4x as long (4x the events) must not cost more.
    const short = await runProbe({ ...base, durationMs: 500 }, { signal });
    const long = await runProbe({ ...base, durationMs: 2000 }, { signal });
    const small = await runProbe({ ...base, durationMs: 500, bufferBytes: 64 * 1024 }, { signal });

    const summary = (mode: (typeof modes)[number] | 'fanotify') => {
      const { full, bare } = mode === 'fanotify' ? fanSamples : samples[mode];
      const fullMedian = median(full.map((x) => x.eventsPerSec));
      const bareMedian = median(bare.map((x) => x.eventsPerSec));
      return {
        fullMedianEventsPerSec: Math.round(fullMedian),
        bareMedianEventsPerSec: Math.round(bareMedian),
        ratio: Number((fullMedian / bareMedian).toFixed(4)),
        readerCpuNsPerEvent: {
          full: Number(median(full.map((x) => x.readerCpuNsPerEvent)).toFixed(1)),
          bare: Number(median(bare.map((x) => x.readerCpuNsPerEvent)).toFixed(1)),
        },
        full: full.map((x) => Math.round(x.eventsPerSec)),
        bare: bare.map((x) => Math.round(x.eventsPerSec)),
        overflows: { full: full.map((x) => x.overflows), bare: bare.map((x) => x.overflows) },
      };
    };
    const result = {
      date: new Date().toISOString(),
      machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model ?? 'unknown', kernel: os.release(), loadavg: os.loadavg() },
      setup: { writers: 128, files: 1024, bufferBytes: base.bufferBytes, durationMs: DURATION_MS, rounds: ROUNDS, maxQueuedEvents: limits.maxQueuedEvents },
      target: 'full / bare >= 0.97',
      concurrent: summary('concurrent'),
      drain: summary('drain'),
      fanotify: { setup: 'backend fanotify, mark inode, FAN_REPORT_DFID_NAME, concurrent', ...summary('fanotify') },
      memory: {
        note: 'peak RSS of the probe process; the 8 MiB buffer is only touched as far as read() fills it',
        buffer8MiB500ms: { events: short.events, maxRssBytes: short.maxRssBytes },
        buffer8MiB2000ms: { events: long.events, maxRssBytes: long.maxRssBytes },
        buffer64KiB500ms: { events: small.events, maxRssBytes: small.maxRssBytes },
        growthWithEventsBytes: long.maxRssBytes - short.maxRssBytes,
        fanotify8MiB500ms: { events: fanShort.events, maxRssBytes: fanShort.maxRssBytes },
        fanotify8MiB2000ms: { events: fanLong.events, maxRssBytes: fanLong.maxRssBytes },
      },
    };
    const out = path.join(PACKAGE_ROOT, 'bench', 'results', 'probe-overhead.json');
    mkdirSync(path.dirname(out), { recursive: true });
    writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`);
    process.stdout.write(`${JSON.stringify({ concurrent: result.concurrent.ratio, drain: result.drain.ratio, fanotify: result.fanotify.ratio })}\n${JSON.stringify(result.memory)}\nwritten to ${out}\n`);
  } finally {
    await teardown.dispose();
  }
}

await main();
