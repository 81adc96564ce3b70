/**
 * Two result sets side by side, benchstat-style: per cell and metric the baseline and candidate
 * medians, the delta, a confidence interval for the ratio, a Mann-Whitney p-value and `~` when
 * the difference is not significant; per metric a geometric mean of the ratios.
 *
 * Each side is a report (report/build.ts, the same aggregation every output uses) whose cells
 * keep the sorted values of the compared metrics for the rank tests. Cells are matched by their
 * parameters, not by cell id: a parameter that is constant on each side but differs between
 * them (the baseline ran with maxQueuedEvents 16384, the candidate with 1048576) is what is
 * being compared, so it is left out of the match and named in the report, as is a parameter
 * only one side knows (results from an older fsbench). Machines are matched by name when either
 * side holds several; two single-machine sets are compared with each other whatever their
 * names, which is the comparison of machine A with machine B.
 */
import { describeCell, varyingParams, type CellParams } from '../contract/matrix.js';
import type { Direction } from '../contract/metrics.js';
import { formatPercent } from '../contract/units.js';
import { metricDoc, WORKLOADS, type WorkloadName } from '../contract/workloads/index.js';
import { ReportBuilder, type SummarizedCell, type SummarizedReport } from '../report/build.js';
import type { MetricStats } from '../report/model.js';
import type { AggregatableRun } from '../stats/aggregate.js';
import { mannWhitneyU, smallestPossiblePValue } from '../stats/mann-whitney.js';
import { minimumDetectableEffect } from '../stats/power.js';
import type { NoiseOptions } from '../stats/noise.js';
import { ratioConfidenceInterval, type RatioInterval } from '../stats/ratio-ci.js';
import { deltaPercent, geometricMean } from '../stats/ratios.js';
import type { MachineFingerprint } from '../contract/fingerprint.js';
import { differingFacts, type DifferingFact } from './machine-facts.js';
import { canonicalizer, differingParams, type DifferingParam } from './sides.js';

export type { DifferingParam } from './sides.js';
export type { DifferingFact } from './machine-facts.js';

export interface CompareOptions {
  /** Metrics to compare; each workload's headline metrics when omitted. */
  readonly metrics?: readonly string[];
  /** Significance level of the Mann-Whitney test (default 0.05). */
  readonly alpha?: number;
  /** Level of the ratio interval (default 0.95). */
  readonly level?: number;
  readonly noise?: NoiseOptions;
  /** Keep only runs from these machines. */
  readonly baselineMachine?: string;
  readonly candidateMachine?: string;
  /** Names shown for the two sets (file names, matrix ids). */
  readonly baselineName?: string;
  readonly candidateName?: string;
  /** Runs arrive grouped by cell and machine (a stored matrix): each side then holds one cell's values at a time. */
  readonly grouped?: boolean;
  /** Order of the cells (positions by cell id, which name the same parameters in every matrix); else as their runs arrived. */
  readonly cellOrder?: ReadonlyMap<string, number>;
  /**
   * Each side's whole fingerprints, where its runs carry only the facts aggregation keeps (a
   * coordinator's store): without them the machines' facts cannot be compared.
   */
  readonly baselineFingerprintOf?: (machine: string) => MachineFingerprint | null;
  readonly candidateFingerprintOf?: (machine: string) => MachineFingerprint | null;
}

/** One side of a row: the side's own statistics of the metric, from its report. */
export interface SideStats {
  readonly n: number;
  readonly median: number;
  readonly min: number;
  readonly max: number;
  readonly cv: number | null;
  readonly noisy: boolean;
  readonly noise: readonly string[];
}

/**
 * Why a row's delta cannot be trusted, typed so that renderers and the report's notes read the
 * kind and never the English: `no-result` (a side has no ok run: its problem), `noisy` (a side
 * too noisy to conclude), `untestable` (too few runs for the Mann-Whitney test to reach alpha).
 */
export const COMPARE_WARNING_KINDS = ['no-result', 'noisy', 'untestable'] as const;
export type CompareWarningKind = (typeof COMPARE_WARNING_KINDS)[number];
export interface CompareWarning {
  readonly kind: CompareWarningKind;
  /** The side it is about; null when it is about both (the test). */
  readonly side: 'baseline' | 'candidate' | null;
  readonly text: string;
}

/**
 * What a comparison's note says, typed like the warnings: `compared-param` (a parameter set apart
 * on each side), `param-one-side`, `compared-machines`, `no-match`, `untestable`, `noisy`,
 * `detectable` (how small a change the not-significant rows could have shown).
 */
