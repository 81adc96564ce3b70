/**
 * History: every machine's results over time, as series. A series is one metric of one cell (its
 * parameters) on one machine across the matrices of one name, in the order they ran. Each point
 * is a finished matrix's median with its confidence interval; a series says where the kernel or
 * another machine fact changed and where its level changed (stats/change-point.ts), and whether
 * the runs around a change were disturbed.
 *
 * A finished matrix never changes, so each is summarised once, when history first asks for it:
 * its workload's headline metrics, one point per series, in `history_series_points` (the store's
 * history tables, store/history-table.ts). Queries list a name's series from `history_series` and read the
 * page's points by series, so their cost follows the page, not the history; runs are never
 * aggregated again.
 */
import { differingFacts } from '../../compare/machine-facts.js';
import { canonical } from '../../compare/sides.js';
import type { MachineFingerprint } from '../../contract/fingerprint.js';
import { Annotations, CellParams, describeCell, varyingParams, type Cell } from '../../contract/matrix.js';
import { parseParam } from '../../contract/params.js';
import { paramSpec, WORKLOAD_NAMES, WORKLOADS } from '../../contract/workloads/index.js';
import type { HistoryChange, HistoryPage, HistoryPoint, HistorySeries } from '../../contract/history.js';
import { z } from 'zod';
import { aggregateRuns } from '../../stats/aggregate.js';
import { CHANGE_POINT_DEFAULTS, changeMagnitude, changePoints, type ChangePointOptions } from '../../stats/change-point.js';
import { detectableShift } from '../../stats/power.js';
import { ratioConfidenceInterval } from '../../stats/ratio-ci.js';
import { mean, median, stddev } from '../../stats/summary.js';
import { storeRunSource, type NewPoint, type SeriesRow, type Store } from '../store/index.js';

/** Series per page by default, and at most. */
export const HISTORY_PAGE = { default: 50, max: 500 } as const;

export interface HistoryQuery {
  /** The matrix name whose runs over time make the series. */
  readonly name: string;
  readonly machine?: string;
  readonly metric?: string;
  /** Only cells whose parameters have these values, as a matrix would spell them (`bufferBytes: 64KiB`). */
  readonly params?: Readonly<Record<string, string | number | boolean>>;
  readonly limit?: number;
  /** The last series key of the previous page. */
  readonly after?: string;
  readonly changePoints?: ChangePointOptions;
}

const Workload = z.enum(WORKLOAD_NAMES);

/** A parameter value from a flag or a query, as a matrix file would give it: numbers and booleans as such, the rest as words (`64KiB`). */
function paramValueOf(text: string): string | number | boolean {
  const t = text.trim();
  if (/^-?\d+(\.\d+)?$/.test(t)) return Number(t);
  return t === 'true' ? true : t === 'false' ? false : t;
}

/** `NAME=VALUE` pairs (a flag's, or a query's split at commas) as a cell filter; the first pair that is not one when any. */
export function paramFilter(pairs: readonly string[]): { ok: true; params: Record<string, string | number | boolean> } | { ok: false; bad: string } {
  const params: Record<string, string | number | boolean> = {};
  for (const pair of pairs) {
    const eq = pair.indexOf('=');
    if (eq <= 0) return { ok: false, bad: pair };
    params[pair.slice(0, eq).trim()] = paramValueOf(pair.slice(eq + 1));
  }
  return { ok: true, params };
}

function seriesKey(machine: string, metric: string, cellKey: string): string {
  return JSON.stringify([machine, metric, cellKey]);
}

export class History {
  constructor(private readonly store: Store) {}

