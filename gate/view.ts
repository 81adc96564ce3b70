/**
 * The gate's answer as the exporters take it (table for the terminal, Markdown for a CI job
 * summary or a pull-request comment, CSV, JSON): the verdict first, then every cell-metric with
 * its status, its move, the interval, p and the smallest change it could have seen.
 */
import type { Column, CsvTable, Doc, Exportable } from '../report/export/index.js';
import { formatDelta, formatInterval, formatPercent, formatPValue, formatRatio } from '../report/format.js';
import { sideText } from '../compare/view.js';
import { gates, type GateReport, type GateRow } from './gate.js';

const left = (title: string): Column => ({ title, align: 'left' });
const right = (title: string): Column => ({ title, align: 'right' });

function detectableText(r: GateRow): string {
  if (r.detectable === null) return 'n/a';
  return Number.isFinite(r.detectable) ? formatPercent(r.detectable) : 'none';
}

/** Where the regressions are, by cell and metric: the line a CI log or a reviewer reads first. */
function regressionLines(g: GateReport): string[] {
  return g.rows.filter((r) => r.status === 'regression').map((r) => `REGRESSION ${r.row.metric} ${r.row.label} [${r.row.candidateMachine}]: ${r.reason}`);
}

/** The verdict as a CI log shows it, saying what an accepted inconclusive pass leaves open. */
export function verdictText(g: GateReport): string {
  if (g.verdict === 'fail') return 'FAIL';
  if (g.verdict === 'inconclusive') return 'INCONCLUSIVE';
  const open = g.counts.inconclusive + g.compare.unmatched.baseline.length;
  return open > 0 ? `PASS (${String(open)} not judged, accepted by --allow-inconclusive)` : 'PASS';
}

/** Cell-metrics the gate could not judge, each with why: what exit 7 is about. */
function unjudgedLines(g: GateReport): string[] {
  return [
    ...g.rows.filter((r) => r.status === 'inconclusive' && gates(r.row)).map((r) => `INCONCLUSIVE ${r.row.metric} ${r.row.label}: ${r.reason}`),
    // A cell the candidate lacks (its runs failed, or the matrix changed) was not judged: never let it pass unseen.
    ...g.compare.unmatched.baseline.map((l) => `INCONCLUSIVE ${l}: not judged, only in the baseline (the candidate has no such cell: its runs failed, or the matrix changed)`),
  ];
}

function ungatedText(g: GateReport): string {
  const n = g.rows.filter((r) => !gates(r.row)).length;
  return n === 0 ? '' : `; ${String(n)} shown but not gated (their metric has no better direction)`;
}

export function gateDoc(g: GateReport): Doc {
  const c = g.compare;
  const limits = [...new Set(g.rows.map((r) => `${r.row.metric} ${formatPercent(r.threshold)}`))];
  return {
    title: `gate: ${c.baseline.name} -> ${c.candidate.name}: ${verdictText(g)}`,
    preamble: [
      `${String(g.counts.regression)} regressions, ${String(g.counts.improvement)} improvements, ${String(g.counts.pass)} within limits, ${String(g.counts.inconclusive + c.unmatched.baseline.length)} inconclusive${ungatedText(g)}`,
      `a cell-metric fails when it moves the bad way by more than its limit (${limits.join(', ') || formatPercent(g.maxRegression)}) with p < ${String(c.alpha)} (Mann-Whitney U) and the ratio's ${String(c.level * 100)}% CI wholly on the bad side`,
      `it passes when that CI rules out a move beyond its limit the bad way; otherwise (too few runs, too wide a CI, a side missing) it is inconclusive, and so is the gate (exit 7) unless --allow-inconclusive`,
      `detectable: the smallest change these runs would have caught with ${String(Math.round(g.power * 100))}% power; none: too few runs to reach p < ${String(c.alpha)}`,
      ...(g.excluded ? [`runs flagged for interference left out: ${String(g.excluded.baseline)} of the baseline, ${String(g.excluded.candidate)} of the candidate`] : []),
    ],
    tables: [
      {
        columns: [left('status'), left('metric'), left('cell'), right('baseline'), right('candidate'), right('delta'), right('ratio CI'), right('p'), right('detectable')],
        rows: g.rows.map((r) => [
          r.status, r.row.metric, r.row.label, sideText(r.row.baseline), sideText(r.row.candidate), formatDelta(r.row.deltaPct),
          formatInterval(r.row.ci?.low, r.row.ci?.high, formatRatio), formatPValue(r.row.pValue), detectableText(r),
        ]),
        blockColumns: 0,
      },
    ],
    notes: [
      ...regressionLines(g),
      ...unjudgedLines(g),
      ...c.unmatched.candidate.map((l) => `not judged, only in the candidate (a new cell, nothing to compare with): ${l}`),
      ...c.notes.map((n) => n.text),
    ],
  };
}

export function gateCsv(g: GateReport): CsvTable {
  return {
    columns: ['status', 'metric', 'direction', 'workload', 'cell', 'baseline_machine', 'candidate_machine', 'baseline_median', 'candidate_median', 'delta_pct', 'ratio_ci_low', 'ratio_ci_high', 'p_value', 'threshold', 'detectable', 'reason'],
    rows: g.rows.map((r) => [
      r.status, r.row.metric, r.row.direction, r.row.workload, r.row.label, r.row.baselineMachine, r.row.candidateMachine, r.row.baseline?.median, r.row.candidate?.median,
      r.row.deltaPct, r.row.ci?.low, r.row.ci?.high, r.row.pValue, r.threshold, r.detectable === null || Number.isFinite(r.detectable) ? r.detectable : 'none', r.reason,
    ]),
  };
}

/** JSON: the verdict and each row's judgement with the comparison row it judged (Infinity, which JSON lacks, as null plus `untestable`). */
export function gateJson(g: GateReport): unknown {
  return {
    verdict: g.verdict,
    allowInconclusive: g.allowInconclusive,
    counts: g.counts,
    // Baseline cells the candidate lacks: not judged, so they count toward an inconclusive verdict.
    notJudged: g.compare.unmatched.baseline,
    maxRegression: g.maxRegression,
    power: g.power,
    excluded: g.excluded,
    alpha: g.compare.alpha,
    baseline: g.compare.baseline,
    candidate: g.compare.candidate,
    // The gate's own judgement after the row it judged: its detectable is the one its verdict used.
    rows: g.rows.map((r) => ({
      ...r.row,
      status: r.status,
      reason: r.reason,
      threshold: r.threshold,
      detectable: r.detectable !== null && Number.isFinite(r.detectable) ? r.detectable : null,
      untestable: r.detectable === Number.POSITIVE_INFINITY,
      gated: gates(r.row),
    })),
    notes: g.compare.notes,
  };
}

export function exportableGate(g: GateReport): Exportable {
  return { doc: () => gateDoc(g), csv: () => gateCsv(g), json: () => gateJson(g) };
}
