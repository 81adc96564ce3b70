/**
 * The report's notes: each kind appears where the measurements call for it and not where they
 * do not, a diagnosis follows from the numbers (a reader that kept up is not starved, whatever
 * its CPU share), and notes of one kind are said once over the cells that have them. Synthetic
 * runs (tests/fixtures/synthetic.ts) with the metrics each case needs planted.
 */
import { describe, expect, it } from 'vitest';
import type { MatrixInput } from '../contract/matrix.js';
import type { RunResult } from '../contract/result.js';
import { buildReport } from '../report/build.js';
import { formatReadableDuration } from '../report/format.js';
import type { NoteKind, Report } from '../report/model.js';
import { REPORT_NOTE_KINDS } from '../report/notes.js';
import { WORKLOAD_NAMES, WORKLOADS } from '../contract/workloads/index.js';
import { kindsOf as operationKindsOf, perKindMetric } from '../contract/workloads/semantics/index.js';
import { ReportSchema } from '../report/schema.js';
import { noteText } from '../report/export/doc.js';
import { reportDoc } from '../report/results-view.js';
import { syntheticInterference, syntheticRuns } from './fixtures/synthetic.js';
import { cellOf, runOnce, tempDir } from './helpers/local.js';

type Metrics = Record<string, number | null>;

/** Runs of one inotify matrix with `patch` applied to each ok run's metrics (given the run). */
function runs(params: MatrixInput['params'], patch: (r: RunResult, i: number) => Metrics = () => ({}), repetitions = 6): RunResult[] {
  const all = syntheticRuns({ matrix: { name: 'notes', workload: 'inotify', repetitions, warmup: 0, params }, machine: { machine: 'm1' }, noise: 0 });
  return all.map((r, i) => (r.state === 'ok' ? { ...r, metrics: { ...r.metrics, ...patch(r, i) } } : r));
}

/** A raw reader that read every write: events = writes, no overflow. */
const keptUp = (r: RunResult): Metrics => {
  const writes = r.state === 'ok' ? Number(r.metrics['writes']) : 0;
  return { events: writes, coalescedFraction: 0, writesPerEvent: 1, overflows: 0 };
};

const kindsOf = (report: Report) => report.cells.flatMap((c) => c.findings.map((n) => n.kind));
/** Every kind the report says: its cells' and its own (the knees' cache-size notes are a machine's). */
const allKindsOf = (report: Report) => [...kindsOf(report), ...report.notes.map((g) => g.kind)];

/** A buffer sweep with a clear knee on a machine whose L3 came from `cacheSource`. */
function sweepOn(cacheSource: 'sysfs' | 'sysconf' | null, l3Bytes: number | null): Report {
  const matrix = { name: 'sweep', workload: 'inotify' as const, repetitions: 5, params: { bufferBytes: Array.from({ length: 8 }, (_, i) => 1024 * 4 ** i) } };
  const all = syntheticRuns({ matrix, machine: { machine: 'vm', l3Bytes: 8 * 1024 ** 2 }, seed: 5, noise: 0.005 }).map((r) => ({
    ...r,
    fingerprint: { ...r.fingerprint, cpu: { ...r.fingerprint.cpu, cacheSource, l3Bytes } },
  }));
  return buildReport(all, { title: 'sweep' });
}

