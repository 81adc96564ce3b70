/**
 * The semantics workload's matching (workloads/semantics/matching.ts) on event lists written by
 * hand: pure logic, so every case states exactly what a watcher said and what must be counted.
 * Also the script (same seed, same order) and the metrics' names and schema.
 */
import { describe, expect, it } from 'vitest';
import type { WatchEvent } from '../contract/workloads/semantics/events.js';
import { OPERATION_KINDS, SEMANTICS_METRIC_DOCS, SemanticsMetrics, perKindMetric, type OperationKind } from '../contract/workloads/semantics/index.js';
import { matchEvents, percentile, type Truth } from '../workloads/semantics/matching.js';
import { MAX_INFO_TEXT } from '../contract/result.js';
import { missedInfo } from '../workloads/semantics/index.js';
import { semanticsMetrics } from '../workloads/semantics/metrics.js';
import { planScript } from '../workloads/semantics/script.js';

const MS = 1_000_000n;
const settleNs = 1000n * MS;
const isMarker = (p: string) => p.includes('/.fsbench-marker-');
const opts = { settleNs, isMarker };

/** An operation at `atMs` (its syscall began 1 ms earlier) on `paths`. */
function op(index: number, kind: OperationKind, atMs: number, paths: string[], extra: { source?: string; step?: 'op' | 'after' } = {}): Truth {
  const atNs = BigInt(atMs) * MS;
  return { index, kind, step: extra.step ?? 'op', beforeNs: atNs - MS, paths: paths.map((path) => ({ path, atNs })), ...(extra.source === undefined ? {} : { source: extra.source }) };
}

function ev(kind: WatchEvent['kind'], path: string, atMs: number, from?: string): WatchEvent {
  return { kind, path, atNs: BigInt(Math.round(atMs * 1e6)), ...(from === undefined ? {} : { from }) };
}

describe('matching', () => {
  it('counts an operation reported with the right kind on its path, with its latency from the syscall', () => {
    const m = matchEvents([op(0, 'create', 100, ['/w/a'])], [ev('created', '/w/a', 103)], opts);
    expect(m.recalled).toBe(1);
    expect(m.operations).toBe(1);
    expect(m.latenciesNs).toEqual([3_000_000]);
    expect(m.missed).toEqual([]);
  });

  it('counts a rename reported as a deletion and a creation as two wrong-kind events, and the rename as missed', () => {
    const truths = [op(0, 'rename-within', 100, ['/w/b'], { source: '/w/a' })];
    const m = matchEvents(truths, [ev('deleted', '/w/a', 101), ev('created', '/w/b', 101)], opts);
    expect(m.recalled).toBe(0);
    expect(m.wrongKind).toBe(2);
    expect(m.missed).toEqual([{ index: 0, kind: 'rename-within', step: 'op', missing: ['/w/b'] }]);
    const paired = matchEvents(truths, [ev('renamed', '/w/b', 101, '/w/a')], opts);
    expect([paired.recalled, paired.wrongKind]).toEqual([1, 0]);
    // The half of a rename naming the old path is part of it, neither right nor wrong.
    const halves = matchEvents(truths, [ev('renamed-from', '/w/a', 101), ev('renamed', '/w/b', 101)], opts);
    expect([halves.recalled, halves.wrongKind, halves.unrelated]).toEqual([1, 0, 0]);
  });

  it('counts repeats of the right kind as duplicates, unknown kinds apart, and events for untouched paths as unrelated', () => {
    const m = matchEvents(
      [op(0, 'modify', 100, ['/w/a'])],
      [ev('modified', '/w/a', 101), ev('modified', '/w/a', 102), ev('unknown', '/w/a', 102), ev('modified', '/w/d0', 101)],
      opts,
    );
    expect([m.recalled, m.duplicates, m.wrongKind, m.unknownKind, m.unrelated, m.events]).toEqual([1, 1, 1, 1, 1, 4]);
  });

  it('does not count an event after the settle window, nor one read before the operation began', () => {
    const m = matchEvents([op(0, 'delete', 100, ['/w/a'])], [ev('deleted', '/w/a', 98), ev('deleted', '/w/a', 100 + 1000 + 1)], opts);
    expect([m.recalled, m.late, m.unrelated]).toEqual([0, 1, 1]);
  });

  it('leaves out markers, and counts overflows apart', () => {
    const m = matchEvents([op(0, 'create', 100, ['/w/a'])], [ev('created', '/w/d0/.fsbench-marker-0', 50), ev('overflow', '/w', 101)], opts);
    expect([m.events, m.unrelated, m.overflows, m.recalled]).toEqual([0, 0, 1, 0]);
  });

  it('gives each event to the latest operation on its path: an append after an atomic replace, missed, is deafness', () => {
    const truths = [
      op(0, 'atomic-replace', 100, ['/w/a'], { source: '/w/.a.tmp' }),
      op(0, 'atomic-replace', 2000, ['/w/a'], { step: 'after' }),
    ];
    const replaceOnly = [ev('created', '/w/.a.tmp', 99.5), ev('modified', '/w/.a.tmp', 99.6), ev('renamed', '/w/a', 100.2, '/w/.a.tmp')];
    const deaf = matchEvents(truths, replaceOnly, opts);
    expect([deaf.recalled, deaf.operations, deaf.deafChecks, deaf.deafAfter, deaf.wrongKind]).toEqual([1, 1, 1, 1, 0]);
    expect(deaf.missed).toEqual([{ index: 0, kind: 'atomic-replace', step: 'after', missing: ['/w/a'] }]);
    const heard = matchEvents(truths, [...replaceOnly, ev('modified', '/w/a', 2001)], opts);
    expect([heard.deafAfter, heard.duplicates]).toEqual([0, 0]);
  });

  it('counts files in a new directory whose creation was reported, and not the files, as deafness', () => {
    const truths = [op(0, 'mkdir-then-files', 100, ['/w/n', '/w/n/f0', '/w/n/f1', '/w/n/f2'])];
    const m = matchEvents(truths, [ev('created', '/w/n', 100.1), ev('created', '/w/n/f1', 100.2)], opts);
    expect([m.recalled, m.deafChecks, m.deafAfter]).toEqual([0, 3, 2]);
    expect(m.missed[0]?.missing).toEqual(['/w/n/f0', '/w/n/f2']);
    // A watcher that did not see the directory either missed it: that is not a deaf watch.
    const blind = matchEvents(truths, [], opts);
    expect([blind.deafChecks, blind.deafAfter]).toEqual([3, 0]);
  });

  it('accepts a move out reported as a deletion or a half rename, and a move in as a creation or a rename', () => {
    const truths = [op(0, 'move-out', 100, ['/w/a']), op(1, 'move-in', 200, ['/w/b'])];
    expect(matchEvents(truths, [ev('deleted', '/w/a', 101), ev('created', '/w/b', 201)], opts).recalled).toBe(2);
    expect(matchEvents(truths, [ev('renamed-from', '/w/a', 101), ev('renamed', '/w/b', 201)], opts).recalled).toBe(2);
    expect(matchEvents(truths, [ev('modified', '/w/a', 101), ev('modified', '/w/b', 201)], opts).wrongKind).toBe(2);
  });

  it('takes percentiles by nearest rank', () => {
    expect(percentile([], 0.5)).toBeNull();
    expect(percentile([5, 1, 3, 2, 4], 0.5)).toBe(3);
    expect(percentile(Array.from({ length: 100 }, (_, i) => i + 1), 0.99)).toBe(99);
  });
});

