/**
 * Notes: what a bare number hides, said in a sentence next to it. Each rule reads the medians
 * of one cell (and, for a watcher library, of the raw reader's cell beside it), or the cell's
 * interference summary, and never recomputes a statistic.
 */
import { metricDoc } from '../contract/workloads/index.js';
import type { CellPrecision } from '../stats/aggregate.js';
import type { NoiseOptions } from '../stats/noise.js';
import { NOISE_DEFAULTS } from '../stats/noise.js';
import { formatCv, formatPercent } from './format.js';
import type { CellInterferenceSummary, CellReport } from './model.js';

/** A cell before its notes are written, with what its interference notes read. */
export type NotelessCell = Omit<CellReport, 'notes'> & {
  readonly interference?: CellInterferenceSummary | undefined;
  /** The precision the cell was run to under `repetitions: auto`. */
  readonly precision?: CellPrecision | undefined;
};

/**
 * A headline metric moving with the interference this closely (|Spearman rho|), over at least
 * INTERFERENCE_MIN_RUNS runs, says the spread is the machine's: with 4 runs only a perfect
 * ranking reaches it, and 0.7 is the usual floor of a strong correlation.
 */
const INTERFERENCE_RHO = 0.7;
const INTERFERENCE_MIN_RUNS = 4;

/** Below this share of one CPU while writers run, the raw reader was starved rather than slow. */
const STARVED_READER = 0.25;

function medianOf(c: NotelessCell, metric: string): number | null {
  return c.metrics[metric]?.median ?? null;
}

/**
 * The same cell read by the raw inotify reader on the same machine: what a watcher library
 * delivered is measured against it. Parameters only the raw reader uses are ignored.
 */
function rawTwin(c: NotelessCell, all: readonly NotelessCell[]): NotelessCell | undefined {
  const ignore = new Set(['backend', 'bufferBytes', 'watch', 'mark', 'fanotifyReport', 'fanotifyUnlimitedQueue']);
  return all.find(
    (o) =>
      o.workload === 'inotify' &&
      o.machine === c.machine &&
      o.matrix === c.matrix &&
      o.params['backend'] === 'inotify' &&
      o.ok > 0 &&
      Object.entries(c.params).every(([k, v]) => ignore.has(k) || o.params[k] === v),
  );
}

function inotifyNotes(c: NotelessCell, all: readonly NotelessCell[]): string[] {
  const notes: string[] = [];
  const backend = String(c.params['backend']);
  // The native readers: fsbench's own inotify and fanotify loops, which see overflow and report their CPU.
  const native = backend === 'inotify' || backend === 'fanotify';
  const overflows = medianOf(c, 'overflows');
  if (overflows !== null && overflows > 0) {
    const record = backend === 'fanotify' ? 'FAN_Q_OVERFLOW' : 'IN_Q_OVERFLOW';
    notes.push(`${overflows} ${record} per run (median): the kernel dropped events; raise maxQueuedEvents or give the reader more CPU.`);
  }
  const cpu = medianOf(c, 'readerCpuFraction');
  if (cpu !== null && cpu < STARVED_READER && native && c.params['mode'] === 'concurrent') {
    notes.push(
      `the reader used only ${formatPercent(cpu)} of a CPU while the writers ran: it was starved, so the buffer size is not what limits throughput here (try readerNice or pin).`,
    );
  }
  if (medianOf(c, 'drainTimedOut') === 1) notes.push('the drain hit drainTimeout; the queue was not empty.');
  if (backend === 'fanotify') {
    // fanotify merges a write into any identical queued event, so its event rate is not inotify's.
    const twin = rawTwin(c, all);
    const wpe = medianOf(c, 'writesPerEvent');
    const rawWpe = twin ? medianOf(twin, 'writesPerEvent') : null;
    if (wpe !== null && wpe > 1.5) {
      notes.push(
        `fanotify merged ${wpe.toFixed(1)} writes into each event (median)${rawWpe !== null && twin ? `, inotify ${rawWpe.toFixed(1)} in ${twin.label}` : ''}: compare writes per event and writes/s, not event rates.`,
      );
    }
  } else if (backend !== 'inotify') {
    const twin = rawTwin(c, all);
    const events = medianOf(c, 'events');
    const rawEvents = twin ? medianOf(twin, 'events') : null;
    const share =
      twin && events !== null && rawEvents
        ? ` It delivered ${formatPercent(events / rawEvents)} of the events the raw inotify reader got in ${twin.label}.`
        : ' Run the same cell with backend: inotify to see what it missed.';
    notes.push(`${backend} cannot report IN_Q_OVERFLOW (overflows shows as n/a): lost events are silent.${share}`);
  }
  return notes;
}