  /** Summarises the finished matrices of `name` that are not yet: each once, then never again. */
  private summarise(name: string): void {
    const table = this.store.history;
    const pending = table.unsummarised(name);
    if (pending.length === 0) return;
    const source = storeRunSource(this.store);
    for (const m of pending) {
      const matrix = source(m.id, { histograms: false });
      if (!matrix) continue;
      const byMachine = new Map(table.firstStarts(m.id).map((r) => [r.machine, r]));
      // The headline metrics: what people track over time, at a quarter of the rows of every metric.
      const cells = aggregateRuns(matrix.runs, { grouped: true, histograms: false, metrics: WORKLOADS[matrix.workload].headline });
      const points: NewPoint[] = [];
      for (const c of cells) {
        const started = byMachine.get(c.machine);
        const at = started?.at ?? new Date(m.created_at).toISOString();
        const flagged = c.interference?.flagged ?? 0;
        const cellKey = canonical(c.params);
        const params = JSON.stringify(c.params);
        for (const [metric, st] of Object.entries(c.metrics)) {
          points.push({
            machine: c.machine, metric, cellKey, workload: c.workload, params, at, n: st.n, median: st.median, ciLow: st.ciLow, ciHigh: st.ciHigh, flagged,
            fingerprintHash: started?.hash ?? null,
          });
        }
      }
      table.summarised(name, m.id, points);
    }
  }

  /** The newest finished matrix named `name`, by its first run's start: the gate's `latest:NAME`. */
  latest(name: string): string | undefined {
    this.summarise(name);
    return this.store.history.latest(name);
  }

  /**
   * The gate's `history:NAME` baseline: for each machine and cell, the matrices named `name` since
   * the last change point of any of its headline series, `exclude` (the candidate) left out of
   * the series before its change points are sought. `cells` is keyed by `machine \0 cell key`;
   * `matrices` lists every matrix any cell keeps, newest first.
   */
  since(name: string, exclude: string, options: ChangePointOptions = {}): { readonly cells: Map<string, Set<string>>; readonly matrices: readonly string[] } {
    this.summarise(name);
    const series = this.store.history.series(name);
    const points = this.store.history.pointReader(exclude);
    // Per machine and cell: the latest start of a stretch without a change, over its metrics, and every point.
    const cells = new Map<string, { from: string; points: { matrix_id: string; at: string }[] }>();
    for (const sr of series) {
      const pts = points(sr.id);
      const last = changePoints(
        pts.map((p) => p.median),
        options,
      ).at(-1);
      const from = pts[last?.index ?? 0]?.at ?? '';
      const key = `${sr.machine}\u0000${sr.cell_key}`;
      const cell = cells.get(key);
      if (!cell) cells.set(key, { from, points: pts });
      else if (from > cell.from) cell.from = from;
    }
    const started = new Map<string, string>();
    const out = new Map<string, Set<string>>();
    for (const [key, c] of cells) {
      const kept = c.points.filter((p) => p.at >= c.from);
      for (const p of kept) started.set(p.matrix_id, p.at);
      out.set(key, new Set(kept.map((p) => p.matrix_id)));
    }
    return { cells: out, matrices: [...started].sort((a, b) => (a[1] < b[1] ? 1 : a[1] > b[1] ? -1 : 0)).map(([id]) => id) };
  }