describe('the starved-reader note follows from the measurements', () => {
  it('is absent when the reader read every write at 22% of a CPU (inotify-quick on a quiet machine)', () => {
    const report = buildReport(runs({ backend: 'inotify', writers: 8, files: 128, duration: '1s' }, (r) => ({ ...keptUp(r), readerCpuFraction: 0.22 })), { title: 't' });
    expect(kindsOf(report)).not.toContain('starved-reader');
    expect(report.cells[0]?.notes.join(' ')).not.toMatch(/starved/);
  });

  it('follows from a real raw reader\'s measurements: one slow writer of 64 KiB writes, read at about a fifth of a CPU', async () => {
    const scratch = tempDir('fsbench-notes-');
    try {
      const cell = cellOf('inotify', { backend: 'inotify', watch: 'dir', writers: 1, files: 128, writeBytes: 65536, bufferBytes: 65536, duration: 1000, target: 'tmpfs' });
      const measured: RunResult[] = [];
      for (let i = 0; i < 3; i++) measured.push(await runOnce(cell, scratch.dir));
      const report = buildReport(measured, { title: 't' });
      const c = report.cells[0];
      const median = (m: string) => c?.metrics[m]?.median ?? null;
      const behind = (median('overflows') ?? 0) > 0 || (median('coalescedFraction') ?? 0) > 0.05;
      const cpu = median('readerCpuFraction') ?? 1;
      process.stdout.write(`real reader: ${JSON.stringify({ writes: median('writes'), events: median('events'), overflows: median('overflows'), cpu })}\n`);
      // Starved exactly when it fell behind on little CPU; a reader that read every write is not, whatever its share.
      expect(c?.findings.some((n) => n.kind === 'starved-reader')).toBe(behind && cpu < 0.25);
    } finally {
      scratch.remove();
    }
  }, 60_000);

  it('appears when the reader overflowed on little CPU, naming what it lost', () => {
    const report = buildReport(runs({ backend: 'inotify' }, (r) => ({ ...keptUp(r), overflows: 7, readerCpuFraction: 0.2 })), { title: 't' });
    const starved = report.cells[0]?.findings.find((n) => n.kind === 'starved-reader');
    expect(starved?.text).toBe(
      'the reader fell behind (7 overflows) using only 20% of a CPU while the writers ran: it was starved, so the buffer size is not what limits throughput here (try readerNice or pin).',
    );
    expect(starved?.figure).toEqual({ name: 'readerCpuFraction', value: 0.2 });
  });

  it('appears when the kernel merged many writes (the reader behind) without an overflow', () => {
    const report = buildReport(runs({ backend: 'inotify' }, () => ({ overflows: 0, coalescedFraction: 0.45, readerCpuFraction: 0.23 })), { title: 't' });
    expect(report.cells[0]?.findings.find((n) => n.kind === 'starved-reader')?.text).toMatch(/^the reader fell behind \(45% of writes merged\) using only 23% of a CPU/);
  });

  it('is absent when the reader fell behind on a whole CPU: slow, not starved', () => {
    const report = buildReport(runs({ backend: 'inotify' }, () => ({ overflows: 7, coalescedFraction: 0.45, readerCpuFraction: 0.97 })), { title: 't' });
    expect(kindsOf(report)).toContain('overflow');
    expect(kindsOf(report)).not.toContain('starved-reader');
  });
});

