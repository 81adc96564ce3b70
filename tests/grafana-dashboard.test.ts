/**
 * deploy/grafana/fsbench.json, the Grafana dashboard of the coordinator's /metrics:
 * - importable anywhere: every panel, query and variable takes its datasource from the
 *   DS_PROMETHEUS variable, which `__inputs` asks for on import, never from a uid of one Grafana;
 * - of Grafana's dashboard model: the JSON type-checks against @grafana/schema's `Dashboard`, and
 *   each panel's options against its panel plugin's `Options` (the package ships types only, no
 *   JSON schema or validator, so the TypeScript compiler is the checker);
 * - about metrics that exist: every metric name in every expression is a series a real
 *   coordinator exports, scraped after a noop matrix ran through a real agent and redis-server,
 *   with counters under rate/increase, gauges under deriv and histogram buckets under
 *   histogram_quantile; and every fsbench metric of the coordinator's own is on some panel.
 * Each check is also run on a broken copy of the dashboard, to show it can fail.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { useCluster } from './helpers/cluster.js';
import { getJson, submitMatrix, until } from './helpers/http.js';

const FILE = path.join(import.meta.dirname, '..', 'deploy', 'grafana', 'fsbench.json');
const raw: unknown = JSON.parse(readFileSync(FILE, 'utf8'));

const DS_UID = '${DS_PROMETHEUS}';
const DatasourceRef = z.object({ type: z.literal('prometheus'), uid: z.literal(DS_UID) }).strict();
const Target = z.object({ refId: z.string(), expr: z.string().min(1), datasource: DatasourceRef }).loose();
const GridPos = z.object({ x: z.number().int().min(0), y: z.number().int().min(0), w: z.number().int().min(1), h: z.number().int().min(1) });
const Panel = z.discriminatedUnion('type', [
  z.object({ type: z.literal('row'), id: z.number(), title: z.string(), gridPos: GridPos, panels: z.array(z.unknown()).length(0), collapsed: z.literal(false) }).loose(),
  z
    .object({
      type: z.enum(['timeseries', 'stat']),
      id: z.number(),
      title: z.string().min(1),
      description: z.string().min(1),
      gridPos: GridPos,
      datasource: DatasourceRef,
      targets: z.array(Target).min(1),
    })
    .loose(),
]);
type Panel = z.infer<typeof Panel>;
const Variable = z.object({ name: z.string(), type: z.string(), query: z.string().optional(), datasource: DatasourceRef.optional() }).loose();
const DashboardFile = z
  .object({
    __inputs: z.array(z.object({ name: z.string(), type: z.string(), pluginId: z.string() }).loose()),
    __requires: z.array(z.object({ type: z.string(), id: z.string() }).loose()),
    uid: z.string(),
    panels: z.array(Panel),
    templating: z.object({ list: z.array(Variable) }),
  })
  .loose();
type DashboardFile = z.infer<typeof DashboardFile>;

const dashboard = DashboardFile.parse(raw);

const panelsOf = (d: DashboardFile) => d.panels.flatMap((p) => (p.type === 'row' ? [] : [p]));

// ---- The metric names in PromQL -----------------------------------------------------------

const KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'and', 'or', 'unless', 'offset', 'inf', 'nan']);

/** An expression with its string literals emptied: what is left has no quote to hide a name or a parenthesis. */
const unquoted = (expr: string) => expr.replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""');

/**
 * The metric names an expression selects: identifiers that are not functions (followed by a
 * parenthesis), keywords, label names (in matchers and by/without/on/ignoring lists), durations
 * or Grafana variables. PromQL names a metric nowhere else, short of `{__name__=...}`, which the
 * dashboard must not use (the test refuses it).
 */
