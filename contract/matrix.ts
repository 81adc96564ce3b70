/**
 * Matrices and cells. A matrix is a workload plus lists of parameter values; its expansion is a
 * pure function (cartesian product, minus `exclude`, plus `include`) whose size is checked before
 * a single cell is built, so a typo cannot enqueue a million runs.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { FsbenchError } from './errors.js';
import { Label } from './fingerprint.js';
import { defaultValue, describeAllowed, formatParam, parseParam, type ParamValue } from './params.js';
import { AdaptiveRepetitions, RunOrder, Seed } from './schedule.js';
import { metricDoc, paramSpec, WORKLOAD_NAMES, WORKLOADS, type WorkloadName } from './workloads/index.js';

/** Most cells one matrix may expand to. */
export const MAX_CELLS = 10_000;
/** Most runs (cells x (warmup + repetitions)) one matrix may ask for. */
export const MAX_RUNS = 100_000;
/** Most measured runs of one cell (a fixed `repetitions`, or `maxRepetitions`). */
export const MAX_REPETITIONS = 1000;
/** What `repetitions: auto` does unless told otherwise. */
export const ADAPTIVE_DEFAULTS = { min: 6, max: 30, target: 0.02 } as const;

/**
 * What a parameter's name can be (`bufferBytes`, `container.storage`). Checked before any lookup,
 * so `__proto__` is refused rather than silently dropped (or worse, made a prototype).
 */
export const ParamName = z
  .string()
  .max(64)
  .regex(/^[a-z][A-Za-z0-9]*(?:\.[a-z][A-Za-z0-9]*)*$/, 'is not a parameter name (letters and digits, dot-separated)');

const RawValue = z.union([z.number(), z.string().max(4096), z.boolean(), z.array(z.string().max(256)).max(64)]);
const RawAssignment = z.record(ParamName, RawValue);

export const Placement = z.union([
  z.literal('any'),
  z.literal('all'),
  z.object({ labels: z.array(Label).min(1).max(32) }).strict(),
]);
export type Placement = z.infer<typeof Placement>;

/** A share, written `2%` or 0.02: above 0, below 1. */
const Share = z.union([
  z.number().gt(0).lt(1),
  z
    .string()
    .regex(/^\d{1,2}(\.\d{1,4})?%$/, 'must be a percentage below 100%, like 2%')
    .transform((t) => Number(t.slice(0, -1)) / 100)
    .pipe(z.number().gt(0).lt(1)),
]);

/**
 * Facts about a matrix's run that fsbench cannot see for itself: the commit under test, a kernel
 * build, a ticket. History marks where they change between points; `--annotate k=v` on `run`,
 * `submit` and `upload` adds to those a matrix file gives.
 */
const AnnotationName = z.string().regex(/^[a-z][A-Za-z0-9_.-]{0,63}$/, 'is not an annotation name (a lowercase letter, then letters, digits, . _ -; at most 64)');
export const Annotations = z
  .record(AnnotationName, z.string().max(256))
  .refine((a) => Object.keys(a).length <= 32, 'at most 32 annotations');
export type Annotations = z.infer<typeof Annotations>;

/** `--annotate` pairs (`commit=4f2a9c1`) over a matrix's own annotations, checked as the matrix's are. */
export function annotationsWith(base: Annotations | undefined, pairs: readonly string[]): Annotations | undefined {
  if (pairs.length === 0) return base;
  const out: Record<string, string> = { ...base };
  for (const pair of pairs) {
    const eq = pair.indexOf('=');
    const name = pair.slice(0, eq).trim();
    // Checked before it is used as a key: `__proto__` would otherwise vanish instead of being refused.
    if (eq <= 0 || !AnnotationName.safeParse(name).success) throw new FsbenchError('CONFIG_INVALID', `--annotate ${pair} is not NAME=VALUE with a name like commit (a lowercase letter, then letters, digits, . _ -)`);
    out[name] = pair.slice(eq + 1).trim();
  }
  const r = Annotations.safeParse(out);
  if (!r.success) {
    const issue = r.error.issues[0];
    throw new FsbenchError('CONFIG_INVALID', `--annotate: ${issue?.path.map(String).join('.') ?? ''} ${issue?.message ?? 'invalid'}`.replace(/\s+/g, ' '));
  }
  return r.data;
}

