/**
 * Reading and changing the kernel limits fsbench may touch (KNOWN_SYSCTLS): each change is
 * journaled with its original value before it is made, and undone by the run's teardown, also
 * after a crash (by the next start's journal recovery). Shared by the workloads that set limits.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { errnoOf, FsbenchError, messageOf } from '../contract/errors.js';
import type { KnownSysctl } from './journal-entry.js';
import type { Teardown } from './teardown.js';

/** The number a /proc/sys file holds (LIMIT_WRITE_FAILED when it holds anything else). */
export async function readSysctl(file: KnownSysctl): Promise<number> {
  const text = (await readFile(file, 'utf8')).trim();
  if (!/^\d{1,12}$/.test(text)) throw new FsbenchError('LIMIT_WRITE_FAILED', `${file} reads '${text}', not a number`);
  return Number(text);
}

/** Journals the current value, then writes `value`; PRIVILEGE_MISSING where /proc/sys is not writable. */
export async function setSysctl(teardown: Teardown, file: KnownSysctl, value: number): Promise<void> {
  const original = await readFile(file, 'utf8');
  await teardown.add({ kind: 'sysctl', path: file, original }, async () => {
    try {
      await writeFile(file, `${value}\n`);
    } catch (err) {
      const code = errnoOf(err);
      const privilege = code === 'EACCES' || code === 'EPERM' || code === 'EROFS';
      throw new FsbenchError(
        privilege ? 'PRIVILEGE_MISSING' : 'LIMIT_WRITE_FAILED',
        privilege
          ? `setting ${file} to ${value} needs root with a writable /proc/sys (in a container: security_opt systempaths=unconfined); ` +
            'the cell was not measured rather than measured under a different limit'
          : `could not write ${value} to ${file}: ${messageOf(err)}`,
      );
    }
  });
}