/**
 * A spread too wide to conclude from, for the headline rates and durations (the cell's judged
 * metrics, see contract/metrics.ts isMeasure).
 * Too few runs alone is left to the cell's noise verdict: it would repeat on every cell of a
 * short matrix and drown the notes that matter.
 */
function spreadNotes(c: NotelessCell, headline: readonly string[], noise: NoiseOptions | undefined): string[] {
  const maxCv = noise?.maxCv ?? NOISE_DEFAULTS.maxCv;
  const wide = headline.flatMap((m) => {
    const s = c.metrics[m];
    return s?.cv !== null && s?.cv !== undefined && s.n > 1 && s.cv > maxCv ? [`${m} ${formatCv(s.cv)}`] : [];
  });
  if (wide.length === 0) return [];
  return [`spread too wide to conclude from (CV ${wide.join(', ')}, above ${formatPercent(maxCv)} over ${c.ok} runs): measure again on a quieter machine or with more repetitions.`];
}

/** Runs measured while the machine was busy with something else, as their thresholds (stored with each run) judged. */
function flaggedNote(c: NotelessCell): string[] {
  const i = c.interference;
  if (!i || i.flagged === 0) return [];
  const what = [
    ...(i.maxSteal !== null ? [`steal ${formatPercent(i.maxSteal)}`] : []),
    ...(i.maxOutsideCpu !== null ? [`outside CPU ${formatPercent(i.maxOutsideCpu)} of a CPU`] : []),
  ];
  return [`${i.flagged} of ${i.runs} runs had interference above the threshold (${what.join(', ')}${i.flagged > 1 ? ' at worst' : ''}).`];
}

/** Whether a metric that moves with the interference by `rho` got worse as it rose. */
function worseWithInterference(c: NotelessCell, metric: string, rho: number): boolean {
  const direction = metricDoc(c.workload, metric)?.direction;
  return (direction === 'higher' && rho < 0) || (direction === 'lower' && rho > 0);
}

/**
 * A noisy headline metric whose slow runs are the disturbed ones: its spread says more about
 * the machine than about the workload, which a reader of the CV alone would blame.
 */
function interferenceSpreadNotes(c: NotelessCell, headline: readonly string[], noise: NoiseOptions | undefined): string[] {
  const i = c.interference;
  if (!i) return [];
  const maxCv = noise?.maxCv ?? NOISE_DEFAULTS.maxCv;
  return headline.flatMap((m) => {
    const cv = c.metrics[m]?.cv;
    if (cv === null || cv === undefined || cv <= maxCv) return [];
    const r = i.correlations[m];
    if (r && r.n >= INTERFERENCE_MIN_RUNS && Math.abs(r.rho) >= INTERFERENCE_RHO && worseWithInterference(c, m, r.rho)) {
      const measure = r.with === 'outsideCpu' ? 'outside CPU' : 'steal';
      return [`${m}: the slow runs are the ones with interference (rank correlation ${r.rho.toFixed(1)} with ${measure}): the spread is the environment's, not the workload's.`];
    }
    if (i.flaggedAreOutliers.includes(m)) {
      return [`${m}: the outlying runs are exactly the ones with interference above the threshold: the spread is the environment's, not the workload's.`];
    }
    return [];
  });
}

export function cellNotes(c: NotelessCell, all: readonly NotelessCell[], headline: readonly string[], noise?: NoiseOptions): string[] {
  if (c.ok === 0) return [];
  return [
    ...(c.workload === 'inotify' ? inotifyNotes(c, all) : []),
    ...spreadNotes(c, headline, noise),
    ...flaggedNote(c),
    ...interferenceSpreadNotes(c, headline, noise),
    ...precisionNote(c),
  ];
}

/**
 * Under `repetitions: auto`: whether the cell's median got as precise as asked, from its own 95%
 * CI (the interval stats/precision.ts judged it by while it ran).
 */
function precisionNote(c: NotelessCell): string[] {
  const p = c.precision;
  if (!p) return [];
  const m = c.metrics[p.metric];
  const hw = m && m.ciLow !== null && m.ciHigh !== null && m.median !== 0 ? (m.ciHigh - m.ciLow) / 2 / Math.abs(m.median) : null;
  const asked = `the ±${formatPercent(p.target)} asked for (repetitions: auto)`;
  if (hw !== null && hw <= p.target) return [`the median of ${p.metric} is known to ±${formatPercent(hw)} (95% CI) after ${c.ok} runs: within ${asked}.`];
  return [`the median of ${p.metric} is ${hw === null ? 'without a 95% CI' : `known only to ±${formatPercent(hw)} (95% CI)`} after ${c.ok} runs: short of ${asked}.`];
}
