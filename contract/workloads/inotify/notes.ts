/**
 * The inotify workload's notes: the kernel dropped events, the reader fell behind for want of
 * CPU, the drain timed out, fanotify merged writes, a watcher library cannot see its losses
 * (and what share of the raw reader's events it delivered, as for a watcher program). Each reads the medians of one cell,
 * and for a watcher library those of the raw reader's cell beside it.
 */
import { noteMedian, type Note, type NoteFigure, type NoteSeverity, type NoteSubject, type WorkloadNotes } from '../../notes.js';
import { formatPercent } from '../../units.js';

/** Below this share of one CPU while writers run, a reader that fell behind was starved rather than slow. */
const STARVED_READER = 0.25;
/**
 * More than this share of the writes merged into earlier unread events says the reader fell
 * behind: the kernel merges an event only into an identical one still unread (inotify(7)), so a
 * reader that keeps up reads about one event per write.
 */
const BEHIND_COALESCED = 0.05;

const note = (kind: string, severity: NoteSeverity, text: string, figure: NoteFigure | null = null): Note => ({ kind, severity, text, figure });

/**
 * The same cell read by the raw inotify reader on the same machine: what a watcher library
 * delivered is measured against it. Parameters only the raw reader uses are ignored.
 */
function rawTwin(c: NoteSubject, all: readonly NoteSubject[]): NoteSubject | undefined {
  const ignore = new Set(['backend', 'bufferBytes', 'watch', 'mark', 'fanotifyReport', 'fanotifyUnlimitedQueue']);
  return all.find(
    (o) =>
      o.workload === c.workload &&
      o.machine === c.machine &&
      o.matrix === c.matrix &&
      o.params['backend'] === 'inotify' &&
      o.ok > 0 &&
      Object.entries(c.params).every(([k, v]) => ignore.has(k) || o.params[k] === v),
  );
}

function cellNotes(c: NoteSubject, all: readonly NoteSubject[]): Note[] {
  const notes: Note[] = [];
  const backend = String(c.params['backend']);
  // The native readers: fsbench's own inotify and fanotify loops, which see overflow and report their CPU.
  const native = backend === 'inotify' || backend === 'fanotify';
  const overflows = noteMedian(c, 'overflows');
  if (overflows !== null && overflows > 0) {
    const record = backend === 'fanotify' ? 'FAN_Q_OVERFLOW' : 'IN_Q_OVERFLOW';
    notes.push(
      note('overflow', 'warning', `${overflows} ${record} per run (median): the kernel dropped events; raise maxQueuedEvents or give the reader more CPU.`, {
        name: 'overflows',
        value: overflows,
      }),
    );
  }
  // Starved means behind for want of CPU: a reader that read every write (no overflow, hardly any
  // write merged) kept up, whatever its share of a CPU; one that fell behind on a full CPU is slow, not starved.
  const cpu = noteMedian(c, 'readerCpuFraction');
  const coalesced = noteMedian(c, 'coalescedFraction');
  const behind = (overflows !== null && overflows > 0) || (coalesced !== null && coalesced > BEHIND_COALESCED);
  if (cpu !== null && cpu < STARVED_READER && behind && native && c.params['mode'] === 'concurrent') {
    const lost = [...(overflows ? [`${overflows} overflows`] : []), ...(coalesced !== null && coalesced > BEHIND_COALESCED ? [`${formatPercent(coalesced)} of writes merged`] : [])];
    notes.push(
      note(
        'starved-reader',
        'warning',
        `the reader fell behind (${lost.join(', ')}) using only ${formatPercent(cpu)} of a CPU while the writers ran: it was starved, so the buffer size is not what limits throughput here (try readerNice or pin).`,
        { name: 'readerCpuFraction', value: cpu },
      ),
    );
  }
  if (noteMedian(c, 'drainTimedOut') === 1) notes.push(note('drain-timeout', 'warning', 'the drain hit drainTimeout; the queue was not empty.'));
  if (backend === 'fanotify') {
    // fanotify merges a write into any identical queued event, so its event rate is not inotify's.
    const twin = rawTwin(c, all);
    const wpe = noteMedian(c, 'writesPerEvent');
    const rawWpe = twin ? noteMedian(twin, 'writesPerEvent') : null;
    if (wpe !== null && wpe > 1.5) {
      notes.push(
        note(
          'fanotify-merge',
          'info',
          `fanotify merged ${wpe.toFixed(1)} writes into each event (median)${rawWpe !== null && twin ? `, inotify ${rawWpe.toFixed(1)} in ${twin.label}` : ''}: compare writes per event and writes/s, not event rates.`,
          { name: 'writesPerEvent', value: wpe },
        ),
      );
    }
  } else if (backend !== 'inotify') {
    const twin = rawTwin(c, all);
    const events = noteMedian(c, 'events');
    const rawEvents = twin ? noteMedian(twin, 'events') : null;
    const fraction = twin && events !== null && rawEvents ? events / rawEvents : null;
    const share =
      fraction !== null && twin
        ? ` It delivered ${formatPercent(fraction)} of the events the raw inotify reader got in ${twin.label}.`
        : ' Run the same cell with backend: inotify to see what it missed.';
    const figure = fraction === null ? null : { name: 'eventsOfRaw', value: fraction };
    // A watcher that says when it lost events (watchman's recrawls) is compared, not called silent.
    notes.push(
      overflows === null
        ? note('silent-loss', 'warning', `${backend} cannot report IN_Q_OVERFLOW (overflows shows as n/a): lost events are silent.${share}`, figure)
        : note('delivered', 'info', `${backend} reports its overflows.${share}`, figure),
    );
  }
  return notes;
}

export const inotifyNotes: WorkloadNotes = {
  cell: cellNotes,
  gist: {
    overflow: (r, cells) => {
      const fanotify = cells.filter((c) => c.params['backend'] === 'fanotify').length;
      const record = fanotify === 0 ? 'IN_Q_OVERFLOW' : fanotify === cells.length ? 'FAN_Q_OVERFLOW' : 'IN_Q_OVERFLOW or FAN_Q_OVERFLOW';
      return `the kernel dropped events (${record} per run, median: ${r}): raise maxQueuedEvents or give the reader more CPU.`;
    },
    'starved-reader': (r) =>
      `the reader fell behind using only ${r} of a CPU while the writers ran: it was starved, so the buffer size is not what limits throughput there (try readerNice or pin).`,
    'drain-timeout': () => 'the drain hit drainTimeout; the queue was not empty.',
    'fanotify-merge': (r) => `fanotify merged ${r} writes into each event (median): compare writes per event and writes/s, not event rates.`,
    'silent-loss': (r) =>
      `the watcher cannot report IN_Q_OVERFLOW (overflows shows as n/a): lost events are silent${r ? `; it delivered ${r} of the events the raw inotify reader got` : ''}.`,
    delivered: (r) => `the watcher reports its overflows${r ? `; it delivered ${r} of the events the raw inotify reader got` : ''}.`,
  },
  figures: { readerCpuFraction: 'percent', eventsOfRaw: 'percent', writesPerEvent: 'one-decimal' },
};