export const COMPARE_NOTE_KINDS = ['compared-param', 'param-one-side', 'compared-machines', 'no-match', 'untestable', 'noisy', 'detectable'] as const;
export type CompareNoteKind = (typeof COMPARE_NOTE_KINDS)[number];
export interface CompareNote {
  readonly kind: CompareNoteKind;
  /** warning: read the deltas with care; info: what was compared. */
  readonly severity: 'warning' | 'info';
  readonly text: string;
}

/** better/worse: significant, in the metric's direction; changed: significant, no better direction. */
export type Verdict = 'better' | 'worse' | 'changed' | '~' | 'n/a';

export interface CompareRow {
  readonly metric: string;
  readonly direction: Direction;
  readonly workload: WorkloadName;
  /** The parameters the cells were matched on. */
  readonly params: Readonly<CellParams>;
  /** The parameters that vary across the compared cells, in their units. */
  readonly label: string;
  readonly baselineMachine: string;
  readonly candidateMachine: string;
  readonly baseline: SideStats | null;
  readonly candidate: SideStats | null;
  /** candidate median / baseline median. */
  readonly ratio: number | null;
  readonly deltaPct: number | null;
  readonly ci: RatioInterval | null;
  readonly pValue: number | null;
  /**
   * The smallest relative change (0.1 = 10%) these runs would have detected with 80% power at
   * alpha (stats/power.ts): a row that is `~` means "no change larger than this". Null without
   * both samples, or when too few runs could reach alpha at all (then it carries `untestable`).
   */
  readonly detectable: number | null;
  readonly significant: boolean;
  readonly verdict: Verdict;
  /** Either side without a result or too noisy to conclude, or too few runs for the test to reach alpha. */
  readonly warnings: readonly CompareWarning[];
}

export interface MetricSummary {
  readonly metric: string;
  readonly direction: Direction;
  readonly cells: number;
  readonly significant: number;
  readonly better: number;
  readonly worse: number;
  /** Geometric mean of the cells' median ratios, over every compared cell (significant or not). */
  readonly geomeanRatio: number | null;
  readonly geomeanDeltaPct: number | null;
}

export interface SetInfo {
  readonly name: string;
  readonly runs: number;
  readonly okRuns: number;
  readonly machines: readonly string[];
  readonly matrices: readonly string[];
}

export interface CompareReport {
  readonly baseline: SetInfo;
  readonly candidate: SetInfo;
  readonly alpha: number;
  readonly level: number;
  readonly matchedBy: 'params' | 'params+machine';
  readonly differing: readonly DifferingParam[];
  /** Machine facts that differ between the sides' fingerprints (governor, L3, scratch device ...), per matched machine. */
  readonly differingFacts: readonly DifferingFact[];
  readonly metrics: readonly string[];
  readonly rows: readonly CompareRow[];
  readonly summary: readonly MetricSummary[];
  /** Cells present on one side only, by label. */
  readonly unmatched: { readonly baseline: readonly string[]; readonly candidate: readonly string[] };
  readonly notes: readonly CompareNote[];
}

/**
 * A side's cells, with the samples compare needs, and the set it came from: the report builder's
 * summary, without the labels, notes and knees of a whole report, which compare never reads.
 */
export interface CompareSide {
  readonly name: string;
  readonly report: SummarizedReport;
}

/**
 * The warnings of the many rows without any, shared: an empty list kept for each of 70,000 rows
 * was copied by every young-generation collection it lived through.
 */
const NO_WARNINGS: readonly CompareWarning[] = Object.freeze([]);

function sideStats(s: MetricStats | undefined): SideStats | null {
  return s ? { n: s.n, median: s.median, min: s.min, max: s.max, cv: s.cv, noisy: s.noisy, noise: s.noise } : null;
}

function verdictOf(significant: boolean, direction: Direction, ratio: number | null): Verdict {
  if (ratio === null) return 'n/a';
  if (!significant) return '~';
  if (direction === 'neither' || ratio === 1) return 'changed';
  return (ratio > 1) === (direction === 'higher') ? 'better' : 'worse';
}

/**
 * The facts that differ between the machines compared with each other: the one machine of each
 * side, or the machines of the same name when the sides hold several (named after the fact).
 * A machine whose fingerprint the side does not keep is left out: nothing is known to differ.
 */