/** For each kind: runs where the note must appear, and runs where it must not. */
const CASES: Readonly<Partial<Record<NoteKind, { present: () => Report; absent: () => Report }>>> = {
  overflow: {
    present: () => buildReport(runs({}, () => ({ overflows: 3 })), { title: 't' }),
    absent: () => buildReport(runs({}, () => ({ overflows: 0 })), { title: 't' }),
  },
  'starved-reader': {
    present: () => buildReport(runs({}, () => ({ overflows: 3, readerCpuFraction: 0.1 })), { title: 't' }),
    absent: () => buildReport(runs({}, (r) => ({ ...keptUp(r), readerCpuFraction: 0.1 })), { title: 't' }),
  },
  'drain-timeout': {
    present: () => buildReport(runs({ mode: 'drain' }, () => ({ drainTimedOut: 1 })), { title: 't' }),
    absent: () => buildReport(runs({ mode: 'drain' }, () => ({ drainTimedOut: 0 })), { title: 't' }),
  },
  'fanotify-merge': {
    present: () => buildReport(runs({ backend: ['inotify', 'fanotify'] }, (r): Metrics => (r.params['backend'] === 'fanotify' ? { writesPerEvent: 3 } : {})), { title: 't' }),
    absent: () => buildReport(runs({ backend: ['inotify', 'fanotify'] }, () => ({ writesPerEvent: 1.1 })), { title: 't' }),
  },
  'silent-loss': {
    present: () => buildReport(runs({ backend: ['inotify', 'parcel'], watch: 'dir' }, (r): Metrics => (r.params['backend'] === 'parcel' ? { overflows: null } : {})), { title: 't' }),
    absent: () => buildReport(runs({ backend: ['inotify', 'fanotify'] }), { title: 't' }),
  },
  delivered: {
    present: () => buildReport(runs({ backend: ['inotify', 'watchman'], watch: 'dir' }, (r): Metrics => (r.params['backend'] === 'watchman' ? { overflows: 0 } : {})), { title: 't' }),
    absent: () => buildReport(runs({ backend: ['inotify', 'parcel'], watch: 'dir' }, (r): Metrics => (r.params['backend'] === 'parcel' ? { overflows: null } : {})), { title: 't' }),
  },
  'wide-spread': {
    present: () => buildReport(runs({}, (_, i) => ({ eventsPerSec: [900_000, 500_000, 700_000, 300_000, 800_000, 400_000][i % 6] ?? 0 })), { title: 't' }),
    absent: () => buildReport(runs({}), { title: 't' }),
  },
  interference: {
    present: () => buildReport(runs({}).map((r, i) => (r.state === 'ok' ? { ...r, interference: syntheticInterference(i === 0 ? 0.6 : 0) } : r)), { title: 't' }),
    absent: () => buildReport(runs({}).map((r) => (r.state === 'ok' ? { ...r, interference: syntheticInterference(0.01) } : r)), { title: 't' }),
  },
  'interference-spread': {
    // The rate falls as the outside CPU rises: the slow runs are the disturbed ones.
    present: () =>
      buildReport(
        runs({}, (_, i) => ({ eventsPerSec: [900_000, 780_000, 650_000, 520_000, 400_000, 280_000][i % 6] ?? 0 })).map((r, i) =>
          r.state === 'ok' ? { ...r, interference: syntheticInterference([0, 0.05, 0.2, 0.4, 0.6, 0.9][i % 6] ?? 0) } : r,
        ),
        { title: 't' },
      ),
    absent: () =>
      buildReport(
        runs({}, (_, i) => ({ eventsPerSec: [900_000, 780_000, 650_000, 520_000, 400_000, 280_000][i % 6] ?? 0 })).map((r, i) =>
          r.state === 'ok' ? { ...r, interference: syntheticInterference([0.04, 0.01, 0.06, 0.02, 0.05, 0.03][i % 6] ?? 0) } : r,
        ),
        { title: 't' },
      ),
  },
  'precision-reached': {
    present: () => buildReport(runs({}), { title: 't', precision: { metric: 'eventsPerSec', target: 0.02 } }),
    absent: () => buildReport(runs({}, (_, i) => ({ eventsPerSec: [900_000, 500_000, 700_000, 300_000, 800_000, 400_000][i % 6] ?? 0 })), { title: 't', precision: { metric: 'eventsPerSec', target: 0.02 } }),
  },
  'precision-short': {
    present: () => buildReport(runs({}, (_, i) => ({ eventsPerSec: [900_000, 500_000, 700_000, 300_000, 800_000, 400_000][i % 6] ?? 0 })), { title: 't', precision: { metric: 'eventsPerSec', target: 0.02 } }),
    absent: () => buildReport(runs({}), { title: 't', precision: { metric: 'eventsPerSec', target: 0.02 } }),
  },
  'cache-size': {
    present: () => sweepOn('sysconf', 508 * 1024 ** 2),
    absent: () => sweepOn('sysfs', 8 * 1024 ** 2),
  },
  'watch-limit': {
    present: () => watchesReport({ limitHit: 1, maxUserWatches: 8192, watches: 8190, watchesNeeded: 20_001 }),
    absent: () => watchesReport({ limitHit: 0, maxUserWatches: 1_048_576, watches: 20_001, watchesNeeded: null }),
  },
  'host-wide-accounting': {
    present: () => watchesReport({ kernelBytesHostWide: 1 }),
    absent: () => watchesReport({ kernelBytesHostWide: 0 }),
  },
  // A watcher that gives a deletion and a creation for each rename, against one that reports renames.
  'rename-as-other': {
    present: () => semanticsReport({ [perKindMetric('recall', 'rename-within')]: 0, [perKindMetric('wrong_kind', 'rename-within')]: 40 }),
    absent: () => semanticsReport({}),
  },
  missed: {
    present: () => semanticsReport({ [perKindMetric('recall', 'create')]: 0.5 }),
    absent: () => semanticsReport({}),
  },
  deaf: {
    present: () => semanticsReport({ deafAfter: 3, deafChecks: 20 }),
    absent: () => semanticsReport({ deafAfter: 0, deafChecks: 20 }),
  },
};

/** A semantics cell (chokidar, 20 of each of three kinds) whose watcher reported every operation, with `metrics` planted over that. */
function semanticsReport(metrics: Metrics): Report {
  const params = { backend: 'chokidar', perKind: 20, kinds: 'create,rename-within,atomic-replace' };
  const all = syntheticRuns({ matrix: { name: 'semantics', workload: 'semantics', repetitions: 5, warmup: 0, params }, machine: { machine: 'm1' }, noise: 0 });
  const perfect = Object.fromEntries(operationKindsOf(params.kinds).flatMap((k) => [[perKindMetric('recall', k), 1], [perKindMetric('wrong_kind', k), 0]]));
  return buildReport(all.map((r) => (r.state === 'ok' ? { ...r, metrics: { ...r.metrics, recall: 1, deafAfter: 0, overflows: 0, ...perfect, ...metrics } } : r)), { title: 't' });
}