describe('the metrics', () => {
  it('name every kind stably, per kind null where the cell made none, and pass the contract schema', () => {
    expect(perKindMetric('recall', 'rename-within')).toBe('recall_rename_within');
    const m = matchEvents([op(0, 'create', 100, ['/w/a']), op(1, 'create', 200, ['/w/b'])], [ev('created', '/w/a', 101)], opts);
    const metrics = semanticsMetrics(m, { overflowsKnown: false, synthesized: null, opsPerSec: 10, readyMs: 5 });
    expect(SemanticsMetrics.parse(metrics)).toEqual(metrics);
    expect(metrics['recall_create']).toBe(0.5);
    expect(metrics['recall']).toBe(0.5);
    expect(metrics['recall_delete']).toBeNull();
    expect(metrics['overflows']).toBeNull();
    expect(Object.keys(metrics).sort()).toEqual(Object.keys(SEMANTICS_METRIC_DOCS).sort());
    expect(Object.keys(metrics)).toHaveLength(17 + 4 * OPERATION_KINDS.length);
  });
});

describe('the script', () => {
  it('is the same for the same seed, another for another seed, with perKind of each kind', () => {
    const kinds: OperationKind[] = ['create', 'delete', 'symlink'];
    const a = planScript(kinds, 50, 7);
    expect(planScript(kinds, 50, 7)).toEqual(a);
    expect(planScript(kinds, 50, 8).map((o) => o.kind)).not.toEqual(a.map((o) => o.kind));
    expect(a).toHaveLength(150);
    for (const k of kinds) expect(a.filter((o) => o.kind === k)).toHaveLength(50);
    expect(a.map((o) => o.index)).toEqual(Array.from({ length: 150 }, (_, i) => i));
  });
});

describe('the missed operations in a run\'s info', () => {
  it('lists as many as fit in one info entry, in the script\'s order, and says how many it listed', () => {
    const root = '/scratch/fsbench-semantics-x/watched';
    const deep = (i: number) => `${root}/d${i % 4}/${'deep/'.repeat(30)}file-${i}`;
    const missed = Array.from({ length: 50 }, (_, i) => ({ index: i, kind: 'rename-within' as const, step: 'op' as const, missing: [deep(i), `${deep(i)}.renamed`] }));
    const { text, listed } = missedInfo(missed, root);
    expect(text.length).toBeLessThanOrEqual(MAX_INFO_TEXT);
    expect(listed).toBeGreaterThan(0);
    expect(listed).toBeLessThan(50);
    const parsed: unknown = JSON.parse(text);
    expect(parsed).toHaveLength(listed);
    expect(parsed).toEqual(missed.slice(0, listed).map((m) => ({ ...m, missing: m.missing.map((p) => p.slice(root.length + 1)) })));
    // A short list is listed whole.
    expect(missedInfo(missed.slice(0, 3), root).listed).toBe(3);
  });
});
