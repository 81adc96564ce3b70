/**
 * The tree a run watches: a private tmpfs sized for it, or a fresh directory on the scratch
 * directory's filesystem, made through the teardown (journaled before it exists) and filled by
 * the native builder.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdir, realpath } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { FsbenchError, messageOf } from '../../contract/errors.js';
import { filesystemType } from '../../host/kernel.js';
import type { Teardown } from '../../host/journal.js';
import { runWatchesNative, BuildOutput } from './native.js';

const exec = promisify(execFile);

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
  const scratch = await realpath(scratchDir);
  const dir = path.join(scratch, `fsbench-watches-${randomUUID().slice(0, 8)}`);
  await teardown.add({ kind: 'path', path: dir }, async () => {
    try {
      await mkdir(dir, { mode: 0o700 });
    } catch (err) {
      throw new FsbenchError('TARGET_UNUSABLE', `cannot create a directory in ${scratch}: ${messageOf(err)}`);
    }
  });
  if (p.target === 'tmpfs') {
    // Inodes for every entry and the markers; the files are empty, so pages are few.
    const inodes = p.dirs * (p.filesPerDir + 1) + 1024;
    await teardown.add({ kind: 'mount', target: dir }, async () => {
      try {
        await exec('mount', ['-t', 'tmpfs', '-o', `size=64m,nr_inodes=${inodes},mode=0700`, 'fsbench', dir]);
      } catch (err) {
        const stderr = err instanceof Error && 'stderr' in err ? String(err.stderr).trim() : messageOf(err);
        throw new FsbenchError(
          /permission|not permitted|only root/i.test(stderr) ? 'PRIVILEGE_MISSING' : 'MOUNT_FAILED',
          `mounting a private tmpfs needs CAP_SYS_ADMIN (run as root, or use target: scratch): ${stderr}`,
        );
      }
    });
  }
  const argv = ['--root', dir, '--dirs', String(p.dirs), '--fanout', String(p.fanout), '--files', String(p.filesPerDir)];
  const build = BuildOutput.parse(await runWatchesNative('build', argv, signal));
  return { root: dir, fsType: filesystemType(dir), build };
}
