/**
 * Cold caches between phases. A full `sync` comes first, because the loop device's backing file
 * holds a second copy of every block in the host's page cache, and only clean pages are dropped:
 * syncing the filesystem under test alone would leave reads served from that copy.
 */
import { writeFile } from 'node:fs/promises';
import { errnoOf, FsbenchError, messageOf } from '../../contract/errors.js';
import { command } from './command.js';

const DROP_CACHES = '/proc/sys/vm/drop_caches';

/** Writes back everything dirty, then drops the page cache, dentries and inodes; returns the ms it took. */
export async function dropCaches(): Promise<number> {
  const start = performance.now();
  const sync = await command('sync', []);
  if (!sync.ok) throw new FsbenchError('WORKLOAD_FAILED', `sync failed before dropping caches: ${sync.output}`);
  try {
    await writeFile(DROP_CACHES, '3');
  } catch (err) {
    const code = errnoOf(err);
    throw new FsbenchError(
      code === 'EACCES' || code === 'EPERM' || code === 'EROFS' ? 'PRIVILEGE_MISSING' : 'WORKLOAD_FAILED',
      `cache: cold needs to write ${DROP_CACHES} (root, and in a container a writable /proc/sys, e.g. ` +
        `security_opt systempaths=unconfined); use cache: warm to measure without dropping caches ` +
        `(${messageOf(err)})`,
    );
  }
  return performance.now() - start;
}
