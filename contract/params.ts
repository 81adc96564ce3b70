/**
 * Parameter specifications: the one place where each matrix parameter's type, range, default
 * and documentation live. Validation messages, docs/reference.md's parameter tables
 * (`fsbench params --md`) and the coordinator's checks are all derived from these.
 */
import { z } from 'zod';
import { formatDuration, formatSize, parseDuration, parseSize } from './units.js';

/** A parameter's canonical value inside a cell: bytes, milliseconds, integers, enum strings. */
export type ParamValue = number | string | boolean;

interface BaseSpec {
  /** One sentence for users: what it changes and why they would sweep it. */
  readonly doc: string;
  /** Extra rule beyond the range, returning why a value is refused. */
  readonly check?: (value: ParamValue) => string | undefined;
}

export interface NumberSpec extends BaseSpec {
  readonly kind: 'integer' | 'size' | 'duration';
  readonly default: number | string;
  readonly min: number;
  readonly max: number;
  /** Words accepted besides numbers, e.g. `system` for "leave the kernel's value alone". */
  readonly keywords?: readonly string[];
  /** Why values below `min` are refused, when there is a better reason than "the range". */
  readonly minReason?: string;
}

export interface EnumSpec extends BaseSpec {
  readonly kind: 'enum';
  readonly default: string;
  readonly values: readonly string[];
}

export interface BooleanSpec extends BaseSpec {
  readonly kind: 'boolean';
  readonly default: boolean;
}

export interface TextSpec extends BaseSpec {
  readonly kind: 'text';
  readonly default: string;
  /** What a valid value looks like, for messages and docs. */
  readonly allowed: string;
  readonly maxLength: number;
}

export interface ListSpec extends BaseSpec {
  /** A list of words, each one of `values`; a cell holds it as a comma-joined string. */
  readonly kind: 'list';
  readonly default: string;
  readonly values: readonly string[];
}

export type ParamSpec = NumberSpec | EnumSpec | BooleanSpec | TextSpec | ListSpec;
export type ParamSpecs = Readonly<Record<string, ParamSpec>>;

export type ParamParse = { ok: true; value: ParamValue } | { ok: false; reason: string };

function formatNumber(spec: NumberSpec, n: number): string {
  if (spec.kind === 'size') return formatSize(n);
  if (spec.kind === 'duration') return formatDuration(n);
  return String(n);
}

/** Human description of what a parameter accepts, used in errors and docs. */
export function describeAllowed(spec: ParamSpec): string {
  switch (spec.kind) {
    case 'integer':
    case 'size':
    case 'duration': {
      const what = spec.kind === 'integer' ? 'an integer' : spec.kind === 'size' ? 'a size' : 'a duration';
      const range = `${what} from ${formatNumber(spec, spec.min)} to ${formatNumber(spec, spec.max)}`;
      const words = spec.keywords?.map((k) => `'${k}'`).join(' or ');
      return words ? `${range}, or ${words}` : range;
    }
    case 'enum':
      return `one of ${spec.values.join(', ')}`;
    case 'boolean':
      return 'true or false';
    case 'text':
      return spec.allowed;
    case 'list':
      return `a list of ${spec.values.join(', ')} (or 'none')`;
  }
}

/** How a value is shown back to users: sizes and durations in their units. */
export function formatParam(spec: ParamSpec | undefined, value: ParamValue): string {
  if (spec && typeof value === 'number' && (spec.kind === 'size' || spec.kind === 'duration' || spec.kind === 'integer')) {
    return formatNumber(spec, value);
  }
  return String(value);
}

function parseNumber(spec: NumberSpec, raw: unknown): ParamParse {
  if (typeof raw === 'string' && spec.keywords?.includes(raw)) return { ok: true, value: raw };
  let value: number;
  if (spec.kind === 'integer') {
    if (typeof raw !== 'number' || !Number.isInteger(raw)) return { ok: false, reason: 'is not an integer' };
    value = raw;
  } else {
    const r = spec.kind === 'size' ? parseSize(raw) : parseDuration(raw);
    if (!r.ok) return r;
    value = r.value;
  }
  if (value < spec.min) {
    return { ok: false, reason: spec.minReason ?? `is below the minimum ${formatNumber(spec, spec.min)}` };
  }
  if (value > spec.max) return { ok: false, reason: `is above the maximum ${formatNumber(spec, spec.max)}` };
  return { ok: true, value };
}

function parseRaw(spec: ParamSpec, raw: unknown): ParamParse {
  switch (spec.kind) {
    case 'integer':
    case 'size':
    case 'duration':
      return parseNumber(spec, raw);
    case 'enum':
      return typeof raw === 'string' && spec.values.includes(raw)
        ? { ok: true, value: raw }
        : { ok: false, reason: 'is not an allowed value' };
    case 'boolean':
      return typeof raw === 'boolean' ? { ok: true, value: raw } : { ok: false, reason: 'is not true or false' };
    case 'text':
      if (typeof raw !== 'string' || raw.length === 0) return { ok: false, reason: 'is not a non-empty string' };
      if (raw.length > spec.maxLength) return { ok: false, reason: `is longer than ${spec.maxLength} characters` };
      return { ok: true, value: raw };
    case 'list': {
      const items = Array.isArray(raw) ? raw : typeof raw === 'string' ? raw.split(',') : undefined;
      if (!items) return { ok: false, reason: 'is not a list of words' };
      const words = items.map((w) => (typeof w === 'string' ? w.trim() : '')).filter((w) => w !== '' && w !== 'none');
      const bad = words.find((w) => !spec.values.includes(w));
      if (bad !== undefined) return { ok: false, reason: `contains '${bad}', which is not allowed` };
      return { ok: true, value: [...new Set(words)].join(',') };
    }
  }
}

