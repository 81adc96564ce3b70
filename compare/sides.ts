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

interface ParamState {
  readonly value: string;
  readonly varying: boolean;
}

/** Per workload, per parameter: its value if constant across the side's cells, else varying. */
function paramStates(cells: readonly CellReport[]): Map<WorkloadName, Map<string, ParamState>> {
  const out = new Map<WorkloadName, Map<string, ParamState>>();
  for (const w of new Set(cells.map((c) => c.workload))) {
    const mine = cells.filter((c) => c.workload === w);
    const names = new Set(mine.flatMap((c) => Object.keys(c.params)));
    const states = new Map<string, ParamState>();
    for (const name of names) {
      const values = new Set(mine.map((c) => (Object.hasOwn(c.params, name) ? String(c.params[name]) : '\u0000absent')));
      const [only] = values;
      // A parameter missing from some cells varies (present against absent).
      states.set(name, { value: only ?? '', varying: values.size > 1 });
    }
    out.set(w, states);
  }
  return out;
}

export function differingParams(a: readonly CellReport[], b: readonly CellReport[]): DifferingParam[] {
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
