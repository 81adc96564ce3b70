/**
 * Making the script's operations on the tree, and their log, the ground truth: each operation
 * on paths of its own (named after its index, in one of a few directories), prepared before the
 * watcher starts (the files it changes, renames or deletes, a subtree to remove, a file outside
 * to move in) and made when the schedule says, each path stamped with
 * process.hrtime.bigint() (CLOCK_MONOTONIC, the watchers' clock) right after its syscall returned.
 *
 * Synchronous calls on purpose: one syscall per step, nothing of libuv's thread pool between the
 * syscall and its time stamp.
 */
import { appendFileSync, chmodSync, closeSync, linkSync, mkdirSync, openSync, renameSync, rmSync, symlinkSync, truncateSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { OperationKind } from '../../contract/workloads/semantics/index.js';
import type { Truth } from './matching.js';
import type { PlannedOp } from './script.js';

/** Directories the operations share, so that a rename across has somewhere to go. */
const SHARED_DIRS = 4;
/** Files a `mkdir-then-files` makes inside its new directory. */
export const FILES_IN_NEW_DIR = 3;
/** Levels a `mkdir-p` makes. */
export const MKDIR_P_DEPTH = 4;

/** Entries an operation of each kind adds to the tree at most, its preparation included: the tmpfs is sized by it. */
export const ENTRIES_PER_OP: Readonly<Record<OperationKind, number>> = {
  create: 1,
  modify: 1,
  truncate: 1,
  attrib: 1,
  'rename-within': 1,
  'rename-across': 1,
  'move-out': 1,
  'move-in': 1,
  delete: 1,
  'atomic-replace': 2,
  'mkdir-then-files': 1 + FILES_IN_NEW_DIR,
  'mkdir-p': MKDIR_P_DEPTH,
  'rmdir-tree': 4,
  symlink: 2,
  hardlink: 2,
};

/** Directories an operation of each kind adds (watches a recursive watcher takes). */
export const DIRS_PER_OP: Readonly<Partial<Record<OperationKind, number>>> = { 'mkdir-then-files': 1, 'mkdir-p': MKDIR_P_DEPTH, 'rmdir-tree': 2 };

export class Layout {
  /** The watched tree. */
  readonly root: string;
  /** Beside it, unwatched: where moves out go and moves in come from. */
  readonly outside: string;
  constructor(runDir: string) {
    this.root = path.join(runDir, 'watched');
    this.outside = path.join(runDir, 'outside');
  }
  /** The shared directory operation `i` works in. */
  dir(i: number): string {
    return path.join(this.root, `d${i % SHARED_DIRS}`);
  }
  /** The directories of the tree before the script runs. */
  sharedDirs(): string[] {
    return Array.from({ length: SHARED_DIRS }, (_, i) => this.dir(i));
  }
}

const now = () => process.hrtime.bigint();
const name = (op: PlannedOp) => `${op.kind}-${op.index}`;

function touch(file: string): void {
  closeSync(openSync(file, 'wx', 0o644));
}

/** Makes the tree and what each operation needs before it runs; returns every directory, for the readiness markers. */
export function prepare(layout: Layout, ops: readonly PlannedOp[]): string[] {
  mkdirSync(layout.root);
  mkdirSync(layout.outside);
  const dirs = layout.sharedDirs();
  for (const d of dirs) mkdirSync(d);
  for (const op of ops) {
    const p = path.join(layout.dir(op.index), name(op));
    switch (op.kind) {
      case 'modify':
      case 'truncate':
      case 'atomic-replace':
        writeFileSync(p, 'before\n', { flag: 'wx' });
        break;
      case 'attrib':
      case 'rename-within':
      case 'rename-across':
      case 'move-out':
      case 'delete':
        touch(p);
        break;
      case 'move-in':
        touch(path.join(layout.outside, name(op)));
        break;
      case 'rmdir-tree':
        mkdirSync(path.join(p, 'sub'), { recursive: true });
        touch(path.join(p, 'f'));
        touch(path.join(p, 'sub', 'f'));
        dirs.push(p, path.join(p, 'sub'));
        break;
      case 'symlink':
      case 'hardlink':
        touch(`${p}.target`);
        break;
      case 'create':
      case 'mkdir-then-files':
      case 'mkdir-p':
        break;
    }
  }
  return dirs;
}

/** Makes one operation and returns its log entry. */
export function perform(layout: Layout, op: PlannedOp): Truth {
  const dir = layout.dir(op.index);
  const p = path.join(dir, name(op));
  const base = { index: op.index, kind: op.kind, step: 'op' as const };
  const beforeNs = now();
  const one = (extra: { source?: string } = {}): Truth => ({ ...base, ...extra, beforeNs, paths: [{ path: p, atNs: now() }] });
  switch (op.kind) {
    case 'create':
      touch(p);
      return one();
    case 'modify':
      appendFileSync(p, 'after\n');
      return one();
    case 'truncate':
      truncateSync(p, 0);
      return one();
    case 'attrib':
      chmodSync(p, 0o600);
      return one();
    case 'rename-within': {
      const to = `${p}.renamed`;
      renameSync(p, to);
      return { ...base, beforeNs, source: p, paths: [{ path: to, atNs: now() }] };
    }
    case 'rename-across': {
      const to = path.join(layout.dir(op.index + 1), `${name(op)}.moved`);
      renameSync(p, to);
      return { ...base, beforeNs, source: p, paths: [{ path: to, atNs: now() }] };
    }
    case 'move-out':
      renameSync(p, path.join(layout.outside, name(op)));
      return one();
    case 'move-in':
      renameSync(path.join(layout.outside, name(op)), p);
      return one();
    case 'delete':
      unlinkSync(p);
      return one();
    case 'atomic-replace': {
      // As an editor saves: the new content in a temporary file beside it, renamed over it.
      const tmp = path.join(dir, `.${name(op)}.tmp`);
      writeFileSync(tmp, 'replaced\n', { flag: 'wx' });
      renameSync(tmp, p);
      return one({ source: tmp });
    }
    case 'mkdir-then-files': {
      mkdirSync(p);
      const paths = [{ path: p, atNs: now() }];
      for (let f = 0; f < FILES_IN_NEW_DIR; f++) {
        const file = path.join(p, `f${f}`);
        touch(file);
        paths.push({ path: file, atNs: now() });
      }
      return { ...base, beforeNs, paths };
    }
    case 'mkdir-p': {
      const levels = Array.from({ length: MKDIR_P_DEPTH }, (_, l) => path.join(p, ...Array.from({ length: l }, (_x, j) => `l${j + 1}`)));
      mkdirSync(levels[levels.length - 1] ?? p, { recursive: true });
      const at = now();
      return { ...base, beforeNs, paths: levels.map((level) => ({ path: level, atNs: at })) };
    }
    case 'rmdir-tree': {
      rmSync(p, { recursive: true });
      const at = now();
      const entries = [path.join(p, 'sub', 'f'), path.join(p, 'sub'), path.join(p, 'f'), p];
      return { ...base, beforeNs, paths: entries.map((e) => ({ path: e, atNs: at })) };
    }
    case 'symlink':
      symlinkSync(`${name(op)}.target`, p);
      return one();
    case 'hardlink':
      linkSync(`${p}.target`, p);
      return one({ source: `${p}.target` });
  }
}

/** The later change an operation is checked with (the append after an atomic replace), or null. */
export function performAfter(layout: Layout, op: PlannedOp): Truth | null {
  if (op.kind !== 'atomic-replace') return null;
  const p = path.join(layout.dir(op.index), name(op));
  const beforeNs = now();
  appendFileSync(p, 'and after\n');
  return { index: op.index, kind: op.kind, step: 'after', beforeNs, paths: [{ path: p, atNs: now() }] };
}