function metricNames(expr: string): string[] {
  const bare = unquoted(expr)
    .replace(/\{[^{}]*\}/g, ' ')
    .replace(/\[[^[\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)/g, ' ');
  const names: string[] = [];
  for (const m of bare.matchAll(/(?<![\w$.])[A-Za-z_:][\w:]*/g)) {
    if (/^\s*\(/.test(bare.slice(m.index + m[0].length))) continue;
    if (KEYWORDS.has(m[0].toLowerCase())) continue;
    names.push(m[0]);
  }
  return names;
}

/** The argument text of each call of `fn` in `expr`. */
function callsOf(fn: string, expr: string): string[] {
  const text = unquoted(expr);
  const out: string[] = [];
  for (const m of text.matchAll(new RegExp(`\\b${fn}\\s*\\(`, 'g'))) {
    const start = m.index + m[0].length;
    let depth = 1;
    let i = start;
    for (; i < text.length && depth > 0; i++) depth += text[i] === '(' ? 1 : text[i] === ')' ? -1 : 0;
    out.push(text.slice(start, i - 1));
  }
  return out;
}

/** The expressions of a dashboard: each panel's queries, and each query variable's. */
function expressions(d: DashboardFile): { where: string; expr: string }[] {
  const queries = panelsOf(d).flatMap((p) => p.targets.map((t) => ({ where: `panel ${p.id} "${p.title}" query ${t.refId}`, expr: t.expr })));
  const variables = d.templating.list.flatMap((v) => {
    if (v.type !== 'query' || v.query === undefined) return [];
    // label_values(<selector>, <label>): the label is not a metric.
    const m = /^label_values\((.*),\s*[A-Za-z_]\w*\)$/.exec(v.query);
    return [{ where: `variable ${v.name}`, expr: m?.[1] ?? v.query }];
  });
  return [...queries, ...variables];
}

// ---- What a coordinator exports -----------------------------------------------------------

type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';
interface Series {
  readonly family: string;
  readonly type: MetricType;
  /** For a histogram or summary: which of its series (`bucket`, `sum`, `count`); null for the plain name. */
  readonly part: 'bucket' | 'sum' | 'count' | null;
}

/** The series names a scrape declares (Prometheus text format), by the family's `# TYPE`. */
function exportedSeries(scrape: string): Map<string, Series> {
  const series = new Map<string, Series>();
  for (const m of scrape.matchAll(/^# TYPE (\S+) (counter|gauge|histogram|summary|untyped)$/gm)) {
    const family = m[1] ?? '';
    const type = z.enum(['counter', 'gauge', 'histogram', 'summary', 'untyped']).parse(m[2]);
    if (type === 'histogram' || type === 'summary') {
      for (const part of ['sum', 'count'] as const) series.set(`${family}_${part}`, { family, type, part });
      if (type === 'histogram') series.set(`${family}_bucket`, { family, type, part: 'bucket' });
      else series.set(family, { family, type, part: null });
    } else {
      series.set(family, { family, type, part: null });
    }
  }
  return series;
}

/** Samples of the scrape: every line that is not a comment, by its series name. */
function sampleNames(scrape: string): Set<string> {
  return new Set(scrape.split('\n').flatMap((l) => (l === '' || l.startsWith('#') ? [] : [/^[A-Za-z_:][\w:]*/.exec(l)?.[0] ?? l])));
}

const COUNTER_FUNCTIONS = ['rate', 'irate', 'increase', 'resets'];
const GAUGE_FUNCTIONS = ['deriv', 'delta', 'idelta', 'predict_linear'];

/** What is wrong with a dashboard's expressions against a scrape; empty when nothing is. */
function problems(d: DashboardFile, series: ReadonlyMap<string, Series>): string[] {
  const out: string[] = [];
  for (const { where, expr } of expressions(d)) {
    if (expr.includes('__name__')) out.push(`${where}: selects by __name__, which hides the metric's name`);
    const names = metricNames(expr);
    if (names.length === 0) out.push(`${where}: names no metric: ${expr}`);
    for (const name of names) if (!series.has(name)) out.push(`${where}: ${name} is not a series the coordinator exports`);
    const counterLike = (s: Series | undefined) => s !== undefined && (s.type === 'counter' || s.part !== null);
    for (const fn of COUNTER_FUNCTIONS)
      for (const arg of callsOf(fn, expr))
        for (const name of metricNames(arg)) if (series.has(name) && !counterLike(series.get(name))) out.push(`${where}: ${fn}() of ${name}, which is not a counter`);
    for (const fn of GAUGE_FUNCTIONS)
      for (const arg of callsOf(fn, expr))
        for (const name of metricNames(arg)) if (series.has(name) && series.get(name)?.type !== 'gauge') out.push(`${where}: ${fn}() of ${name}, which is not a gauge`);
    for (const arg of callsOf('histogram_quantile', expr))
      for (const name of metricNames(arg)) if (series.has(name) && series.get(name)?.part !== 'bucket') out.push(`${where}: histogram_quantile() of ${name}, which is not a histogram's _bucket`);
  }
  return out;
}

/** A copy of the dashboard with the first query of the first panel titled `title` replaced. */
function withQuery(d: DashboardFile, title: string, expr: string): DashboardFile {
  const copy = DashboardFile.parse(structuredClone(raw));
  const panel = copy.panels.find((p): p is Exclude<Panel, { type: 'row' }> => p.type !== 'row' && p.title === title);
  const target = panel?.targets[0];
  if (!target) throw new Error(`no panel "${title}" with a query in ${d.uid}`);
  target.expr = expr;
  return copy;
}

describe('the Grafana dashboard', () => {
  it('takes its datasource from DS_PROMETHEUS, asked for on import, everywhere', () => {
    expect(dashboard.__inputs).toEqual([expect.objectContaining({ name: 'DS_PROMETHEUS', type: 'datasource', pluginId: 'prometheus' })]);
    const variable = dashboard.templating.list.find((v) => v.name === 'DS_PROMETHEUS');
    expect(variable).toMatchObject({ type: 'datasource', query: 'prometheus' });
    // Every datasource object anywhere in the file is the variable: no uid of one Grafana.
    const refs: unknown[] = [];
    const walk = (x: unknown): void => {
      if (Array.isArray(x)) x.forEach(walk);
      else if (typeof x === 'object' && x !== null) {
        for (const [k, v] of Object.entries(x)) {
          if (k === 'datasource') refs.push(v);
          walk(v);
        }
      }
    };
    walk(raw);
    expect(refs.length).toBeGreaterThan(panelsOf(dashboard).length);
    for (const r of refs) expect(r).toEqual({ type: 'prometheus', uid: DS_UID });
    // An import checks for the plugins the dashboard needs.
    const required = new Set(dashboard.__requires.filter((r) => r.type === 'panel').map((r) => r.id));
    expect([...required].sort()).toEqual([...new Set(panelsOf(dashboard).map((p) => p.type))].sort());
    expect(dashboard.__requires).toEqual(expect.arrayContaining([expect.objectContaining({ type: 'datasource', id: 'prometheus' })]));
  });

  it('lays its panels on the 24-column grid without overlap, with unique ids and query ids', () => {
    const ids = dashboard.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    const taken = new Map<string, number>();
    const clashes: string[] = [];
    for (const p of dashboard.panels) {
      const g = p.gridPos;
      if (g.x + g.w > 24) clashes.push(`panel ${p.id} reaches column ${g.x + g.w} of 24`);
      for (let x = g.x; x < g.x + g.w; x++)
        for (let y = g.y; y < g.y + g.h; y++) {
          const other = taken.get(`${x},${y}`);
          if (other !== undefined) clashes.push(`panel ${p.id} overlaps panel ${other} at ${x},${y}`);
          taken.set(`${x},${y}`, p.id);
        }
    }
    expect(clashes).toEqual([]);
    for (const p of panelsOf(dashboard)) {
      const refIds = p.targets.map((t) => t.refId);
      expect(new Set(refIds).size, `panel ${p.id}`).toBe(refIds.length);
    }
  });

  describe("against @grafana/schema's types", () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'fsbench-grafana-'));
    afterAll(() => {
      rmSync(dir, { recursive: true, force: true });
    });

    /** The dashboard as the TypeScript a type check needs: each part `satisfies` the package's type for it. */
    function asTypeScript(file: unknown): string {
      const entries = Object.entries(z.record(z.string(), z.unknown()).parse(file));
      // The import format's keys are not part of the dashboard model (Grafana strips them on import).
      const model = Object.fromEntries(entries.filter(([k]) => !['__inputs', '__requires', '__elements'].includes(k)));
      // Loose: a broken copy must reach the compiler, which is the check.
      const PanelParts = z.object({ type: z.string(), options: z.unknown(), fieldConfig: z.object({ defaults: z.object({ custom: z.unknown().optional() }).loose() }).loose(), targets: z.unknown() }).loose();
      const { panels } = z.object({ panels: z.array(z.object({ type: z.string() }).loose()) }).parse(file);
      const panelChecks = panels.flatMap((row, i) => {
        if (row.type === 'row') return [];
        const p = PanelParts.parse(row);
        const shape =
          p.type === 'timeseries'
            ? `{ options: Json<TimeSeriesOptions>; custom: Json<GraphFieldConfig>; targets: PrometheusQuery[] }`
            : `{ options: Json<StatOptions>; custom?: undefined; targets: PrometheusQuery[] }`;
        return [`export const panel${i} = ${JSON.stringify({ options: p.options, custom: p.fieldConfig.defaults.custom, targets: p.targets })} satisfies ${shape};`];
      });
      return [
        "import type { Dashboard, DataQuery, GraphFieldConfig } from '@grafana/schema';",
        "import type { Options as TimeSeriesOptions } from '@grafana/schema/timeseries';",
        "import type { Options as StatOptions } from '@grafana/schema/stat';",
        // Grafana's string enums (ThresholdsMode, LegendDisplayMode ...) by their values, as JSON spells them.
        'type Json<T> = T extends string ? (string extends T ? string : `${T}`) : T extends readonly (infer U)[] ? Json<U>[] : T extends object ? { [K in keyof T]: Json<T[K]> } : T;',
        // A panel's targets are its datasource's queries; @grafana/schema has none for Prometheus, so this is the part of it the dashboard uses.
        "type PrometheusQuery = Json<DataQuery> & { expr: string; legendFormat: string; editorMode: 'code' | 'builder'; range: boolean; datasource: { type: 'prometheus'; uid: string } };",
        `export const dashboard = ${JSON.stringify(model, null, 2)} satisfies Json<Dashboard>;`,
        ...panelChecks,
      ].join('\n');
    }

    /** Type errors of each file, compiled together against the installed @grafana/schema. */
    function typeErrors(files: Record<string, unknown>): Record<string, string[]> {
      const types = path.dirname(createRequire(import.meta.url).resolve('@grafana/schema/package.json'));
      const composable = (name: string) => [path.join(types, 'dist', 'types', 'raw', 'composable', name, 'panelcfg', 'x', 'types.gen.d.ts')];
      const names = Object.keys(files).map((n) => path.join(dir, `${n}.ts`));
      for (const [n, f] of Object.entries(files)) writeFileSync(path.join(dir, `${n}.ts`), asTypeScript(f));
      const program = ts.createProgram(names, {
        strict: true,
        noEmit: true,
        target: ts.ScriptTarget.ES2022,
        module: ts.ModuleKind.ESNext,
        moduleResolution: ts.ModuleResolutionKind.Bundler,
        types: [],
        paths: {
          '@grafana/schema': [path.join(types, 'dist', 'types', 'index.d.ts')],
          '@grafana/schema/timeseries': composable('timeseries'),
          '@grafana/schema/stat': composable('stat'),
        },
      });
      const out: Record<string, string[]> = {};
      for (const n of Object.keys(files)) {
        const source = program.getSourceFile(path.join(dir, `${n}.ts`));
        out[n] = [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)].map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      }
      // A resolution that failed would leave the types `any` and every check passing.
      const global = program.getGlobalDiagnostics().map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      expect(global).toEqual([]);
      return out;
    }

    it("type-checks as a Dashboard, each panel with its plugin's options; broken copies do not", () => {
      /** A copy of the dashboard with `change` made to its first timeseries panel and to the dashboard itself. */
      const broken = (change: (panel: Record<string, unknown>, dashboard: Record<string, unknown>) => void) => {
        const b = z.object({ panels: z.array(z.record(z.string(), z.unknown())) }).loose().parse(structuredClone(raw));
        const panel = b.panels.find((p) => p['type'] === 'timeseries');
        if (!panel) throw new Error('no timeseries panel');
        change(panel, b);
        return b;
      };
      const errors = typeErrors({
        dashboard: raw,
        // A width Grafana cannot lay out.
        width: broken((p) => {
          p['gridPos'] = { x: 0, y: 0, w: '12', h: 8 };
        }),
        // A legend placement the time series plugin does not have.
        legend: broken((p) => {
          const options = z.object({ legend: z.record(z.string(), z.unknown()) }).loose().parse(p['options']);
          p['options'] = { ...options, legend: { ...options.legend, placement: 'middle' } };
        }),
        // A misspelt setting, which Grafana would ignore without a word.
        typo: broken((_, d) => {
          d['refreshh'] = '30s';
        }),
        // What the model requires.
        noversion: broken((_, d) => {
          delete d['schemaVersion'];
        }),
      });
      expect(errors).toEqual({
        dashboard: [],
        width: [expect.stringMatching(/Type 'string' is not assignable to type 'number'/)],
        legend: [expect.stringMatching(/Type '"middle"' is not assignable to type 'LegendPlacement'/)],
        typo: [expect.stringMatching(/'"refreshh"' does not exist in type/)],
        noversion: [expect.stringMatching(/Property 'schemaVersion' is missing/)],
      });
    });
  });

  describe("against a real coordinator's /metrics", () => {
    const cluster = useCluster('grafana');
    let scrape = '';
    beforeAll(async () => {
      const c = await cluster.coordinator();
      await cluster.agent(c.prefix, 'h-grafana', 'grafana-machine');
      const id = await submitMatrix(c.url, { name: 'grafana-noop', workload: 'noop', repetitions: 2, warmup: 0, params: { value: [1, 2] } });
      await until(`matrix ${id} to finish`, async () => {
        const m = await getJson(`${c.url}/v1/matrices/${id}`, z.object({ state: z.string() }).loose());
        return m.state === 'done' ? m : undefined;
      });
      const res = await fetch(`${c.url}/metrics`);
      expect(res.status).toBe(200);
      scrape = await res.text();
    });

    it('names only series the coordinator exports, each under a function of its type', () => {
      const series = exportedSeries(scrape);
      // The parse of the scrape covers every sample it has, and the matrix's runs are in it.
      for (const name of sampleNames(scrape)) expect(series.has(name), name).toBe(true);
      expect(scrape).toMatch(/^fsbench_run_duration_seconds_count\{workload="noop",state="ok"\} 4$/m);
      const exprs = expressions(dashboard);
      expect(exprs.length).toBeGreaterThan(20);
      expect(problems(dashboard, series)).toEqual([]);
    });

    it('shows every metric of the coordinator own, beyond the process and Node.js ones', () => {
      const series = exportedSeries(scrape);
      const shown = new Set(expressions(dashboard).flatMap(({ expr }) => metricNames(expr).map((n) => series.get(n)?.family ?? n)));
      const own = [...new Set([...series.values()].map((s) => s.family))].filter((f) => !/^fsbench_(process|nodejs)_/.test(f));
      expect(own.length).toBeGreaterThan(8);
      expect(own.filter((f) => !shown.has(f))).toEqual([]);
    });

    it('would fail on a metric that does not exist, a histogram without its suffix, or a function of the wrong type', () => {
      const series = exportedSeries(scrape);
      const cases: [string, RegExp][] = [
        ['sum(fsbench_queue_depths)', /fsbench_queue_depths is not a series the coordinator exports/],
        ['sum(rate(fsbench_run_duration_seconds[5m]))', /fsbench_run_duration_seconds is not a series/],
        ['sum(fsbench_reports_dropped)', /fsbench_reports_dropped is not a series/],
        ['sum(rate(fsbench_queue_depth[5m]))', /rate\(\) of fsbench_queue_depth, which is not a counter/],
        ['deriv(fsbench_collector_restarts_total[5m])', /deriv\(\) of fsbench_collector_restarts_total, which is not a gauge/],
        ['histogram_quantile(0.9, rate(fsbench_run_duration_seconds_sum[5m]))', /histogram_quantile\(\) of fsbench_run_duration_seconds_sum/],
        ['sum({__name__="fsbench_queue_depth"})', /selects by __name__/],
      ];
      for (const [expr, expected] of cases) expect(problems(withQuery(dashboard, 'Queue depth', expr), series).join('\n'), expr).toMatch(expected);
      // Labels, functions, keywords, durations and variables are not taken for metric names.
      expect(metricNames('sum by (le, workload) (rate(a_bucket{job=~"$job", x="y(z)"}[$__rate_interval] offset 1h)) / on(instance) group_left(kind) b')).toEqual(['a_bucket', 'b']);
    });
  });
});
