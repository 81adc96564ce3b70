/**
 * Two result sets side by side, benchstat-style: per cell and metric the baseline and candidate
 * medians, the delta, a confidence interval for the ratio, a Mann-Whitney p-value and `~` when
 * the difference is not significant; per metric a geometric mean of the ratios.
 *
 * Cells are matched by their parameters, not by cell id: a parameter that is constant on each
 * side but differs between them (the baseline ran with maxQueuedEvents 16384, the candidate with
 * 1048576) is what is being compared, so it is left out of the match and named in the report,
 * as is a parameter only one side knows (results from an older fsbench). Machines are matched
 * by name when either side holds several; two single-machine sets are compared with each other
 * whatever their names, which is the comparison of machine A with machine B.
 */
import { describeCell, varyingParams, type CellParams } from '../contract/matrix.js';
import { WORKLOADS, type WorkloadName } from '../contract/workloads/index.js';
import type { AggregatableRun } from '../stats/aggregate.js';
import { metricDirection, type Direction } from '../stats/direction.js';
import { mannWhitneyU, smallestPossiblePValue } from '../stats/mann-whitney.js';
import { checkNoise, type NoiseCheck, type NoiseOptions } from '../stats/noise.js';
import { ratioConfidenceInterval, type RatioInterval } from '../stats/ratio-ci.js';
import { deltaPercent, geometricMean } from '../stats/ratios.js';
import { sortedCopy, summarizeSorted } from '../stats/summary.js';
import { canonical, CompareSide, differingParams, type CellValues } from './side.js';

export { CompareSide } from './side.js';

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
}

export interface SideStats {
  readonly n: number;
  readonly median: number;
  readonly min: number;
  readonly max: number;
  readonly cv: number | null;
  readonly noise: NoiseCheck;
}

/** better/worse: significant, in the metric's direction; changed: significant, direction unknown. */
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
  readonly significant: boolean;
  readonly verdict: Verdict;
  /** Either side too noisy to conclude, or too few runs for the test to reach alpha. */
  readonly warnings: readonly string[];
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

export interface DifferingParam {
  readonly workload: WorkloadName;
  readonly param: string;
  /** The value on each side; null where that side does not have the parameter. */
  readonly baseline: string | null;
  readonly candidate: string | null;
}

export interface CompareReport {
  readonly baseline: SetInfo;
  readonly candidate: SetInfo;
  readonly alpha: number;
  readonly level: number;
  readonly matchedBy: 'params' | 'params+machine';
  readonly differing: readonly DifferingParam[];
  readonly metrics: readonly string[];
  readonly rows: readonly CompareRow[];
  readonly summary: readonly MetricSummary[];
  /** Cells present on one side only, by label. */
  readonly unmatched: { readonly baseline: readonly string[]; readonly candidate: readonly string[] };
  readonly notes: readonly string[];
}

function sideStats(values: readonly number[] | undefined, noise: NoiseOptions | undefined): SideStats | null {
  if (!values || values.length === 0) return null;
  const sorted = sortedCopy(values);
  const s = summarizeSorted(sorted);
  return { n: s.n, median: s.median, min: s.min, max: s.max, cv: s.cv, noise: checkNoise(values, noise, { cv: s.cv, median: s.median, sorted }) };
}

function verdictOf(significant: boolean, direction: Direction, ratio: number | null): Verdict {
  if (ratio === null) return 'n/a';
  if (!significant) return '~';
  if (direction === 'neutral' || ratio === 1) return 'changed';
  return (ratio > 1) === (direction === 'higher') ? 'better' : 'worse';
}