export const Matrix = z
  .object({
    name: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/, 'must be 1-100 letters, digits, dots, dashes or underscores'),
    description: z.string().max(4000).optional(),
    /** Free-form facts about this run of the matrix (`commit: 4f2a9c1`), shown and marked where they change in history. */
    annotations: Annotations.optional(),
    workload: z.enum(WORKLOAD_NAMES),
    /**
     * Measured runs per cell, or `auto`: each cell runs until the 95% CI of its median is within
     * `targetPrecision` of the median, between `minRepetitions` and `maxRepetitions` runs.
     */
    repetitions: z.union([z.number().int().min(1).max(MAX_REPETITIONS), z.literal('auto')]).default(5),
    /** With `repetitions: auto`: runs before the precision is judged (6: a 95% CI of the median needs 6). */
    minRepetitions: z.number().int().min(2).max(MAX_REPETITIONS).optional(),
    /** With `repetitions: auto`: the most runs of a cell (30). */
    maxRepetitions: z.number().int().min(2).max(MAX_REPETITIONS).optional(),
    /** With `repetitions: auto`: the wanted half-width of the median's 95% CI, relative to it (`2%` or 0.02). */
    targetPrecision: Share.optional(),
    /**
     * With `repetitions: auto`: also run each cell until a comparison of two such sets of runs
     * (as `fsbench gate` makes) would detect a change this large with 80% power (`5%` or 0.05).
     */
    targetDetectable: Share.optional(),
    /** With `repetitions: auto`: the metric whose median must be that precise (the workload's first headline metric). */
    precisionMetric: z.string().max(64).optional(),
    /** In which order the runs are made (see contract/schedule.ts). */
    order: RunOrder.default('interleaved'),
    /** With `order: shuffled`: the seed of the shuffle (drawn at random and recorded when absent). */
    seed: Seed.optional(),
    /** Runs per cell made and thrown away before the measured ones (cold caches, JIT, page faults). */
    warmup: z.number().int().min(0).max(100).default(1),
    /** Parameter name -> list of values (a single value counts as a list of one). */
    params: z.record(ParamName, z.union([RawValue, z.array(RawValue).min(1).max(1000)])).default({}),
    /** Extra cells: each entry sets some parameters; the rest take their first listed value, else the default. */
    include: z.array(RawAssignment).max(1000).default([]),
    /** Cells to drop: a cell matching every key of an entry is removed. */
    exclude: z.array(RawAssignment).max(1000).default([]),
    /** Where the runs go when a coordinator dispatches them. */
    placement: Placement.default('any'),
  })
  .strict();
export type Matrix = z.infer<typeof Matrix>;
export type MatrixInput = z.input<typeof Matrix>;

export const CellParams = z.record(ParamName, z.union([z.number(), z.string().max(4096), z.boolean()]));
export type CellParams = z.infer<typeof CellParams>;

/** A deterministic id: the same workload and values give the same id on every machine. */
export function cellId(workload: WorkloadName, params: Readonly<CellParams>): string {
  const canonical = JSON.stringify([workload, Object.keys(params).sort().map((k) => [k, params[k]])]);
  return createHash('sha256').update(canonical).digest('hex').slice(0, 12);
}

export const Cell = z
  .object({
    id: z.string().regex(/^[0-9a-f]{12}$/),
    workload: z.enum(WORKLOAD_NAMES),
    params: CellParams,
  })
  .strict()
  .superRefine((cell, ctx) => {
    const specs = WORKLOADS[cell.workload].params;
    for (const [name, spec] of Object.entries(specs)) {
      const value = cell.params[name];
      const r = value === undefined ? { ok: false as const, reason: 'is missing' } : parseParam(spec, value);
      if (!r.ok) ctx.addIssue({ code: 'custom', path: ['params', name], message: `${name} ${r.reason}` });
    }
    for (const name of Object.keys(cell.params)) {
      if (!paramSpec(cell.workload, name)) ctx.addIssue({ code: 'custom', path: ['params', name], message: `unknown parameter ${name}` });
    }
    if (cell.id !== cellId(cell.workload, cell.params)) {
      ctx.addIssue({ code: 'custom', path: ['id'], message: 'does not match the workload and parameters' });
    }
  });
export type Cell = z.infer<typeof Cell>;

type Issue = { path: string; message: string };

/** Parses every value of one parameter list, collecting a message per bad value. */
function parseValues(workload: WorkloadName, name: string, raws: readonly unknown[], path: string, issues: Issue[]): ParamValue[] {
  const spec = paramSpec(workload, name);
  if (!spec) {
    issues.push({
      path,
      message: `unknown parameter '${name}' for workload ${workload} (known: ${Object.keys(WORKLOADS[workload].params).join(', ')})`,
    });
    return [];
  }
  const values: ParamValue[] = [];
  raws.forEach((raw, i) => {
    const r = parseParam(spec, raw);
    const at = raws.length > 1 || path.startsWith('params') ? `${path}[${i}]` : path;
    if (r.ok) {
      if (!values.includes(r.value)) values.push(r.value);
    } else {
      issues.push({ path: at, message: `${name} = ${JSON.stringify(raw)} ${r.reason} (allowed: ${describeAllowed(spec)})` });
    }
  });
  return values;
}