function machineFactDiff(a: SummarizedReport, b: SummarizedReport, byMachine: boolean): DifferingFact[] {
  if (!byMachine) {
    const [ma] = a.machines;
    const [mb] = b.machines;
    return ma?.fingerprint && mb?.fingerprint ? differingFacts(ma.fingerprint, mb.fingerprint) : [];
  }
  return a.machines.flatMap((ma) => {
    const mb = b.machines.find((m) => m.machine === ma.machine);
    return ma.fingerprint && mb?.fingerprint ? differingFacts(ma.fingerprint, mb.fingerprint, ` @${ma.machine}`) : [];
  });
}

function setInfo(side: CompareSide): SetInfo {
  const cells = side.report.cells;
  return {
    name: side.name,
    runs: cells.reduce((n, c) => n + c.runs, 0),
    okRuns: cells.reduce((n, c) => n + c.ok, 0),
    machines: side.report.machines.map((m) => m.machine),
    matrices: [...new Set(cells.map((c) => c.matrix))].sort(),
  };
}

/** Builds the comparison of two sides whose reports kept samples of the metrics to compare. */
export function compareSides(a: CompareSide, b: CompareSide, options: CompareOptions = {}): CompareReport {
  const alpha = options.alpha ?? 0.05;
  const level = options.level ?? 0.95;
  const cellsA = a.report.cells;
  const cellsB = b.report.cells;
  const differing = differingParams(cellsA, cellsB);
  const skip = new Map<WorkloadName, Set<string>>();
  for (const d of differing) {
    let s = skip.get(d.workload);
    if (!s) skip.set(d.workload, (s = new Set()));
    s.add(d.param);
  }
  const byMachine = !(a.report.machines.length <= 1 && b.report.machines.length <= 1);
  // One canonical form per workload, which sorts each set of parameter names once, not once per cell.
  const canonicalOf = new Map<WorkloadName, (params: Readonly<CellParams>) => string>();
  const matchKey = (c: SummarizedCell) => {
    let canonical = canonicalOf.get(c.workload);
    if (!canonical) canonicalOf.set(c.workload, (canonical = canonicalizer(skip.get(c.workload))));
    return `${byMachine ? c.machine : ''}\u0000${c.workload}\u0000${canonical(c.params)}`;
  };

  const candidates = new Map<string, SummarizedCell>();
  for (const c of cellsB) candidates.set(matchKey(c), c);
  const pairs: [SummarizedCell, SummarizedCell][] = [];
  const onlyBaseline: SummarizedCell[] = [];
  const matched = new Set<string>();
  for (const c of cellsA) {
    const key = matchKey(c);
    const other = candidates.get(key);
    if (other) {
      pairs.push([c, other]);
      matched.add(key);
    } else {
      onlyBaseline.push(c);
    }
  }
  const onlyCandidate = [...candidates.entries()].filter(([k]) => !matched.has(k)).map(([, c]) => c);

  // Labels name only what varies among the compared cells, minus what the two sides differ in.
  const labelOf = (() => {
    const byWorkload = new Map<WorkloadName, string[]>();
    const all = [...pairs.map(([x]) => x), ...onlyBaseline, ...onlyCandidate];
    for (const w of new Set(all.map((c) => c.workload))) {
      const cells = all.filter((c) => c.workload === w).map((c) => ({ id: c.cellId, workload: w, params: { ...c.params } }));
      byWorkload.set(w, varyingParams(cells).filter((p) => !skip.get(w)?.has(p)));
    }
    const multiWorkload = byWorkload.size > 1;
    return (c: SummarizedCell) => {
      const varying = byWorkload.get(c.workload) ?? [];
      const text = varying.length > 0 ? describeCell({ id: c.cellId, workload: c.workload, params: { ...c.params } }, varying) : '(all)';
      return `${multiWorkload ? `${c.workload} ` : ''}${text}${byMachine ? ` @${c.machine}` : ''}`;
    };
  })();

  const metricNames = options.metrics
    ? [...new Set(options.metrics)]
    : [...new Set([...new Set(pairs.map(([x]) => x.workload))].flatMap((w) => WORKLOADS[w].headline))];

  // Every metric of a cell shares its label and matched parameters: made once per cell.
  const perCell = new Map<SummarizedCell, { label: string; params: Readonly<CellParams> }>();
  const cellInfo = (c: SummarizedCell) => {
    let info = perCell.get(c);
    if (!info) {
      info = { label: labelOf(c), params: Object.fromEntries(Object.entries(c.params).filter(([k]) => !skip.get(c.workload)?.has(k))) };
      perCell.set(c, info);
    }
    return info;
  };

  // A metric's direction by workload: the same for every cell of one.
  const directions = new Map<string, Direction>();
  const directionOf = (workload: WorkloadName, metric: string): Direction => {
    const key = `${workload}\u0000${metric}`;
    let d = directions.get(key);
    if (d === undefined) directions.set(key, (d = metricDoc(workload, metric)?.direction ?? 'neither'));
    return d;
  };

  // Rows go metric by metric, but are made cell by cell, each metric's into a list of its own:
  // a cell's statistics are read while they are in the CPU's caches, where going over all the
  // cells once per metric (10,000 cells, 7 times) spent most of its time waiting for memory.
  const byMetric = metricNames.map((): CompareRow[] => []);
  let untestable = false;
  for (const [x, y] of pairs) {
    for (let at = 0; at < metricNames.length; at++) {
      const metric = metricNames[at] ?? '';
      const mx = x.metrics[metric];
      const my = y.metrics[metric];
      // A metric the workload does not have (or never observed on either side) is no row at all.
      if (!mx && !my) continue;
      const direction = directionOf(x.workload, metric);
      const base = sideStats(mx);
      const cand = sideStats(my);
      const xs = x.samples?.[metric];
      const ys = y.samples?.[metric];
      const warnings: CompareWarning[] = [];
      if (x.problem && !base) warnings.push({ kind: 'no-result', side: 'baseline', text: `baseline: ${x.problem}` });
      if (y.problem && !cand) warnings.push({ kind: 'no-result', side: 'candidate', text: `candidate: ${y.problem}` });
      let ratio: number | null = null;
      let delta: number | null = null;
      let ci: RatioInterval | null = null;
      let p: number | null = null;
      let detectable: number | null = null;
      if (base && cand && xs && ys) {
        delta = deltaPercent(base.median, cand.median);
        ratio = delta === null ? null : cand.median / base.median;
        ci = ratioConfidenceInterval(xs, ys, level);
        p = mannWhitneyU(xs, ys).pValue;
        const mde = minimumDetectableEffect(xs, ys, { alpha });
        detectable = mde !== null && Number.isFinite(mde) ? mde : null;
        if (base.noisy) warnings.push({ kind: 'noisy', side: 'baseline', text: `baseline too noisy to conclude: ${base.noise.join('; ')}` });
        if (cand.noisy) warnings.push({ kind: 'noisy', side: 'candidate', text: `candidate too noisy to conclude: ${cand.noise.join('; ')}` });
        if (smallestPossiblePValue(xs.length, ys.length) >= alpha) {
          untestable = true;
          warnings.push({ kind: 'untestable', side: null, text: `${xs.length} vs ${ys.length} runs cannot reach p < ${alpha}` });
        }
      }
      const significant = p !== null && p < alpha;
      const info = cellInfo(x);
      byMetric[at]?.push({
        metric,
        direction,
        workload: x.workload,
        params: info.params,
        label: info.label,
        baselineMachine: x.machine,
        candidateMachine: y.machine,
        baseline: base,
        candidate: cand,
        ratio,
        deltaPct: delta,
        ci,
        pValue: p,
        detectable,
        significant,
        verdict: verdictOf(significant, direction, ratio),
        warnings: warnings.length > 0 ? warnings : NO_WARNINGS,
      });
    }
  }
  const rows = byMetric.flat();

  const summary: MetricSummary[] = metricNames.map((metric, at) => {
    const own = byMetric[at] ?? [];
    const mine = own.filter((r) => r.ratio !== null);
    const g = geometricMean(mine.map((r) => r.ratio ?? Number.NaN));
    return {
      metric,
      direction: mine[0]?.direction ?? own[0]?.direction ?? 'neither',
      cells: mine.length,
      significant: mine.filter((r) => r.significant).length,
      better: mine.filter((r) => r.verdict === 'better').length,
      worse: mine.filter((r) => r.verdict === 'worse').length,
      geomeanRatio: g,
      geomeanDeltaPct: g === null ? null : (g - 1) * 100,
    };
  });

  const notes: CompareNote[] = [];
  for (const d of differing) {
    notes.push(
      d.baseline !== null && d.candidate !== null
        ? { kind: 'compared-param', severity: 'info', text: `compared: ${d.param} ${d.baseline} (baseline) against ${d.candidate} (candidate); cells matched on the other parameters` }
        : {
            kind: 'param-one-side',
            severity: 'info',
            text: `${d.param} is only in the ${d.baseline !== null ? 'baseline' : 'candidate'} (${d.baseline ?? d.candidate ?? ''}); cells matched without it`,
          },
    );
  }
  const [ma] = a.report.machines;
  const [mb] = b.report.machines;
  if (!byMachine && ma && mb && ma.machine !== mb.machine) {
    notes.push({ kind: 'compared-machines', severity: 'info', text: `compared machines: ${ma.machine} (baseline) against ${mb.machine} (candidate)` });
  }
  if (pairs.length === 0 && cellsA.length > 0 && cellsB.length > 0) {
    notes.push({
      kind: 'no-match',
      severity: 'warning',
      text: byMachine
        ? 'no cell matched: the sets hold several machines and none in common; pick one machine per side (--baseline-machine, --candidate-machine)'
        : 'no cell matched: the two sets have no parameters in common',
    });
  }
  if (untestable) {
    notes.push({
      kind: 'untestable',
      severity: 'warning',
      text: `some cells have too few runs for the Mann-Whitney test to reach p < ${alpha} at all (3 vs 3 runs: p >= 0.1); run at least 5 repetitions`,
    });
  }
  // A loop, not Math.min(...): 70,000 rows as arguments come near the engine's limit of them.
  let unseen = 0;
  let low = Number.POSITIVE_INFINITY;
  let high = Number.NEGATIVE_INFINITY;
  for (const r of rows) {
    if (r.significant || r.detectable === null) continue;
    unseen++;
    low = Math.min(low, r.detectable);
    high = Math.max(high, r.detectable);
  }
  if (unseen > 0) {
    const range = low === high ? formatPercent(low) : `${formatPercent(low)} to ${formatPercent(high)}`;
    notes.push({
      kind: 'detectable',
      severity: 'info',
      text: `${String(unseen)} row${unseen === 1 ? '' : 's'} without a significant difference: no change larger than ${range} (its row's detectable) would have gone unseen at 80% power`,
    });
  }
  if (rows.some((r) => r.warnings.some((w) => w.kind === 'noisy'))) {
    notes.push({ kind: 'noisy', severity: 'warning', text: 'cells marked ! are too noisy to conclude (high CV or too few runs): treat their deltas as unconfirmed' });
  }

  return {
    baseline: setInfo(a),
    candidate: setInfo(b),
    alpha,
    level,
    matchedBy: byMachine ? 'params+machine' : 'params',
    differing,
    differingFacts: machineFactDiff(a.report, b.report, byMachine),
    metrics: metricNames,
    rows,
    summary,
    unmatched: { baseline: onlyBaseline.map(labelOf), candidate: onlyCandidate.map(labelOf) },
    notes,
  };
}

