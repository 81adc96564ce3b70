/**
 * Matching a watcher's events to the operations that were made (docs/semantics.md): pure, so it
 * is tested with event lists written by hand. Each operation says which paths it made or changed
 * (each of them must be reported, with a kind it accepts) and which other path it touched (an old
 * name, a temporary file, a link's target), where some kinds are the other half of the change and
 * neither right nor wrong. An event belongs to the latest operation on its path that had started
 * when the event was read, within that operation's settle window.
 */
import type { ChangeKind, WatchEvent } from '../../contract/workloads/semantics/events.js';
import type { OperationKind } from '../../contract/workloads/semantics/index.js';

/** One change the script made, as its own log says: the ground truth. */
export interface Truth {
  /** The operation's place in the script. */
  readonly index: number;
  readonly kind: OperationKind;
  /** `after`: the append to a file some time after its atomic replace, which a deaf watch misses. */
  readonly step: 'op' | 'after';
  /** What the operation made or changed, in order, each with when its syscall returned (CLOCK_MONOTONIC ns). */
  readonly paths: readonly { readonly path: string; readonly atNs: bigint }[];
  /** The other path it touched: a rename's old name, the temporary file of an atomic replace, a hard link's target. */
  readonly source?: string;
  /** When its first syscall began: no event of it can be read earlier. */
  readonly beforeNs: bigint;
}

/** The kinds that report each operation on the paths it made or changed. */
const ACCEPTS: Readonly<Record<OperationKind, readonly ChangeKind[]>> = {
  create: ['created'],
  modify: ['modified'],
  truncate: ['modified'],
  attrib: ['attrib'],
  'rename-within': ['renamed'],
  'rename-across': ['renamed'],
  // The file left the tree: from inside, deleted and the half of a rename are both the truth.
  'move-out': ['deleted', 'renamed-from'],
  // It arrived: created and the half of a rename without its old name are both the truth.
  'move-in': ['created', 'renamed'],
  delete: ['deleted'],
  // The file's content changed, by a rename over it: each of these says so.
  'atomic-replace': ['renamed', 'created', 'modified'],
  'mkdir-then-files': ['created'],
  'mkdir-p': ['created'],
  'rmdir-tree': ['deleted'],
  symlink: ['created'],
  hardlink: ['created'],
};

/** Kinds on the other path an operation touched that are part of its change, neither right nor wrong. */
const NEUTRAL_AT_SOURCE: Readonly<Partial<Record<OperationKind, readonly ChangeKind[]>>> = {
  'rename-within': ['renamed-from'],
  'rename-across': ['renamed-from'],
  // The temporary file: whatever is said of it is about the editor's own file.
  'atomic-replace': ['created', 'modified', 'attrib', 'renamed-from', 'deleted'],
  // The target's link count changed.
  hardlink: ['attrib'],
};

function accepts(t: Truth): readonly ChangeKind[] {
  return t.step === 'after' ? ['modified'] : ACCEPTS[t.kind];
}

/** What was found for one kind of operation. */
export interface KindTally {
  operations: number;
  recalled: number;
  wrongKind: number;
  duplicates: number;
  readonly latenciesNs: number[];
}

/** An operation not reported whole, for the run's info: which paths no event reported with the right kind. */
export interface MissedOp {
  readonly index: number;
  readonly kind: OperationKind;
  readonly step: 'op' | 'after';
  readonly missing: readonly string[];
}

export interface Matching {
  readonly byKind: ReadonlyMap<OperationKind, KindTally>;
  readonly operations: number;
  readonly recalled: number;
  readonly wrongKind: number;
  readonly unknownKind: number;
  readonly duplicates: number;
  readonly unrelated: number;
  readonly late: number;
  readonly latenciesNs: readonly number[];
  readonly deafAfter: number;
  readonly deafChecks: number;
  readonly overflows: number;
  /** Events matched, markers and overflows excluded. */
  readonly events: number;
  /** In script order, all of them: the caller bounds what it keeps. */
  readonly missed: readonly MissedOp[];
}

interface Role {
  readonly truth: number;
  readonly expect: number | null; // index into the truth's paths, null for its source
}

export interface MatchOptions {
  readonly settleNs: bigint;
  /** Paths of readiness markers: not the script's, never matched. */
  readonly isMarker: (path: string) => boolean;
}