  /** One page of the series of matrix `name`, with their change points. */
  series(q: HistoryQuery): HistoryPage {
    this.summarise(q.name);
    const limit = Math.min(Math.max(1, q.limit ?? HISTORY_PAGE.default), HISTORY_PAGE.max);
    const { all, renamed } = this.seriesOf(q);
    // Each cell once, its parameters read once: series repeat cells per machine and metric.
    const cells = new Map<string, Cell>();
    for (const k of all) if (!cells.has(k.cell_key)) cells.set(k.cell_key, { id: k.cell_key, workload: Workload.parse(k.workload), params: CellParams.parse(JSON.parse(k.params)) });
    // Labels name what varies among all the name's cells, so a filtered or paged series reads the same.
    const labels = labelsOf([...cells.values()]);
    const wanted = (k: SeriesRow): boolean => {
      const cell = cells.get(k.cell_key);
      if (!cell) return false;
      return Object.entries(q.params ?? {}).every(([param, raw]) => {
        const spec = paramSpec(cell.workload, param);
        const parsed = spec ? parseParam(spec, raw) : null;
        return parsed?.ok === true ? cell.params[param] === parsed.value : cell.params[param] === raw;
      });
    };
    const keys = all.filter((k) => wanted(k) && (q.after === undefined || seriesKey(k.machine, k.metric, k.cell_key) > q.after));
    const page = keys.slice(0, limit);
    const points = this.store.history.pointReader();
    const fingerprints = new Map<string, MachineFingerprint | null>();
    const fingerprint = (hash: string | null): MachineFingerprint | null => {
      if (hash === null) return null;
      if (!fingerprints.has(hash)) {
        let fp: MachineFingerprint | null = null;
        try {
          fp = this.store.fingerprintByHash(hash);
        } catch {
          // An older fsbench's fingerprint: its facts are unknown, not different.
        }
        fingerprints.set(hash, fp);
      }
      return fingerprints.get(hash) ?? null;
    };
    // The matrices' annotations (the commit under test, a kernel build): one small read per matrix
    // of the page, not the whole matrix (a page may span a thousand of them).
    const annotationsOfRow = this.store.history.annotationReader();
    const annotationsOf = new Map<string, Readonly<Record<string, string>>>();
    const annotations = (matrixId: string): Readonly<Record<string, string>> => {
      let a = annotationsOf.get(matrixId);
      if (a === undefined) {
        const text = annotationsOfRow(matrixId);
        // Stored as the schema checked them; an unreadable value counts as none rather than failing the page.
        a = text === null ? {} : (Annotations.safeParse(JSON.parse(text)).data ?? {});
        annotationsOf.set(matrixId, a);
      }
      return a;
    };
    const series = page.map((k): HistorySeries => {
      let previous: { hash: string; fp: MachineFingerprint } | null = null;
      let previousAnnotations: Readonly<Record<string, string>> | null = null;
      const pts = points(k.id).map((r): HistoryPoint => {
        const fp = fingerprint(r.fingerprint_hash);
        // Most points share their machine's fingerprint with the one before: nothing to compare.
        const changes =
          previous && fp && r.fingerprint_hash !== previous.hash ? differingFacts(previous.fp, fp).map((d) => `${d.fact}: ${d.a ?? '?'} -> ${d.b ?? '?'}`) : [];
        if (fp && r.fingerprint_hash !== null) previous = { hash: r.fingerprint_hash, fp };
        const own = annotations(r.matrix_id);
        const annotationChanges = previousAnnotations === null ? [] : changedAnnotations(previousAnnotations, own);
        previousAnnotations = own;
        return {
          matrixId: r.matrix_id, at: r.at, n: r.n, median: r.median, ciLow: r.ci_low, ciHigh: r.ci_high, flagged: r.flagged,
          kernel: fp?.kernel.release ?? null, factChanges: changes, annotations: { ...own }, annotationChanges,
        };
      });
      const cell = cells.get(k.cell_key);
      const changes = changesOf(pts, q.changePoints);
      return {
        key: seriesKey(k.machine, k.metric, k.cell_key),
        name: q.name,
        machine: k.machine,
        workload: Workload.parse(k.workload),
        metric: k.metric,
        params: cell?.params ?? {},
        label: labels.get(k.cell_key) ?? k.cell_key,
        points: pts,
        changes,
        detectable: detectableStep(pts, changes, q.changePoints),
      };
    });
    const last = series.at(-1);
    return { series, next: keys.length > limit && last ? last.key : null, ...(renamed ? { renamed } : {}) };
  }