/** Every metric a comparison may ask for: the named ones, else the headline metrics of every workload. */
function sampledMetrics(options: CompareOptions): readonly string[] {
  return options.metrics ?? [...new Set(Object.values(WORKLOADS).flatMap((w) => w.headline))];
}

/** One side read from a stream of runs (a file, a stored matrix), through the report builder. */
export async function readSide(
  name: string,
  runs: AsyncIterable<AggregatableRun> | Iterable<AggregatableRun>,
  options: CompareOptions & { readonly machine?: string | undefined; readonly fingerprintOf?: ((machine: string) => MachineFingerprint | null) | undefined },
): Promise<CompareSide> {
  const metrics = sampledMetrics(options);
  // A side summarises only the compared metrics: the rest of its report is never read.
  const builder = new ReportBuilder({
    title: name,
    metrics,
    samples: metrics,
    ...(options.noise ? { noise: options.noise } : {}),
    ...(options.grouped ? { grouped: true } : {}),
    ...(options.cellOrder ? { cellOrder: options.cellOrder } : {}),
    ...(options.fingerprintOf ? { fingerprintOf: options.fingerprintOf } : {}),
  });
  const { machine } = options;
  const add = (r: AggregatableRun) => {
    if (machine === undefined || r.fingerprint.machine === machine) builder.add(r);
  };
  // A stored matrix is read synchronously: awaiting each of its runs would cost a microtask apiece.
  if (Symbol.iterator in runs) for (const r of runs) add(r);
  else for await (const r of runs) add(r);
  return { name, report: builder.summarize() };
}

export async function compareRunSets(
  baseline: AsyncIterable<AggregatableRun> | Iterable<AggregatableRun>,
  candidate: AsyncIterable<AggregatableRun> | Iterable<AggregatableRun>,
  options: CompareOptions = {},
): Promise<CompareReport> {
  const a = await readSide(options.baselineName ?? 'baseline', baseline, { ...options, machine: options.baselineMachine, fingerprintOf: options.baselineFingerprintOf });
  const b = await readSide(options.candidateName ?? 'candidate', candidate, { ...options, machine: options.candidateMachine, fingerprintOf: options.candidateFingerprintOf });
  return compareSides(a, b, options);
}