/** Builds the report once both sides have seen every run. */
export function compareSides(a: CompareSide, b: CompareSide, options: CompareOptions = {}): CompareReport {
  const alpha = options.alpha ?? 0.05;
  const level = options.level ?? 0.95;
  const differing = differingParams(a, b);
  const skip = new Map<WorkloadName, Set<string>>();
  for (const d of differing) {
    let s = skip.get(d.workload);
    if (!s) skip.set(d.workload, (s = new Set()));
    s.add(d.param);
  }
  const byMachine = !(a.machines.size <= 1 && b.machines.size <= 1);
  const matchKey = (c: CellValues) =>
    `${byMachine ? c.machine : ''}\u0000${c.workload}\u0000${canonical(c.params, skip.get(c.workload))}`;

  const candidates = new Map<string, CellValues>();
  for (const c of b.cells.values()) candidates.set(matchKey(c), c);
  const pairs: [CellValues, CellValues][] = [];
  const onlyBaseline: CellValues[] = [];
  const matched = new Set<string>();
  for (const c of a.cells.values()) {
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
      const cells = all.filter((c) => c.workload === w).map((c) => ({ id: '', workload: w, params: { ...c.params } }));
      byWorkload.set(w, varyingParams(cells).filter((p) => !skip.get(w)?.has(p)));
    }
    const multiWorkload = byWorkload.size > 1;
    return (c: CellValues) => {
      const varying = byWorkload.get(c.workload) ?? [];
      const text = varying.length > 0 ? describeCell({ id: '', workload: c.workload, params: { ...c.params } }, varying) : '(all)';
      return `${multiWorkload ? `${c.workload} ` : ''}${text}${byMachine ? ` @${c.machine}` : ''}`;
    };
  })();

  const metricNames: string[] = [];
  const seenMetric = new Set<string>();
  const addMetric = (m: string) => {
    if (!seenMetric.has(m)) {
      seenMetric.add(m);
      metricNames.push(m);
    }
  };
  if (options.metrics) options.metrics.forEach(addMetric);
  else for (const [x] of pairs) WORKLOADS[x.workload].headline.forEach(addMetric);

  // Every metric of a cell shares its label and matched parameters.
  const perCell = new Map<CellValues, { label: string; params: Readonly<CellParams> }>();
  const cellInfo = (c: CellValues) => {
    let info = perCell.get(c);
    if (!info) {
      info = { label: labelOf(c), params: Object.fromEntries(Object.entries(c.params).filter(([k]) => !skip.get(c.workload)?.has(k))) };
      perCell.set(c, info);
    }
    return info;
  };

  const rows: CompareRow[] = [];
  let untestable = false;
  for (const metric of metricNames) {
    const direction = metricDirection(metric);
    for (const [x, y] of pairs) {
      const xs = x.values.get(metric);
      const ys = y.values.get(metric);
      // A metric the workload does not have (or never observed on either side) is no row at all.
      if (!xs && !ys) continue;
      const base = sideStats(xs, options.noise);
      const cand = sideStats(ys, options.noise);
      const warnings: string[] = [];
      if (x.problem && !base) warnings.push(`baseline: ${x.problem}`);
      if (y.problem && !cand) warnings.push(`candidate: ${y.problem}`);
      let ratio: number | null = null;
      let delta: number | null = null;
      let ci: RatioInterval | null = null;
      let p: number | null = null;
      if (base && cand && xs && ys) {
        delta = deltaPercent(base.median, cand.median);
        ratio = delta === null ? null : cand.median / base.median;
        ci = ratioConfidenceInterval(xs, ys, level);
        p = mannWhitneyU(xs, ys).pValue;
        if (base.noise.noisy) warnings.push(`baseline too noisy to conclude: ${base.noise.reasons.join('; ')}`);
        if (cand.noise.noisy) warnings.push(`candidate too noisy to conclude: ${cand.noise.reasons.join('; ')}`);
        if (smallestPossiblePValue(xs.length, ys.length) >= alpha) {
          untestable = true;
          warnings.push(`${xs.length} vs ${ys.length} runs cannot reach p < ${alpha}`);
        }
      }
      const significant = p !== null && p < alpha;
      rows.push({
        metric,
        direction,
        workload: x.workload,
        params: cellInfo(x).params,
        label: cellInfo(x).label,
        baselineMachine: x.machine,
        candidateMachine: y.machine,
        baseline: base,
        candidate: cand,
        ratio,
        deltaPct: delta,
        ci,
        pValue: p,
        significant,
        verdict: verdictOf(significant, direction, ratio),
        warnings,
      });
    }
  }

  const summary: MetricSummary[] = metricNames.map((metric) => {
    const mine = rows.filter((r) => r.metric === metric && r.ratio !== null);
    const g = geometricMean(mine.map((r) => r.ratio ?? Number.NaN));
    return {
      metric,
      direction: metricDirection(metric),
      cells: mine.length,
      significant: mine.filter((r) => r.significant).length,
      better: mine.filter((r) => r.verdict === 'better').length,
      worse: mine.filter((r) => r.verdict === 'worse').length,
      geomeanRatio: g,
      geomeanDeltaPct: g === null ? null : (g - 1) * 100,
    };
  });

  const notes: string[] = [];
  for (const d of differing) {
    notes.push(
      d.baseline !== null && d.candidate !== null
        ? `compared: ${d.param} ${d.baseline} (baseline) against ${d.candidate} (candidate); cells matched on the other parameters`
        : `${d.param} is only in the ${d.baseline !== null ? 'baseline' : 'candidate'} (${d.baseline ?? d.candidate ?? ''}); cells matched without it`,
    );
  }
  if (!byMachine && a.machines.size === 1 && b.machines.size === 1) {
    const [ma] = a.machines;
    const [mb] = b.machines;
    if (ma !== mb) notes.push(`compared machines: ${ma ?? ''} (baseline) against ${mb ?? ''} (candidate)`);
  }
  if (pairs.length === 0 && a.cells.size > 0 && b.cells.size > 0) {
    notes.push(
      byMachine
        ? 'no cell matched: the sets hold several machines and none in common; pick one machine per side (--baseline-machine, --candidate-machine)'
        : 'no cell matched: the two sets have no parameters in common',
    );
  }
  if (untestable) {
    notes.push(`some cells have too few runs for the Mann-Whitney test to reach p < ${alpha} at all (3 vs 3 runs: p >= 0.1); run at least 5 repetitions`);
  }
  if (rows.some((r) => r.warnings.some((w) => w.includes('too noisy')))) {
    notes.push('cells marked ! are too noisy to conclude (high CV or too few runs): treat their deltas as unconfirmed');
  }

  return {
    baseline: a.info(),
    candidate: b.info(),
    alpha,
    level,
    matchedBy: byMachine ? 'params+machine' : 'params',
    differing,
    metrics: metricNames,
    rows,
    summary,
    unmatched: { baseline: onlyBaseline.map(labelOf), candidate: onlyCandidate.map(labelOf) },
    notes,
  };
}

export function compareRunSets(
  baseline: Iterable<AggregatableRun>,
  candidate: Iterable<AggregatableRun>,
  options: CompareOptions = {},
): CompareReport {
  const a = new CompareSide(options.baselineName ?? 'baseline', options.metrics, options.baselineMachine);
  const b = new CompareSide(options.candidateName ?? 'candidate', options.metrics, options.candidateMachine);
  for (const r of baseline) a.add(r);
  for (const r of candidate) b.add(r);
  return compareSides(a, b, options);
}

export async function compareRunSetsAsync(
  baseline: AsyncIterable<AggregatableRun> | Iterable<AggregatableRun>,
  candidate: AsyncIterable<AggregatableRun> | Iterable<AggregatableRun>,
  options: CompareOptions = {},
): Promise<CompareReport> {
  const a = new CompareSide(options.baselineName ?? 'baseline', options.metrics, options.baselineMachine);
  const b = new CompareSide(options.candidateName ?? 'candidate', options.metrics, options.candidateMachine);
  for await (const r of baseline) a.add(r);
  for await (const r of candidate) b.add(r);
  return compareSides(a, b, options);
}