/** A watches cell whose ok runs measured `metrics` (the synthetic runs carry none of that workload's own). */
function watchesReport(metrics: Metrics): Report {
  const all = syntheticRuns({ matrix: { name: 'watches', workload: 'watches', repetitions: 5, warmup: 0, params: { dirs: 20_000 } }, machine: { machine: 'm1' }, noise: 0 });
  return buildReport(all.map((r) => (r.state === 'ok' ? { ...r, metrics: { ...r.metrics, ...metrics } } : r)), { title: 't' });
}

describe('every kind of note', () => {
  // The report's own kinds and every kind a workload's slice notes: each needs its two cases here.
  const kinds = [...REPORT_NOTE_KINDS, ...WORKLOAD_NAMES.flatMap((w) => Object.keys(WORKLOADS[w].notes?.gist ?? {}))];
  for (const kind of kinds) {
    it(`${kind}: appears where the measurements call for it, and not otherwise`, () => {
      const cases = CASES[kind];
      if (!cases) throw new Error(`no case for the note kind ${kind}`);
      const present = cases.present();
      const absent = cases.absent();
      expect(allKindsOf(present)).toContain(kind);
      expect(allKindsOf(absent)).not.toContain(kind);
      // The served shape holds typed notes and their groups.
      expect(() => ReportSchema.parse(present)).not.toThrow();
      expect(present.notes.map((g) => g.kind)).toContain(kind);
      // A cell's sentences are its typed notes' texts.
      for (const c of present.cells) expect(c.notes).toEqual(c.findings.map((n) => n.text));
    });
  }
});

describe('what a watcher reported, in words', () => {
  it('counts the renames a watcher gave as other kinds, and lists the kinds it missed with how many', () => {
    const notes = semanticsReport({ [perKindMetric('recall', 'rename-within')]: 0, [perKindMetric('wrong_kind', 'rename-within')]: 40, [perKindMetric('recall', 'create')]: 0.9 }).cells[0]?.notes ?? [];
    expect(notes).toContain(
      'chokidar reported 0 of 20 renames within a directory as renames: it gives 2 events of other kinds for each (a deletion and a creation, or "something changed"), so a consumer cannot tell a rename from a new file.',
    );
    expect(notes.join('\n')).toContain('chokidar did not report with the right kind: creates 2 of 20, renames within a directory 20 of 20 (median of the runs)');
  });

  it("tells the kernel's overflows apart from the watcher's own loss", () => {
    const notes = semanticsReport({ overflows: 2 }).cells[0]?.notes ?? [];
    expect(notes.join('\n')).toContain("2 overflow events per run (median): the kernel dropped events, so what went missing here is the kernel's loss, not the watcher's.");
    expect(semanticsReport({}).cells[0]?.notes.join('\n')).not.toContain('overflow');
  });
});

describe('a knee judged against an L3 the kernel did not report', () => {
  it('is said once in the report\'s notes, which every output prints, and not on a machine whose kernel reported it', () => {
    const guessed = sweepOn('sysconf', 508 * 1024 ** 2);
    const groups = guessed.notes.filter((g) => g.kind === 'cache-size');
    expect(groups.map((g) => g.text)).toEqual([guessed.knees[0]?.note]);
    expect(reportDoc(guessed).notes.map(noteText).join('\n')).toContain("only glibc's sysconf reports");
    const unknown = sweepOn(null, null);
    expect(unknown.notes.filter((g) => g.kind === 'cache-size').map((g) => g.text)).toEqual(['vm reports no L3 size (its kernel lists no cache topology): the knee is not compared with a cache.']);
    expect(reportDoc(sweepOn('sysfs', 8 * 1024 ** 2)).notes.map(noteText).join('\n')).not.toContain('L3');
  });
});

