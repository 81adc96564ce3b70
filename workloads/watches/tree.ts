/**
 * The tree a run watches: a private tmpfs sized for it, or a fresh directory on the scratch
 * directory's filesystem, made through the teardown (journaled before it exists) and filled by
 * the native builder.
 */
import { realpath } from 'node:fs/promises';
import { filesystemType } from '../../host/kernel.js';
import type { Teardown } from '../../host/teardown.js';
import { makeRunDirectory, mountPrivateTmpfs } from '../../host/run-dir.js';
import { runWatchesNative, BuildOutput } from './native.js';

/**
 * What a tree costs in memory on tmpfs: inodes and dentries (about 1 KiB an entry on x86-64,
 * counted generously), which tmpfs's `size=` does not bound: `nr_inodes=` does. The host budget
 * sizes memory by it.
 */
export function treeMemoryBytes(dirs: number, filesPerDir: number): number {
  return 16 * 1024 ** 2 + dirs * (filesPerDir + 1) * 1536;
}

export interface Tree {
  readonly root: string;
  readonly fsType: string | null;
  readonly build: BuildOutput;
}

export async function prepareTree(
  teardown: Teardown,
  p: { readonly target: 'tmpfs' | 'scratch'; readonly dirs: number; readonly fanout: number; readonly filesPerDir: number },
  scratchDir: string,
  signal: AbortSignal,
): Promise<Tree> {
  const dir = await makeRunDirectory(teardown, await realpath(scratchDir), 'watches');
  // Inodes for every entry and the markers; the files are empty, so pages are few.
  if (p.target === 'tmpfs') await mountPrivateTmpfs(teardown, dir, `size=64m,nr_inodes=${p.dirs * (p.filesPerDir + 1) + 1024}`, 'target: scratch');
  const argv = ['--root', dir, '--dirs', String(p.dirs), '--fanout', String(p.fanout), '--files', String(p.filesPerDir)];
  const build = BuildOutput.parse(await runWatchesNative('build', argv, signal));
  return { root: dir, fsType: filesystemType(dir), build };
}