  /**
   * The series of the query's name, machine and metric; a machine that has none under its name
   * but was renamed answers with the series of the name it has now, which hold its runs.
   */
  private seriesOf(q: HistoryQuery): { all: SeriesRow[]; renamed?: HistoryPage['renamed'] } {
    const all = this.store.history.series(q.name, q.machine, q.metric);
    if (all.length > 0 || q.machine === undefined) return { all };
    const r = this.store.renames.renamedTo(q.machine);
    if (!r || r.to === r.from) return { all };
    return { all: this.store.history.series(q.name, r.to, q.metric), renamed: { from: r.from, to: r.to, at: new Date(r.at).toISOString() } };
  }
}

/**
 * The smallest lasting step (relative to the level since the last change) that as many new points
 * again would show as a change at the change-point test's level with 80% power, from the scatter
 * of the points since the last change: "no change" in a series reads as "no lasting change
 * larger than this". Null when that stretch has fewer than two points or a level of 0.
 */
function detectableStep(points: readonly HistoryPoint[], changes: readonly HistoryChange[], options: ChangePointOptions = {}): number | null {
  const since = points.slice(changes.at(-1)?.index ?? 0).map((p) => p.median);
  if (since.length < 2) return null;
  const level = median(since);
  if (level === 0 || !Number.isFinite(level)) return null;
  const alpha = options.maxP ?? CHANGE_POINT_DEFAULTS.maxP;
  const shift = detectableShift(stddev(since, mean(since)), since.length, since.length, { alpha, test: 't' });
  return Number.isFinite(shift) ? shift / Math.abs(level) : null;
}

/** `commit: 4f2a9c1 -> 9e0b7d2` for each annotation that differs between two points (absent: `-`). */
function changedAnnotations(before: Readonly<Record<string, string>>, after: Readonly<Record<string, string>>): string[] {
  const names = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
  return names.filter((n) => before[n] !== after[n]).map((n) => `${n}: ${before[n] ?? '-'} -> ${after[n] ?? '-'}`);
}

/** Labels naming only the parameters that vary among the cells shown. */
function labelsOf(cells: readonly Cell[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const w of new Set(cells.map((c) => c.workload))) {
    const mine = cells.filter((c) => c.workload === w);
    const varying = varyingParams(mine);
    for (const c of mine) out.set(c.id, varying.length > 0 ? describeCell(c, varying) : '(all)');
  }
  return out;
}

/** The series' change points, each with its size, interval, significance and whether disturbed runs surround it. */
function changesOf(points: readonly HistoryPoint[], options: ChangePointOptions = {}): HistoryChange[] {
  const found = changePoints(
    points.map((p) => p.median),
    options,
  );
  return found.map((cp, i): HistoryChange => {
    const from = found[i - 1]?.index ?? 0;
    const to = found[i + 1]?.index ?? points.length;
    const left = points.slice(from, cp.index);
    const right = points.slice(cp.index, to);
    const before = median(left.map((p) => p.median));
    const after = median(right.map((p) => p.median));
    const ci = ratioConfidenceInterval(
      left.map((p) => p.median),
      right.map((p) => p.median),
    );
    // The points that decide the step: the last before it and the first after it.
    const around = [left.at(-1), right[0]].filter((p): p is HistoryPoint => p !== undefined);
    const why = [
      ...around.filter((p) => p.flagged > 0).map((p) => `matrix ${p.matrixId} has ${String(p.flagged)} of ${String(p.n)} runs flagged for interference`),
      ...(right[0]?.factChanges.map((f) => `the machine changed: ${f}`) ?? []),
      ...(right[0]?.annotationChanges.map((a) => `the annotations changed: ${a}`) ?? []),
    ];
    const at = points[cp.index];
    return {
      index: cp.index,
      matrixId: at?.matrixId ?? '',
      at: at?.at ?? '',
      before,
      after,
      ratio: before === 0 ? null : after / before,
      ratioLow: ci?.low ?? null,
      ratioHigh: ci?.high ?? null,
      magnitude: changeMagnitude(cp.test),
      p: cp.test.p,
      suspect: around.some((p) => p.flagged > 0),
      why,
    };
  });
}