/** Parses one raw value (from YAML, JSON or a CLI flag) into its canonical cell value. */
export function parseParam(spec: ParamSpec, raw: unknown): ParamParse {
  const r = parseRaw(spec, raw);
  if (!r.ok) return r;
  const extra = spec.check?.(r.value);
  return extra === undefined ? r : { ok: false, reason: extra };
}

/** A spec's default in canonical form; specs are written so that their defaults parse. */
export function defaultValue(spec: ParamSpec): ParamValue {
  const r = parseRaw(spec, spec.default);
  if (!r.ok) throw new Error(`parameter default ${JSON.stringify(spec.default)} ${r.reason}`);
  return r.value;
}

/**
 * The check of a text parameter that names a directory: `keyword`, or an absolute path in its
 * normal form. `..` and `.` segments, empty segments, a trailing slash and control characters
 * are refused when the matrix is submitted, not discovered by an agent: a path means what it
 * says, and nothing reaches a host's filesystem by a detour.
 */
export function directoryOr(keyword: string): (value: ParamValue) => string | undefined {
  return (v) => {
    if (v === keyword) return undefined;
    if (typeof v !== 'string' || !v.startsWith('/')) return `must be '${keyword}' or an absolute directory path`;
    if (/\p{Cc}/u.test(v)) return 'must not hold control characters';
    const segments = v.split('/').slice(1);
    if (v !== '/' && segments.some((s) => s === '' || s === '.' || s === '..')) {
      return "must be a normalised absolute path: no '..' or '.' segments, no '//' and no trailing '/'";
    }
    return undefined;
  };
}

/**
 * The type of one parameter's canonical value, read off its spec's literal type: an enum's
 * values, a number (or one of its keywords), a boolean, or a string (text, and a list as its
 * comma-joined words).
 */
export type ValueOf<S extends ParamSpec> = S extends { readonly kind: 'enum'; readonly values: readonly (infer V extends string)[] }
  ? V
  : S extends { readonly kind: 'boolean' }
    ? boolean
    : S extends { readonly kind: 'text' | 'list' }
      ? string
      : S extends { readonly keywords: readonly (infer K extends string)[] }
        ? number | K
        : number;

/** A cell's parameters as a workload's code reads them, typed from the specs that declare them. */
export type ParamsOf<S extends ParamSpecs> = { readonly [K in keyof S]: ValueOf<S[K]> };

function valueSchema(spec: ParamSpec): z.ZodType<ParamValue> {
  let type: z.ZodType<ParamValue>;
  switch (spec.kind) {
    case 'integer':
    case 'size':
    case 'duration':
      type = spec.keywords && spec.keywords.length > 0 ? z.union([z.number(), z.enum(spec.keywords)]) : z.number();
      break;
    case 'enum':
      type = z.enum(spec.values);
      break;
    case 'boolean':
      type = z.boolean();
      break;
    case 'text':
    case 'list':
      type = z.string();
      break;
  }
  // The range, the allowed words and the spec's own check, said as a matrix's error says them.
  return type
    .superRefine((value, ctx) => {
      const r = parseParam(spec, value);
      if (!r.ok) ctx.addIssue({ code: 'custom', message: `${JSON.stringify(value)} ${r.reason}` });
    })
    .default(defaultValue(spec));
}

/**
 * The zod schema of a workload's parameters, derived from their specs (the one declaration):
 * a cell's values checked against each spec, absent ones at their default, names the specs do
 * not declare (another part's, such as `container.*`) left out. A workload parses the cells it
 * is handed (job data from Redis, a sandbox's argv) with it and reads typed values.
 */
export function paramsSchema<const S extends ParamSpecs>(specs: S): z.ZodType<ParamsOf<S>> {
  const shape: Record<string, z.ZodType<ParamValue>> = {};
  for (const [name, spec] of Object.entries(specs)) shape[name] = valueSchema(spec);
  // zod cannot infer a type from a shape built at run time; each entry above checks exactly
  // what ValueOf says of its spec, so the object's output is ParamsOf<S>.
  return z.object(shape) as unknown as z.ZodType<ParamsOf<S>>;
}

/** A number parameter of a cell, 0 when absent or not a number (a keyword such as `system`): for rough sums such as estimates. */
export function numberParam(params: Readonly<Record<string, ParamValue>>, name: string): number {
  const v = Object.hasOwn(params, name) ? params[name] : undefined;
  return typeof v === 'number' ? v : 0;
}
