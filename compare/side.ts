/**
 * One side of a comparison: a result set read run by run (streamed, so a side of a million runs
 * costs memory per cell, not per run) into values per machine and cell, with which parameters
 * vary inside it.
 */
import type { CellParams } from '../contract/matrix.js';
import { WORKLOADS, type WorkloadName } from '../contract/workloads/index.js';
import type { AggregatableRun } from '../stats/aggregate.js';
import type { DifferingParam, SetInfo } from './compare.js';

export interface CellValues {
  readonly workload: WorkloadName;
  readonly machine: string;
  readonly params: Readonly<CellParams>;
  ok: number;
  notOk: number;
  problem: string | null;
  readonly values: Map<string, number[]>;
}

export interface ParamState {
  value: string;
  varying: boolean;
}

/** Everything compare needs of one set: values per (machine, cell), and which parameters vary. */
export class CompareSide {
  readonly cells = new Map<string, CellValues>();
  readonly machines = new Set<string>();
  readonly matrices = new Set<string>();
  /** Per workload, per parameter: its value if constant across this side, else varying. */
  readonly params = new Map<WorkloadName, Map<string, ParamState>>();
  runs = 0;
  okRuns = 0;
  /** Runs of one cell arrive together and share their params object: key them once. */
  private lastParams: Readonly<CellParams> | null = null;
  private lastMachine = '';
  private lastKey = '';

  constructor(
    readonly name: string,
    private readonly metrics: readonly string[] | undefined,
    private readonly machine: string | undefined,
  ) {}

  add(run: AggregatableRun): void {
    if (this.machine !== undefined && run.fingerprint.machine !== this.machine) return;
    this.runs++;
    this.machines.add(run.fingerprint.machine);
    this.matrices.add(run.matrix);
    let key: string;
    if (run.params === this.lastParams && run.fingerprint.machine === this.lastMachine) {
      key = this.lastKey;
    } else {
      this.noteParams(run.workload, run.params);
      key = `${run.fingerprint.machine}\u0000${run.workload}\u0000${canonical(run.params)}`;
      this.lastParams = run.params;
      this.lastMachine = run.fingerprint.machine;
      this.lastKey = key;
    }
    let cell = this.cells.get(key);
    if (!cell) {
      cell = { workload: run.workload, machine: run.fingerprint.machine, params: run.params, ok: 0, notOk: 0, problem: null, values: new Map() };
      this.cells.set(key, cell);
    }
    if (run.state !== 'ok') {
      cell.notOk++;
      cell.problem ??= run.error ? `${run.error.code}: ${run.error.message}` : `skipped: ${run.reason ?? ''}`;
      return;
    }
    this.okRuns++;
    cell.ok++;
    const m = run.metrics ?? {};
    for (const name of this.metrics ?? WORKLOADS[run.workload].headline) {
      const v = m[name];
      if (typeof v !== 'number' || !Number.isFinite(v)) continue;
      const list = cell.values.get(name);
      if (list) list.push(v);
      else cell.values.set(name, [v]);
    }
  }

  private noteParams(workload: WorkloadName, params: Readonly<CellParams>): void {
    let states = this.params.get(workload);
    const fresh = !states;
    if (!states) this.params.set(workload, (states = new Map<string, ParamState>()));
    for (const [k, v] of Object.entries(params)) {
      const s = states.get(k);
      const text = String(v);
      if (!s) {
        // A parameter missing from earlier runs of this workload varies (present vs absent).
        states.set(k, { value: text, varying: !fresh });
      } else if (!s.varying && s.value !== text) {
        s.varying = true;
      }
    }
    for (const [k, s] of states) if (!(k in params)) s.varying = true;
  }

  info(): SetInfo {
    return { name: this.name, runs: this.runs, okRuns: this.okRuns, machines: [...this.machines].sort(), matrices: [...this.matrices].sort() };
  }
}

export function canonical(params: Readonly<CellParams>, skip: ReadonlySet<string> = new Set()): string {
  return JSON.stringify(
    Object.keys(params)
      .filter((k) => !skip.has(k))
      .sort()
      .map((k) => [k, params[k]]),
  );
}

/** Parameters left out of the match, per workload: constant on both sides with different values, or on one side only. */
export function differingParams(a: CompareSide, b: CompareSide): DifferingParam[] {
  const out: DifferingParam[] = [];
  for (const [workload, pa] of a.params) {
    const pb = b.params.get(workload);
    if (!pb) continue;
    for (const name of new Set([...pa.keys(), ...pb.keys()])) {
      const sa = pa.get(name);
      const sb = pb.get(name);
      if (sa && sb) {
        if (!sa.varying && !sb.varying && sa.value !== sb.value) out.push({ workload, param: name, baseline: sa.value, candidate: sb.value });
      } else if (sa && !sa.varying) {
        out.push({ workload, param: name, baseline: sa.value, candidate: null });
      } else if (sb && !sb.varying) {
        out.push({ workload, param: name, baseline: null, candidate: sb.value });
      }
    }
  }
  return out;
}

