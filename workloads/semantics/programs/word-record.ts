/**
 * The records of the programs that print `WORDS PATH` (inotifywait's `%e %w%f`, fswatch's
 * `%f %p`): the event's names joined by commas, which never hold a space, then the path, which
 * may hold anything but the NUL that ends the record. The first name in `kinds` found among the
 * record's names gives its kind; names that say no change (ISDIR, IsFile) give no event.
 */
import type { z } from 'zod';
import type { ChangeKind, WatchEvent } from '../../../contract/workloads/semantics/events.js';
import { MAX_PROGRAM_PATH } from '../../../contract/workloads/semantics/program-output.js';
import type { RunningWatcher, WatcherAdapter } from '../watcher.js';
import type { ProgramOptions } from './options.js';
import { debianPackage, startProgram } from '../../../host/watcher-program.js';
import { pathInRoot, watchedRoot } from './reported-path.js';

export function parseWordRecord<W extends string>(
  words: z.ZodType<W>,
  kinds: readonly (readonly [W, ChangeKind])[],
  root: string,
  record: string,
  atNs: bigint,
): WatchEvent[] {
  const space = record.indexOf(' ');
  if (space <= 0) throw new Error('no event names before a space');
  const names = record.slice(0, space).split(',').map((w) => words.parse(w));
  const kind = kinds.find(([name]) => names.includes(name))?.[1];
  if (kind === undefined) return [];
  // An overflow is the whole watch's loss: the kernel's names no watch, so no path.
  if (kind === 'overflow') return [{ kind, path: root, atNs }];
  return [{ kind, path: pathInRoot(root, record.slice(space + 1)), atNs }];
}

export interface WordRecordProgram<W extends string> {
  readonly backend: string;
  readonly file: string;
  readonly pkg: string;
  /** Its command line for a root, printing `WORDS PATH` records each ended by NUL. */
  readonly args: (root: string) => string[];
  readonly words: z.ZodType<W>;
  readonly kinds: readonly (readonly [W, ChangeKind])[];
  /** What it prints on stderr once its watches are in place, where it says so. */
  readonly readyOnStderr?: RegExp;
}

/** The adapter of a program printing `WORDS PATH` records. */
export function wordRecordAdapter<W extends string>(p: WordRecordProgram<W>, options: ProgramOptions): WatcherAdapter {
  return {
    name: p.backend,
    async start(rootGiven, onEvent, signal): Promise<RunningWatcher> {
      const root = watchedRoot(rootGiven);
      const program = await startProgram(
        { backend: p.backend, file: p.file, args: p.args(root), remedy: debianPackage(p.pkg), separator: 0x00, maxRecordBytes: MAX_PROGRAM_PATH + 256, path: options.path },
        (record, atNs) => parseWordRecord(p.words, p.kinds, root, record, atNs),
        onEvent,
        signal,
      );
      // A program that says nothing when its watches are in place: the workload's markers tell.
      if (p.readyOnStderr !== undefined) await program.stderrMatch(p.readyOnStderr);
      return { stop: () => program.stop() };
    },
  };
}
