/** The directory a run's files live in: a private tmpfs, or a fresh subdirectory of a path. */
import { filesystemType } from '../../host/kernel.js';
import type { Teardown } from '../../host/teardown.js';
import { makeRunDirectory, mountPrivateTmpfs } from '../../host/run-dir.js';
import { resolveAllowedTarget } from '../../host/safe-dir.js';

/**
 * The size of a run's private tmpfs: files never grow (writes at offset 0), so each needs its
 * write rounded up to a page, with as much again for slack. The host check sizes memory by it.
 */
export function tmpfsBytes(files: number, writeBytes: number): number {
  return Math.max(16 * 1024 ** 2, files * Math.max(4096, writeBytes) * 2);
}

export interface Target {
  readonly dir: string;
  readonly fsType: string | null;
}

/**
 * Creates the run directory; everything it creates is undone by the teardown. A `target` path
 * is resolved (symlinks followed) and checked against the journal's roots (the scratch directory
 * and FSBENCH_ALLOWED_TARGETS) here, and the resolved path is what the run then uses: the path
 * that was checked, not one a symlink could later lead elsewhere. The probe opens the run
 * directory without following symlinks and only if this user owns it (native/probe.c).
 */
export async function prepareTarget(
  teardown: Teardown,
  target: string,
  scratchDir: string,
  sizeBytes: number,
): Promise<Target> {
  // The scratch directory was checked when the journal was opened (host/safe-dir.ts): only root controls it.
  const parent = target === 'tmpfs' ? scratchDir : await resolveAllowedTarget(target, teardown.journal.allowedRoots);
  const dir = await makeRunDirectory(teardown, parent, 'inotify');
  if (target === 'tmpfs') await mountPrivateTmpfs(teardown, dir, `size=${Math.max(16 * 1024 ** 2, sizeBytes)}`, 'target: /some/directory');
  return { dir, fsType: filesystemType(dir) };
}