function parseAssignments(workload: WorkloadName, entries: readonly Record<string, unknown>[], key: string, issues: Issue[]) {
  return entries.map((entry, i) => {
    const out: Record<string, ParamValue> = {};
    for (const [name, raw] of Object.entries(entry)) {
      const [value] = parseValues(workload, name, [raw], `${key}[${i}].${name}`, issues);
      if (value !== undefined) out[name] = value;
    }
    return out;
  });
}

function matches(params: Readonly<CellParams>, partial: Readonly<Record<string, ParamValue>>): boolean {
  return Object.entries(partial).every(([k, v]) => Object.hasOwn(params, k) && params[k] === v);
}

function throwIfIssues(issues: readonly Issue[]): void {
  if (issues.length === 0) return;
  const lines = issues.map((i) => `${i.path}: ${i.message}`);
  throw new FsbenchError('MATRIX_INVALID', `invalid matrix:\n  ${lines.join('\n  ')}`, issues);
}

/**
 * `__proto__` keys, which zod drops from a record without a word (so that they never become a
 * prototype): a matrix that names one is told so rather than run without it.
 */
function protoKeys(input: unknown): Issue[] {
  const field = (o: unknown, key: string): unknown => (typeof o === 'object' && o !== null && Object.hasOwn(o, key) ? Reflect.get(o, key) : undefined);
  const at = (value: unknown, path: string): Issue[] =>
    typeof value === 'object' && value !== null && Object.hasOwn(value, '__proto__') ? [{ path: `${path}.__proto__`, message: 'is not a parameter name' }] : [];
  const lists = (key: string): Issue[] => {
    const list = field(input, key);
    return Array.isArray(list) ? list.flatMap((e: unknown, i) => at(e, `${key}[${i}]`)) : [];
  };
  return [...at(field(input, 'params'), 'params'), ...lists('include'), ...lists('exclude')];
}

/** Validates raw input (parsed YAML/JSON) as a matrix, with one message per bad field. */
export function parseMatrix(input: unknown): Matrix {
  throwIfIssues(protoKeys(input));
  const r = Matrix.safeParse(input);
  if (!r.success) {
    throwIfIssues(r.error.issues.map((i) => ({ path: i.path.join('.') || '(matrix)', message: i.message })));
  }
  const matrix = r.data as Matrix;
  throwIfIssues(scheduleIssues(matrix));
  return matrix;
}

/** Fields that mean something only beside another one, and must agree with it. */
function scheduleIssues(m: Matrix): Issue[] {
  const issues: Issue[] = [];
  if (m.repetitions !== 'auto') {
    for (const key of ['minRepetitions', 'maxRepetitions', 'targetPrecision', 'targetDetectable', 'precisionMetric'] as const) {
      if (m[key] !== undefined) issues.push({ path: key, message: `applies only with repetitions: auto (repetitions is ${m.repetitions})` });
    }
  } else {
    const a = adaptiveDefaults(m);
    if (a.min > a.max) issues.push({ path: 'minRepetitions', message: `${a.min} is more than maxRepetitions (${a.max})` });
    if (m.precisionMetric !== undefined && metricDoc(m.workload, m.precisionMetric) === undefined) {
      issues.push({ path: 'precisionMetric', message: `${m.precisionMetric} is not a metric of workload ${m.workload} (fsbench params ${m.workload} lists them)` });
    }
  }
  if (m.seed !== undefined && m.order !== 'shuffled') issues.push({ path: 'seed', message: `applies only with order: shuffled (order is ${m.order})` });
  return issues;
}

function adaptiveDefaults(m: Matrix): AdaptiveRepetitions {
  return {
    min: m.minRepetitions ?? Math.min(ADAPTIVE_DEFAULTS.min, m.maxRepetitions ?? ADAPTIVE_DEFAULTS.max),
    max: m.maxRepetitions ?? Math.max(ADAPTIVE_DEFAULTS.max, m.minRepetitions ?? 0),
    target: m.targetPrecision ?? ADAPTIVE_DEFAULTS.target,
    ...(m.targetDetectable === undefined ? {} : { detectable: m.targetDetectable }),
    metric: m.precisionMetric ?? WORKLOADS[m.workload].headline[0] ?? 'elapsedMs',
  };
}

