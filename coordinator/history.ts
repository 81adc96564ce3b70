/**
 * History: every machine's results over time, as series. A series is one metric of one cell (its
 * parameters) on one machine across the matrices of one name, in the order they ran. Each point
 * is a finished matrix's median with its confidence interval; a series says where the kernel or
 * another machine fact changed and where its level changed (stats/change-point.ts), and whether
 * the runs around a change were disturbed.
 *
 * A finished matrix never changes, so each is summarised once, when history first asks for it,
 * into `history_points` (this module owns that table); queries then read points by an index on
 * (name, machine, metric, cell) and never aggregate runs again.
 */
import { differingFacts } from '../compare/machine-facts.js';
import { canonical } from '../compare/sides.js';
import type { MachineFingerprint } from '../contract/fingerprint.js';
import { CellParams, describeCell, varyingParams, type Cell } from '../contract/matrix.js';
import { parseParam } from '../contract/params.js';
import { paramSpec, WORKLOAD_NAMES, type WorkloadName } from '../contract/workloads/index.js';
import { z } from 'zod';
import { aggregateRuns } from '../stats/aggregate.js';
import { changeMagnitude, changePoints, type ChangePointOptions } from '../stats/change-point.js';
import { ratioConfidenceInterval } from '../stats/ratio-ci.js';
import { median } from '../stats/summary.js';
import { storeRunSource } from './store-adapter.js';
import type { Store } from './store.js';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS history_points (
  matrix_id TEXT NOT NULL REFERENCES matrices (id) ON DELETE CASCADE,
  name TEXT NOT NULL, machine TEXT NOT NULL, cell_key TEXT NOT NULL, metric TEXT NOT NULL,
  workload TEXT NOT NULL, params TEXT NOT NULL, at TEXT NOT NULL,
  n INTEGER NOT NULL, median REAL NOT NULL, ci_low REAL, ci_high REAL,
  flagged INTEGER NOT NULL, fingerprint_hash TEXT,
  PRIMARY KEY (matrix_id, machine, cell_key, metric)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS history_by_series ON history_points (name, machine, metric, cell_key, at);
CREATE TABLE IF NOT EXISTS history_summarised (
  matrix_id TEXT PRIMARY KEY REFERENCES matrices (id) ON DELETE CASCADE
) WITHOUT ROWID;
`;

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

const Nullable = z.number().nullable();
/** A page of history as JSON (`GET /v1/history`), for the OpenAPI document; HistoryPage is its type. */
export const HistoryPageSchema = z
  .object({
    series: z.array(
      z
        .object({
          key: z.string(),
          name: z.string(),
          machine: z.string(),
          workload: z.enum(WORKLOAD_NAMES),
          metric: z.string(),
          params: CellParams,
          label: z.string(),
          points: z.array(
            z
              .object({ matrixId: z.string(), at: z.string(), n: z.number().int(), median: z.number(), ciLow: Nullable, ciHigh: Nullable, flagged: z.number().int(), kernel: z.string().nullable(), factChanges: z.array(z.string()) })
              .strict(),
          ),
          changes: z.array(
            z
              .object({
                index: z.number().int(),
                matrixId: z.string(),
                at: z.string(),
                before: z.number(),
                after: z.number(),
                ratio: Nullable.describe('after / before; null when before is 0'),
                ratioLow: Nullable,
                ratioHigh: Nullable,
                magnitude: z.number(),
                p: z.number(),
                suspect: z.boolean(),
                why: z.array(z.string()),
              })
              .strict(),
          ),
        })
        .strict(),
    ),
    next: z.string().nullable(),
  })
  .strict();

export interface HistoryPoint {
  readonly matrixId: string;
  /** When the matrix's first run started (ISO 8601). */
  readonly at: string;
  readonly n: number;
  readonly median: number;
  readonly ciLow: number | null;
  readonly ciHigh: number | null;
  /** Runs flagged for interference among the point's runs. */
  readonly flagged: number;
  readonly kernel: string | null;
  /** Machine facts that differ from the previous point's fingerprint, as `fact: before -> after`. */
  readonly factChanges: readonly string[];
}

export interface HistoryChange {
  /** The first point after the change. */
  readonly index: number;
  readonly matrixId: string;
  readonly at: string;
  /** Median of the points' medians before and after (up to the neighbouring changes). */
  readonly before: number;
  readonly after: number;
  /** after / before, with the Hodges-Lehmann interval of the points either side; null bounds when too few points. */
  readonly ratio: number;
  readonly ratioLow: number | null;
  readonly ratioHigh: number | null;
  readonly magnitude: number;
  readonly p: number;
  /** The points either side of the change carry runs flagged for interference: it may be the machine, not the code. */
  readonly suspect: boolean;
  readonly why: readonly string[];
}

export interface HistorySeries {
  readonly key: string;
  readonly name: string;
  readonly machine: string;
  readonly workload: WorkloadName;
  readonly metric: string;
  readonly params: Readonly<CellParams>;
  readonly label: string;
  readonly points: readonly HistoryPoint[];
  readonly changes: readonly HistoryChange[];
}

export interface HistoryPage {
  readonly series: readonly HistorySeries[];
  /** Pass as `after` for the next page; null on the last. */
  readonly next: string | null;
}

interface PointRow {
  matrix_id: string;
  machine: string;
  cell_key: string;
  metric: string;
  workload: string;
  params: string;
  at: string;
  n: number;
  median: number;
  ci_low: number | null;
  ci_high: number | null;
  flagged: number;
  fingerprint_hash: string | null;
}

const Workload = z.enum(WORKLOAD_NAMES);

/** A parameter value from a flag or a query, as a matrix file would give it: numbers and booleans as such, the rest as words (`64KiB`). */
export function paramValueOf(text: string): string | number | boolean {
  const t = text.trim();
  if (/^-?\d+(\.\d+)?$/.test(t)) return Number(t);
  return t === 'true' ? true : t === 'false' ? false : t;
}

function seriesKey(machine: string, metric: string, cellKey: string): string {
  return JSON.stringify([machine, metric, cellKey]);
}

export class History {
  constructor(private readonly store: Store) {
    store.db.exec(SCHEMA);
  }

  /** Summarises the finished matrices of `name` that are not yet: each once, then never again. */
  private summarise(name: string): void {
    const pending = this.store.db
      .prepare<[string], { id: string; created_at: number }>(
        `SELECT id, created_at FROM matrices m WHERE name = ? AND state = 'done'
           AND NOT EXISTS (SELECT 1 FROM history_summarised s WHERE s.matrix_id = m.id)`,
      )
      .all(name);
    if (pending.length === 0) return;
    const source = storeRunSource(this.store);
    const insert = this.store.db.prepare(
      `INSERT OR REPLACE INTO history_points (matrix_id, name, machine, cell_key, metric, workload, params, at, n, median, ci_low, ci_high, flagged, fingerprint_hash)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    const done = this.store.db.prepare('INSERT OR IGNORE INTO history_summarised (matrix_id) VALUES (?)');
    const firstStart = this.store.db.prepare<[string], { at: string | null; hash: string | null; machine: string }>(
      'SELECT min(started_at) AS at, max(fingerprint_hash) AS hash, machine FROM runs WHERE matrix_id = ? GROUP BY machine',
    );
    for (const m of pending) {
      const matrix = source(m.id, { histograms: false });
      if (!matrix) continue;
      const byMachine = new Map(firstStart.all(m.id).map((r) => [r.machine, r]));
      const cells = aggregateRuns(matrix.runs, { grouped: true, histograms: false });
      this.store.db.transaction(() => {
        for (const c of cells) {
          const started = byMachine.get(c.machine);
          const at = started?.at ?? new Date(m.created_at).toISOString();
          const flagged = c.interference?.flagged ?? 0;
          for (const [metric, s] of Object.entries(c.metrics)) {
            insert.run(m.id, name, c.machine, canonical(c.params), metric, c.workload, JSON.stringify(c.params), at, s.n, s.median, s.ciLow, s.ciHigh, flagged, started?.hash ?? null);
          }
        }
        done.run(m.id);
      })();
    }
  }

  /** One page of the series of matrix `name`, with their change points. */
  series(q: HistoryQuery): HistoryPage {
    this.summarise(q.name);
    const limit = Math.min(Math.max(1, q.limit ?? HISTORY_PAGE.default), HISTORY_PAGE.max);
    const all = this.store.db
      .prepare<[{ name: string; machine: string | null; metric: string | null }], { machine: string; metric: string; cell_key: string; params: string; workload: string }>(
        `SELECT machine, metric, cell_key, max(params) AS params, max(workload) AS workload FROM history_points
         WHERE name = @name AND (@machine IS NULL OR machine = @machine) AND (@metric IS NULL OR metric = @metric)
         GROUP BY machine, metric, cell_key ORDER BY machine, metric, cell_key`,
      )
      .all({ name: q.name, machine: q.machine ?? null, metric: q.metric ?? null });
    // Labels name what varies among all the name's cells, so a filtered or paged series reads the same.
    const labels = labelsOf(all.map((k) => ({ id: k.cell_key, workload: Workload.parse(k.workload), params: CellParams.parse(JSON.parse(k.params)) })));
    const keys = all
      .filter((k) => {
        const params = CellParams.parse(JSON.parse(k.params));
        const workload = Workload.parse(k.workload);
        return Object.entries(q.params ?? {}).every(([name, raw]) => {
          const spec = paramSpec(workload, name);
          const parsed = spec ? parseParam(spec, raw) : null;
          return parsed?.ok === true ? params[name] === parsed.value : params[name] === raw;
        });
      })
      .filter((k) => q.after === undefined || seriesKey(k.machine, k.metric, k.cell_key) > q.after);
    const page = keys.slice(0, limit);
    const points = this.store.db.prepare<[string, string, string, string], PointRow>(
      `SELECT matrix_id, machine, cell_key, metric, workload, params, at, n, median, ci_low, ci_high, flagged, fingerprint_hash
       FROM history_points WHERE name = ? AND machine = ? AND metric = ? AND cell_key = ? ORDER BY at, matrix_id`,
    );
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
    const series = page.map((k): HistorySeries => {
      const rows = points.all(q.name, k.machine, k.metric, k.cell_key);
      let previous: MachineFingerprint | null = null;
      const pts = rows.map((r): HistoryPoint => {
        const fp = fingerprint(r.fingerprint_hash);
        const changes = previous && fp ? differingFacts(previous, fp).map((d) => `${d.fact}: ${d.a ?? '?'} -> ${d.b ?? '?'}`) : [];
        previous = fp ?? previous;
        return { matrixId: r.matrix_id, at: r.at, n: r.n, median: r.median, ciLow: r.ci_low, ciHigh: r.ci_high, flagged: r.flagged, kernel: fp?.kernel.release ?? null, factChanges: changes };
      });
      const workload = Workload.parse(k.workload);
      return {
        key: seriesKey(k.machine, k.metric, k.cell_key),
        name: q.name,
        machine: k.machine,
        workload,
        metric: k.metric,
        params: CellParams.parse(JSON.parse(k.params)),
        label: labels.get(k.cell_key) ?? k.cell_key,
        points: pts,
        changes: changesOf(pts, q.changePoints),
      };
    });
    const last = series.at(-1);
    return { series, next: keys.length > limit && last ? last.key : null };
  }
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
    ];
    const at = points[cp.index];
    return {
      index: cp.index,
      matrixId: at?.matrixId ?? '',
      at: at?.at ?? '',
      before,
      after,
      ratio: before === 0 ? Number.NaN : after / before,
      ratioLow: ci?.low ?? null,
      ratioHigh: ci?.high ?? null,
      magnitude: changeMagnitude(cp.test),
      p: cp.test.p,
      suspect: around.some((p) => p.flagged > 0),
      why,
    };
  });
}