describe('notes of one kind over many cells', () => {
  // The buffer sweep's shape: the default queue overflows at every buffer size, the large one never does.
  const sweep = () =>
    buildReport(
      runs(
        { writers: 128, files: [128, 1024], bufferBytes: ['1KiB', '4KiB', '16KiB', '64KiB'], maxQueuedEvents: [16384, 1048576] },
        (r) => (r.params['maxQueuedEvents'] === 16384 ? { overflows: 1000 + Number(r.params['bufferBytes']) / 64, readerCpuFraction: 0.2 } : { overflows: 0, readerCpuFraction: 0.6 }),
        3,
      ),
      { title: 'sweep' },
    );

  it('are said once, with which cells and the range of the figure, while each cell keeps its own', () => {
    const report = sweep();
    expect(report.cells).toHaveLength(16);
    const overflow = report.notes.find((g) => g.kind === 'overflow');
    expect(overflow?.cells).toHaveLength(8);
    expect(overflow?.figure).toEqual({ name: 'overflows', min: 1016, max: 2024 });
    expect(overflow?.text).toBe(
      '8 of 16 cells (maxQueuedEvents=16384): the kernel dropped events (IN_Q_OVERFLOW per run, median: 1016 to 2024): raise maxQueuedEvents or give the reader more CPU.',
    );
    const starved = report.notes.find((g) => g.kind === 'starved-reader');
    expect(starved?.text).toMatch(/^8 of 16 cells \(maxQueuedEvents=16384\): the reader fell behind using only 20% of a CPU/);
    // One line per kind, not one per cell.
    expect(report.notes.map((g) => g.kind)).toEqual(['overflow', 'starved-reader']);
    expect(reportDoc(report).notes.map(noteText)).toEqual(report.notes.map((g) => g.text));
    // Each noted cell keeps its own sentence with its own number.
    const cell = report.cells.find((c) => c.params['maxQueuedEvents'] === 16384 && c.params['bufferBytes'] === 1024 && c.params['files'] === 128);
    expect(cell?.notes[0]).toBe('1016 IN_Q_OVERFLOW per run (median): the kernel dropped events; raise maxQueuedEvents or give the reader more CPU.');
    expect(report.cells.filter((c) => c.params['maxQueuedEvents'] === 1048576).every((c) => c.findings.length === 0)).toBe(true);
  });

  it('name the cells by their labels when no parameter values pick them out', () => {
    const report = buildReport(
      runs({ files: [128, 1024], bufferBytes: ['1KiB', '4KiB'] }, (r) => ({ overflows: (r.params['files'] === 128 && r.params['bufferBytes'] === 1024) || (r.params['files'] === 1024 && r.params['bufferBytes'] === 4096) ? 5 : 0 }), 3),
      { title: 't' },
    );
    const overflow = report.notes.find((g) => g.kind === 'overflow');
    expect(overflow?.cells.map((c) => c.label)).toEqual(['files=128 bufferBytes=1KiB', 'files=1024 bufferBytes=4KiB']);
    expect(overflow?.text).toMatch(/^2 of 4 cells \(files=128 bufferBytes=1KiB; files=1024 bufferBytes=4KiB\): the kernel dropped events \(IN_Q_OVERFLOW per run, median: 5\)/);
  });

  it('keep a kind seen on one cell as that cell’s sentence, named by its label', () => {
    const report = buildReport(runs({ bufferBytes: ['1KiB', '4KiB'] }, (r) => ({ overflows: r.params['bufferBytes'] === 1024 ? 9 : 0 }), 3), { title: 't' });
    expect(report.notes.map((g) => g.text)).toEqual(['bufferBytes=1KiB: 9 IN_Q_OVERFLOW per run (median): the kernel dropped events; raise maxQueuedEvents or give the reader more CPU.']);
  });
});

describe('a kind on a few cells', () => {
  it('names each cell with its own figure', () => {
    const report = buildReport(runs({ backend: ['inotify', 'parcel', 'fswatch'], watch: 'dir' }, (r): Metrics => {
      const writes = r.state === 'ok' ? Number(r.metrics['writes']) : 0;
      if (r.params['backend'] === 'parcel') return { overflows: null, events: Math.round(writes / 4) };
      if (r.params['backend'] === 'fswatch') return { overflows: null, events: Math.round(writes / 2) };
      return keptUp(r);
    }), { title: 't' });
    expect(report.notes.find((g) => g.kind === 'silent-loss')?.text).toMatch(
      /^2 of 3 cells \(backend parcel, fswatch\): the watcher cannot report IN_Q_OVERFLOW \(overflows shows as n\/a\): lost events are silent; it delivered 25% in backend=parcel, 50% in backend=fswatch of the events the raw inotify reader got\.$/,
    );
  });
});

describe('a duration a person reads', () => {
  it('rounds to the unit it shows', () => {
    expect([850, 42_400, 1_747_200, 7_500_000, 3 * 86_400_000 + 4 * 3_600_000].map(formatReadableDuration)).toEqual(['850 ms', '42 s', '29 min', '2 h 05 min', '3 d 4 h']);
  });
});