/** What `repetitions: auto` means for this matrix, with the defaults filled in; null for a fixed count. */
export function adaptiveRepetitions(m: Matrix): AdaptiveRepetitions | null {
  return m.repetitions === 'auto' ? adaptiveDefaults(m) : null;
}

/** The most measured runs a cell of this matrix can get. */
export function maxRepetitions(m: Matrix): number {
  return m.repetitions === 'auto' ? adaptiveDefaults(m).max : m.repetitions;
}

/** The measured runs every cell gets before any is judged: all of them, unless `auto`. */
export function initialRepetitions(m: Matrix): number {
  return m.repetitions === 'auto' ? adaptiveDefaults(m).min : m.repetitions;
}

/**
 * Expands a matrix into its cells: the cartesian product of the listed values (the first
 * parameter varies slowest), every other parameter at its default; minus the cells that match
 * an `exclude` entry; plus one cell per `include` entry not already present. Throws
 * MATRIX_INVALID naming each bad value, or MATRIX_TOO_LARGE before building anything.
 */
export function expandMatrix(matrix: Matrix): Cell[] {
  const { workload } = matrix;
  const specs = WORKLOADS[workload].params;
  const issues: Issue[] = [];
  // A list is always a list of values; a list-kind value is a comma-joined string or a nested list.
  const axes = Object.entries(matrix.params).map(([name, raw]) => {
    const raws: readonly unknown[] = Array.isArray(raw) ? raw : [raw];
    return { name, values: parseValues(workload, name, raws, `params.${name}`, issues) };
  });
  const include = parseAssignments(workload, matrix.include, 'include', issues);
  const exclude = parseAssignments(workload, matrix.exclude, 'exclude', issues);
  throwIfIssues(issues);

  const product = axes.reduce((n, a) => n * a.values.length, 1);
  const total = product + include.length;
  if (total > MAX_CELLS) {
    const shape = axes.map((a) => `${a.values.length} ${a.name}`).join(' x ');
    throw new FsbenchError(
      'MATRIX_TOO_LARGE',
      `the matrix expands to ${total} cells (${shape}), more than the limit of ${MAX_CELLS}: list fewer values or split it`,
    );
  }
  const perCell = maxRepetitions(matrix) + matrix.warmup;
  const runs = total * perCell;
  if (runs > MAX_RUNS) {
    throw new FsbenchError(
      'MATRIX_TOO_LARGE',
      `the matrix asks for ${matrix.repetitions === 'auto' ? 'up to ' : ''}${runs} runs (${total} cells x ${perCell} runs each), more than the limit of ${MAX_RUNS}`,
    );
  }

  const base: CellParams = {};
  for (const [name, spec] of Object.entries(specs)) base[name] = defaultValue(spec);
  const firstListed: CellParams = { ...base };
  for (const a of axes) if (a.values[0] !== undefined) firstListed[a.name] = a.values[0];

  let combos: CellParams[] = [{ ...base }];
  for (const axis of axes) {
    combos = combos.flatMap((c) => axis.values.map((v) => ({ ...c, [axis.name]: v })));
  }
  combos = combos.filter((c) => !exclude.some((e) => matches(c, e)));
  combos.push(...include.map((inc) => ({ ...firstListed, ...inc })));

  const cells: Cell[] = [];
  const seen = new Set<string>();
  for (const params of combos) {
    const id = cellId(workload, params);
    if (seen.has(id)) continue;
    seen.add(id);
    cells.push({ id, workload, params });
  }
  return cells;
}

/**
 * `bufferBytes=8MiB writers=128`: the parameters that vary across a matrix, in their units; for
 * a single cell, the ones that differ from their defaults.
 */
export function describeCell(cell: Cell, varying: readonly string[]): string {
  const specs = WORKLOADS[cell.workload].params;
  const names =
    varying.length > 0
      ? varying
      : Object.entries(specs).filter(([n, spec]) => cell.params[n] !== defaultValue(spec)).map(([n]) => n);
  if (names.length === 0) return '(defaults)';
  // An empty list (no mount options) reads as `none`, as the parameter tables spell it.
  return names.map((n) => `${n}=${formatParam(specs[n], cell.params[n] ?? '') || 'none'}`).join(' ');
}

/** Names of the parameters whose value differs between cells. */
export function varyingParams(cells: readonly Cell[]): string[] {
  const first = cells[0];
  if (!first) return [];
  return Object.keys(first.params).filter((k) => cells.some((c) => c.params[k] !== first.params[k]));
}
