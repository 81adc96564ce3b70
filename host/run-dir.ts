/**
 * A run's own directory and its private tmpfs, made through the run's teardown: each journaled
 * before it exists, so whatever kills the run, the next start removes them. Shared by the
 * workloads that make their files in a directory of their own.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdir, realpath } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { FsbenchError, messageOf } from '../contract/errors.js';
import type { Teardown } from './teardown.js';

const exec = promisify(execFile);

/**
 * A fresh directory `fsbench-<label>-<hex>` directly inside `parent` (mode 0700), journaled
 * before it exists; its resolved path, which must still lie directly inside `parent`: whatever
 * symlinks appear meanwhile, what the run writes and later deletes stays inside it.
 */
export async function makeRunDirectory(teardown: Teardown, parent: string, label: string): Promise<string> {
  const dir = path.join(parent, `fsbench-${label}-${randomUUID().slice(0, 8)}`);
  await teardown.add({ kind: 'path', path: dir }, async () => {
    try {
      await mkdir(dir, { mode: 0o700 });
    } catch (err) {
      throw new FsbenchError('TARGET_UNUSABLE', `cannot create a directory in ${parent}: ${messageOf(err)}`);
    }
  });
  const real = await realpath(dir);
  if (path.dirname(real) !== (await realpath(parent))) throw new FsbenchError('TARGET_UNUSABLE', `${dir} resolves to ${real}, outside ${parent}`);
  return real;
}

/**
 * Mounts a private tmpfs (mode 0700) on `dir` with `options` (size=, nr_inodes=), journaled
 * before it exists. `instead` says what a user without CAP_SYS_ADMIN can ask for instead.
 */
export async function mountPrivateTmpfs(teardown: Teardown, dir: string, options: string, instead: string): Promise<void> {
  await teardown.add({ kind: 'mount', target: dir }, async () => {
    try {
      await exec('mount', ['-t', 'tmpfs', '-o', `${options},mode=0700`, 'fsbench', dir]);
    } catch (err) {
      const stderr = err instanceof Error && 'stderr' in err ? String(err.stderr).trim() : messageOf(err);
      throw new FsbenchError(
        /permission|not permitted|only root/i.test(stderr) ? 'PRIVILEGE_MISSING' : 'MOUNT_FAILED',
        `mounting a private tmpfs needs CAP_SYS_ADMIN (run as root, or use ${instead}): ${stderr}`,
      );
    }
  });
}