/** Matches `events` (in any order) to `truths`. */
export function matchEvents(truths: readonly Truth[], events: readonly WatchEvent[], o: MatchOptions): Matching {
  const roles = new Map<string, Role[]>();
  const add = (path: string, role: Role) => {
    const list = roles.get(path);
    if (list) list.push(role);
    else roles.set(path, [role]);
  };
  truths.forEach((t, i) => {
    t.paths.forEach((p, j) => {
      add(p.path, { truth: i, expect: j });
    });
    if (t.source !== undefined) add(t.source, { truth: i, expect: null });
  });
  const begins = (r: Role) => truths[r.truth]?.beforeNs ?? 0n;
  for (const list of roles.values()) list.sort((a, b) => (begins(a) < begins(b) ? -1 : begins(a) > begins(b) ? 1 : 0));

  // First matching event per (truth, path), as latency in ns; later ones are duplicates.
  const firstNs = truths.map((t) => t.paths.map((): number | null => null));
  const wrong = truths.map(() => 0);
  const dups = truths.map(() => 0);
  let unknownKind = 0;
  let unrelated = 0;
  let late = 0;
  let overflows = 0;
  let matched = 0;
  for (const e of events) {
    if (e.kind === 'overflow') {
      overflows++;
      continue;
    }
    if (o.isMarker(e.path)) continue;
    matched++;
    const list = roles.get(e.path) ?? [];
    let role: Role | undefined;
    for (const r of list) if (begins(r) <= e.atNs) role = r;
    const truth = role === undefined ? undefined : truths[role.truth];
    if (role === undefined || truth === undefined) {
      unrelated++;
      continue;
    }
    const lastNs = truth.paths.reduce((m, p) => (p.atNs > m ? p.atNs : m), truth.beforeNs);
    if (e.atNs > lastNs + o.settleNs) {
      late++;
      continue;
    }
    if (role.expect === null) {
      if (!(NEUTRAL_AT_SOURCE[truth.kind] ?? []).includes(e.kind)) {
        wrong[role.truth] = (wrong[role.truth] ?? 0) + 1;
        if (e.kind === 'unknown') unknownKind++;
      }
      continue;
    }
    if (!accepts(truth).includes(e.kind)) {
      wrong[role.truth] = (wrong[role.truth] ?? 0) + 1;
      if (e.kind === 'unknown') unknownKind++;
      continue;
    }
    const row = firstNs[role.truth];
    const at = truth.paths[role.expect]?.atNs ?? truth.beforeNs;
    if (row === undefined) continue;
    if (row[role.expect] === null) row[role.expect] = Math.max(0, Number(e.atNs - at));
    else dups[role.truth] = (dups[role.truth] ?? 0) + 1;
  }

  const byKind = new Map<OperationKind, KindTally>();
  const tally = (k: OperationKind): KindTally => {
    let t = byKind.get(k);
    if (!t) {
      t = { operations: 0, recalled: 0, wrongKind: 0, duplicates: 0, latenciesNs: [] };
      byKind.set(k, t);
    }
    return t;
  };
  const missed: MissedOp[] = [];
  const latenciesNs: number[] = [];
  let deafAfter = 0;
  let deafChecks = 0;
  let operations = 0;
  let recalled = 0;
  truths.forEach((t, i) => {
    const k = tally(t.kind);
    const got = firstNs[i] ?? [];
    const missing = t.paths.filter((_, j) => got[j] === null || got[j] === undefined).map((p) => p.path);
    k.wrongKind += wrong[i] ?? 0;
    k.duplicates += dups[i] ?? 0;
    for (const ns of got) {
      if (ns === null) continue;
      k.latenciesNs.push(ns);
      latenciesNs.push(ns);
    }
    if (missing.length > 0) missed.push({ index: t.index, kind: t.kind, step: t.step, missing });
    if (t.step === 'after') {
      deafChecks++;
      if (missing.length > 0) deafAfter++;
      return;
    }
    operations++;
    k.operations++;
    if (missing.length === 0) {
      recalled++;
      k.recalled++;
    }
    if (t.kind === 'mkdir-then-files') {
      // The files inside: a watcher that reported the directory and not them was deaf in it.
      const files = t.paths.length - 1;
      deafChecks += files;
      if (got[0] !== null && got[0] !== undefined) deafAfter += got.slice(1).filter((ns) => ns === null).length;
    }
  });
  const sum = (f: (k: KindTally) => number) => [...byKind.values()].reduce((s, k) => s + f(k), 0);
  return {
    byKind,
    operations,
    recalled,
    wrongKind: sum((k) => k.wrongKind),
    unknownKind,
    duplicates: sum((k) => k.duplicates),
    unrelated,
    late,
    latenciesNs,
    deafAfter,
    deafChecks,
    overflows,
    events: matched,
    missed,
  };
}

/** The nearest-rank percentile (`q` in (0, 1]) of `values`, or null for none. */
export function percentile(values: readonly number[], q: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? null;
}
