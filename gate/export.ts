/**
 * The gate's answer in the formats CI tools already read: JUnit XML (each cell-metric a test
 * case, a regression a failure, one that could not be judged an error, or skipped when
 * --allow-inconclusive accepted it), Bencher's metric format (BMF:
 * value with lower and upper bounds, https://bencher.dev/docs/reference/bencher-metric-format/)
 * and the JSON github-action-benchmark's `customBiggerIsBetter` / `customSmallerIsBetter` tools
 * read (https://github.com/benchmark-action/github-action-benchmark#examples). The bounds are
 * the candidate's ratio interval applied to the baseline median, where there is one.
 */
import type { Direction } from '../contract/metrics.js';
import { metricDoc } from '../contract/workloads/index.js';
import { CONTENT_TYPES, FORMAT_NAMES, render } from '../report/export/index.js';
import { gates, type GateReport, type GateRow } from './gate.js';
import { exportableGate } from './view.js';

/** Text safe inside XML attributes and elements: escaped, and without the control characters XML 1.0 forbids. */
function xml(text: string): string {
  return (
    text
      // eslint-disable-next-line no-control-regex -- exactly the characters XML 1.0 cannot carry
      .replace(/[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/g, '')
      .replace(/&/g, '&amp;')
      .replace(/</g, '&lt;')
      .replace(/>/g, '&gt;')
      .replace(/"/g, '&quot;')
      .replace(/'/g, '&apos;')
  );
}

/** A case's name: the cell's label and the machines, unique within its metric's suite. */
function caseName(r: GateRow): string {
  const machines = r.row.baselineMachine === r.row.candidateMachine ? r.row.baselineMachine : `${r.row.baselineMachine} -> ${r.row.candidateMachine}`;
  return `${r.row.label} [${machines}]`;
}

/** How a row counts in JUnit: a regression fails, an unjudged gated row errs unless accepted. */
function outcomeOf(g: GateReport, r: GateRow): 'failure' | 'error' | 'skipped' | 'passed' {
  if (!gates(r.row)) return 'passed';
  if (r.status === 'regression') return 'failure';
  if (r.status === 'inconclusive') return g.allowInconclusive ? 'skipped' : 'error';
  return 'passed';
}

function caseXml(g: GateReport, r: GateRow): string {
  const attrs = `name="${xml(caseName(r))}" classname="${xml(`fsbench.${r.row.workload}.${r.row.metric}`)}"`;
  switch (outcomeOf(g, r)) {
    case 'failure':
      return `    <testcase ${attrs}>\n      <failure message="${xml(r.reason)}" type="regression">${xml(r.reason)}</failure>\n    </testcase>`;
    case 'error':
      return `    <testcase ${attrs}>\n      <error message="${xml(r.reason)}" type="inconclusive">${xml(r.reason)}</error>\n    </testcase>`;
    case 'skipped':
      return `    <testcase ${attrs}>\n      <skipped message="${xml(r.reason)}"/>\n    </testcase>`;
    case 'passed':
      return `    <testcase ${attrs}>\n      <system-out>${xml(`${gates(r.row) ? r.status : 'not gated'}: ${r.reason}`)}</system-out>\n    </testcase>`;
  }
}

/** A baseline cell the candidate lacks, once per metric: not judged, so an error unless accepted. */
function missingXml(g: GateReport, label: string, metric: string): string {
  const why = 'not judged: only in the baseline (the candidate has no such cell: its runs failed, or the matrix changed)';
  const attrs = `name="${xml(label)}" classname="${xml(`fsbench.${metric}`)}"`;
  return g.allowInconclusive
    ? `    <testcase ${attrs}>\n      <skipped message="${xml(why)}"/>\n    </testcase>`
    : `    <testcase ${attrs}>\n      <error message="${xml(why)}" type="inconclusive">${xml(why)}</error>\n    </testcase>`;
}

/** JUnit XML as Jenkins, GitLab and GitHub's test reporters read it: one suite per metric. */
export function gateJunit(g: GateReport): string {
  const totals = { tests: 0, failure: 0, error: 0, skipped: 0 };
  const suites = g.compare.metrics.map((metric) => {
    const rows = g.rows.filter((r) => r.row.metric === metric);
    const counts = { failure: 0, error: 0, skipped: 0 };
    for (const r of rows) {
      const o = outcomeOf(g, r);
      if (o !== 'passed') counts[o]++;
    }
    const missing = g.compare.unmatched.baseline;
    counts[g.allowInconclusive ? 'skipped' : 'error'] += missing.length;
    const tests = rows.length + missing.length;
    totals.tests += tests;
    totals.failure += counts.failure;
    totals.error += counts.error;
    totals.skipped += counts.skipped;
    return [
      `  <testsuite name="${xml(`fsbench gate: ${metric}`)}" tests="${String(tests)}" failures="${String(counts.failure)}" errors="${String(counts.error)}" skipped="${String(counts.skipped)}">`,
      ...rows.map((r) => caseXml(g, r)),
      ...missing.map((label) => missingXml(g, label, metric)),
      '  </testsuite>',
    ].join('\n');
  });
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites name="fsbench gate" tests="${String(totals.tests)}" failures="${String(totals.failure)}" errors="${String(totals.error)}" skipped="${String(totals.skipped)}">`,
    ...suites,
    '</testsuites>',
    '',
  ].join('\n');
}

/** The candidate's median and the interval the ratio CI puts around it in baseline units, where both sides have a result. */
function valueOf(r: GateRow): { value: number; lower?: number; upper?: number } | null {
  const { candidate, baseline, ci } = r.row;
  if (candidate === null) return null;
  if (baseline === null || ci === null) return { value: candidate.median };
  return { value: candidate.median, lower: baseline.median * ci.low, upper: baseline.median * ci.high };
}

/** A benchmark's name in the flat formats: the metric's cell and machine. */
function benchmarkName(r: GateRow): string {
  return `${r.row.workload}/${caseName(r)}`;
}

/** Bencher Metric Format: { benchmark: { measure: { value, lower_value, upper_value } } }. */
export function gateBencher(g: GateReport): Record<string, Record<string, { value: number; lower_value?: number; upper_value?: number }>> {
  const out: Record<string, Record<string, { value: number; lower_value?: number; upper_value?: number }>> = {};
  for (const r of g.rows) {
    const v = valueOf(r);
    if (v === null) continue;
    const measures = (out[benchmarkName(r)] ??= {});
    measures[r.row.metric] = { value: v.value, ...(v.lower === undefined ? {} : { lower_value: v.lower }), ...(v.upper === undefined ? {} : { upper_value: v.upper }) };
  }
  return out;
}

export interface ActionBenchmarkEntry {
  readonly name: string;
  readonly unit: string;
  readonly value: number;
  readonly range?: string;
  readonly extra?: string;
}

/**
 * github-action-benchmark's custom tools take one direction per file: `bigger` gives the metrics
 * where higher is better (customBiggerIsBetter), `smaller` those where lower is (customSmallerIsBetter).
 */
export function gateActionBenchmark(g: GateReport, direction: 'bigger' | 'smaller'): ActionBenchmarkEntry[] {
  const wanted: Direction = direction === 'bigger' ? 'higher' : 'lower';
  return g.rows.flatMap((r) => {
    const v = valueOf(r);
    if (v === null || r.row.direction !== wanted) return [];
    const range = v.lower === undefined || v.upper === undefined ? undefined : `${v.lower.toPrecision(4)}-${v.upper.toPrecision(4)}`;
    return [{ name: `${benchmarkName(r)} ${r.row.metric}`, unit: metricDoc(r.row.workload, r.row.metric)?.unit ?? '', value: v.value, ...(range === undefined ? {} : { range }), extra: `${r.status}: ${r.reason}` }];
  });
}

/** Every format the gate writes: the exporters' four and the CI tools' own. */
export const GATE_FORMATS = [...FORMAT_NAMES, 'junit', 'bencher', 'benchmark-action-bigger', 'benchmark-action-smaller'] as const;
export type GateFormat = (typeof GATE_FORMATS)[number];

export const GATE_CONTENT_TYPES: Readonly<Record<GateFormat, string>> = {
  ...CONTENT_TYPES,
  junit: 'application/xml; charset=utf-8',
  bencher: 'application/json; charset=utf-8',
  'benchmark-action-bigger': 'application/json; charset=utf-8',
  'benchmark-action-smaller': 'application/json; charset=utf-8',
};

/** The gate's answer in `format`, for `fsbench gate` and `GET /v1/gate` alike. */
export function renderGate(format: GateFormat, g: GateReport): string {
  switch (format) {
    case 'junit':
      return gateJunit(g);
    case 'bencher':
      return `${JSON.stringify(gateBencher(g), null, 2)}\n`;
    case 'benchmark-action-bigger':
      return `${JSON.stringify(gateActionBenchmark(g, 'bigger'), null, 2)}\n`;
    case 'benchmark-action-smaller':
      return `${JSON.stringify(gateActionBenchmark(g, 'smaller'), null, 2)}\n`;
    default:
      return render(format, exportableGate(g));
  }
}
