/**
 * The semantics workload's notes, said plainly per cell: the renames a watcher reports as some
 * other change ("chokidar reported 0 of 500 renames within a directory as renames"), the
 * operations it missed (listed in each run's info), the changes it never heard after its watch
 * went deaf, and the kernel's overflows, so a loss is told apart from the watcher's own. Each
 * reads the medians of one cell.
 */
import { noteMedian, type Note, type NoteSubject, type WorkloadNotes } from '../../notes.js';
import { kindsOf, perKindMetric, type OperationKind } from './index.js';

/** How a kind reads in a sentence, for the kinds a reader would not parse from the name. */
const SPOKEN: Partial<Record<OperationKind, string>> = {
  'rename-within': 'renames within a directory',
  'rename-across': 'renames across directories',
  'move-out': 'moves out of the tree',
  'move-in': 'moves into the tree',
  'atomic-replace': 'atomic replaces',
  'mkdir-then-files': 'new directories with files made at once',
  'mkdir-p': '`mkdir -p` of a deep path',
  'rmdir-tree': 'recursive deletes',
  attrib: 'attribute changes',
};
const spoken = (k: OperationKind) => SPOKEN[k] ?? `${k}s`;

const RENAMES: readonly OperationKind[] = ['rename-within', 'rename-across'];

const count = (n: number) => Math.round(n).toLocaleString('en-US');

function cellNotes(c: NoteSubject): Note[] {
  const notes: Note[] = [];
  const backend = String(c.params['backend']);
  const perKind = typeof c.params['perKind'] === 'number' ? c.params['perKind'] : 0;
  const kinds = kindsOf(c.params['kinds']);
  const recallOf = (k: OperationKind) => noteMedian(c, perKindMetric('recall', k));

  for (const k of RENAMES.filter((r) => kinds.includes(r))) {
    const recall = recallOf(k);
    const wrong = noteMedian(c, perKindMetric('wrong_kind', k));
    if (recall === null || recall >= 0.5 || wrong === null || wrong === 0) continue;
    const each = wrong / perKind;
    notes.push({
      kind: 'rename-as-other',
      severity: 'info',
      text:
        `${backend} reported ${count(recall * perKind)} of ${count(perKind)} ${spoken(k)} as renames: ` +
        `it gives ${each >= 1.5 ? `${each.toFixed(0)} events of other kinds for each` : 'an event of another kind instead'} (a deletion and a creation, or "something changed"), so a consumer cannot tell a rename from a new file.`,
      figure: { name: perKindMetric('recall', k), value: recall },
    });
  }

  const missed = kinds.flatMap((k) => {
    const recall = recallOf(k);
    return recall === null || recall >= 1 ? [] : [`${spoken(k)} ${count((1 - recall) * perKind)} of ${count(perKind)}`];
  });
  if (missed.length > 0) {
    notes.push({
      kind: 'missed',
      severity: 'warning',
      text: `${backend} did not report with the right kind: ${missed.join(', ')} (median of the runs); each run's info lists the operations (missedOps) and its seed makes the same script again.`,
      figure: { name: 'recall', value: noteMedian(c, 'recall') ?? 0 },
    });
  }

  const deaf = noteMedian(c, 'deafAfter');
  const checks = noteMedian(c, 'deafChecks');
  if (deaf !== null && deaf > 0) {
    notes.push({
      kind: 'deaf',
      severity: 'warning',
      text: `${backend} went deaf: ${count(deaf)} of ${count(checks ?? 0)} later changes (an append after an atomic replace, files in a new directory whose creation it reported) were never reported.`,
      figure: { name: 'deafAfter', value: deaf },
    });
  }

  const overflows = noteMedian(c, 'overflows');
  if (overflows !== null && overflows > 0) {
    notes.push({
      kind: 'overflow',
      severity: 'warning',
      text: `${count(overflows)} overflow events per run (median): the kernel dropped events, so what went missing here is the kernel's loss, not the watcher's.`,
      figure: { name: 'overflows', value: overflows },
    });
  }
  return notes;
}

export const semanticsNotes: WorkloadNotes = {
  cell: (c) => cellNotes(c),
  gist: {
    'rename-as-other': (r) => `renames were reported as other kinds of change, not as renames${r ? ` (recall of renames ${r})` : ''}.`,
    missed: (r) => `operations went unreported with the right kind${r ? ` (recall ${r})` : ''}; each run's info lists them (missedOps).`,
    deaf: (r) => `the watcher went deaf after an atomic replace or in a new directory${r ? ` (${r} changes never reported)` : ''}.`,
    overflow: (r) => `the kernel dropped events${r ? ` (${r} overflows per run)` : ''}: those losses are the kernel's.`,
  },
  figures: { recall: 'percent', ...Object.fromEntries(RENAMES.map((k) => [perKindMetric('recall', k), 'percent'] as const)) },
};
