/**
 * Which parameters a comparison leaves out of the match: those constant on each side with
 * different values (what is being compared), and those only one side has (results from an
 * older fsbench). Read from the two reports' cells, one entry per cell rather than per run.
 */
import type { CellParams } from '../contract/matrix.js';
import type { WorkloadName } from '../contract/workloads/index.js';
import type { CellReport } from '../report/model.js';

export interface DifferingParam {
  readonly workload: WorkloadName;
  readonly param: string;
  /** The value on each side; null where that side does not have the parameter. */
  readonly baseline: string | null;
  readonly candidate: string | null;
}

/** What is read of a side's cell here. */
type SideCell = Pick<CellReport, 'workload' | 'params'>;

interface ParamState {
  readonly value: string;
  readonly varying: boolean;
}

/**
 * Per workload, per parameter: its value if constant across the side's cells, else varying. One
 * pass over the cells: 10,000 of them with a dozen parameters each, once per side.
 */
function paramStates(cells: readonly SideCell[]): Map<WorkloadName, Map<string, ParamState>> {
  const out = new Map<WorkloadName, Map<string, ParamState>>();
  const seen = new Map<WorkloadName, { cells: number; first: SideCell; params: Map<string, { value: string; raw: unknown; cells: number; varying: boolean }> }>();
  for (const c of cells) {
    let w = seen.get(c.workload);
    if (!w) seen.set(c.workload, (w = { cells: 0, first: c, params: new Map() }));
    w.cells++;
    for (const name of Object.keys(c.params)) {
      const raw = c.params[name];
      const p = w.params.get(name);
      if (!p) {
        w.params.set(name, { value: String(raw), raw, cells: 1, varying: w.cells > 1 });
        continue;
      }
      p.cells++;
      // Values compare as their text (1 and '1' are the same value); equal values have equal text.
      if (!p.varying && raw !== p.raw && String(raw) !== p.value) p.varying = true;
    }
  }
  for (const [workload, w] of seen) {
    const states = new Map<string, ParamState>();
    for (const [name, p] of w.params) {
      // A parameter missing from some cells varies (present against absent); its value is then the first cell's.
      const varying = p.varying || p.cells < w.cells;
      states.set(name, { value: Object.hasOwn(w.first.params, name) ? p.value : '\u0000absent', varying });
    }
    out.set(workload, states);
  }
  return out;
}

export function differingParams(a: readonly SideCell[], b: readonly SideCell[]): DifferingParam[] {
  const out: DifferingParam[] = [];
  const sb = paramStates(b);
  for (const [workload, pa] of paramStates(a)) {
    const pb = sb.get(workload);
    if (!pb) continue;
    for (const name of new Set([...pa.keys(), ...pb.keys()])) {
      const x = pa.get(name);
      const y = pb.get(name);
      if (x && y) {
        if (!x.varying && !y.varying && x.value !== y.value) out.push({ workload, param: name, baseline: x.value, candidate: y.value });
      } else if (x && !x.varying) {
        out.push({ workload, param: name, baseline: x.value, candidate: null });
      } else if (y && !y.varying) {
        out.push({ workload, param: name, baseline: null, candidate: y.value });
      }
    }
  }
  return out;
}

/** A cell's parameters as a matching key, without the ones left out of the match. */
export function canonical(params: Readonly<CellParams>, skip: ReadonlySet<string> = new Set()): string {
  return JSON.stringify(
    Object.keys(params)
      .filter((k) => !skip.has(k))
      .sort()
      .map((k) => [k, params[k]]),
  );
}

/**
 * canonical() for many cells with the same parameters left out, to the character: the kept
 * names are sorted and written out once per set of names (one or two per matrix), and each
 * cell's text is put together from them and its values. That took half the time of
 * JSON.stringify of the pairs, for 20,000 cells of 20 parameters each. The names join on NUL,
 * which no parameter name holds (ParamName).
 */
export function canonicalizer(skip: ReadonlySet<string> = new Set()): (params: Readonly<CellParams>) => string {
  const shapes = new Map<string, { readonly names: readonly string[]; readonly heads: readonly string[] }>();
  return (params) => {
    const all = Object.keys(params);
    const shape = all.join('\u0000');
    let kept = shapes.get(shape);
    if (kept === undefined) {
      const names = all.filter((k) => !skip.has(k)).sort();
      kept = { names, heads: names.map((k) => `[${JSON.stringify(k)},`) };
      shapes.set(shape, kept);
    }
    let text = '[';
    for (let i = 0; i < kept.names.length; i++) {
      // A parameter's value is a number, string or boolean: JSON has a text for each.
      text += `${i === 0 ? '' : ','}${kept.heads[i] ?? ''}${JSON.stringify(params[kept.names[i] ?? ''])}]`;
    }
    return `${text}]`;
  };
}
