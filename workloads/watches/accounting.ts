/**
 * Where a run reads the kernel memory its watches cost. The kernel's own accounting, in order of
 * precision (docs/watches.md, "Kernel memory per watch"):
 *
 * 1. a fresh child memory cgroup of this process's own, which the watcher joins before it creates
 *    its inotify instance or fanotify group: the kernel charges each mark to the cgroup its group
 *    was created in, so the cgroup's kernel counter (v2 `memory.stat` `kernel`, v1
 *    `memory.kmem.usage_in_bytes`, page-exact) moves by what the watcher's setup costs and
 *    nothing else. Allocations the kernel charges to no cgroup (the per-inode mark connector,
 *    the watch-descriptor radix tree) are not in it.
 * 2. `/proc/meminfo` `SUnreclaim`: everything unreclaimable the whole host allocated meanwhile,
 *    connectors included, with other processes' allocations mixed in (noisy on small trees).
 *
 * The marks' own slab cache would be the plainest figure, but kernels merge it into a generic
 * cache of the same object size (here `inotify_inode_mark` is an alias of `:A-0000080`, shared
 * with `fanotify_mark`), so its object count is not the watcher's alone; `markCache` records
 * which it is on the host. Every run records `SUnreclaim` as well, whatever the method.
 *
 * The child cgroup is journaled (kind `cgroup`) before it exists and removed by the teardown.
 */
import { randomUUID } from 'node:crypto';
import { access, lstat, mkdir, readFile, readlink } from 'node:fs/promises';
import path from 'node:path';
import { messageOf } from '../../contract/errors.js';
import type { Teardown } from '../../host/teardown.js';
import { readMounts } from '../../host/kernel.js';

export type AccountingMethod = 'memcg-v2' | 'memcg-v1' | 'meminfo';

export interface Accounting {
  readonly method: AccountingMethod;
  /** The child cgroup the watcher joins, when the method is a memory cgroup. */
  readonly cgroup: string | null;
  /** The file holding the cgroup's kernel memory, and the key of its line (null: the whole file is the number). */
  readonly file: string | null;
  readonly key: string | null;
  /** Why no memory cgroup was used, when none was. */
  readonly fallback: string | null;
}

const MEMINFO = (fallback: string): Accounting => ({ method: 'meminfo', cgroup: null, file: null, key: null, fallback });

/**
 * A number from a kernel accounting file, in bytes: the whole file, or the line starting with
 * `key` and a space or colon ("kB" scaled); null where the file or the line is missing.
 * native/watches.c reads the same way (read_counter).
 */
export function parseCounter(text: string, key: string | null): number | null {
  for (const line of text.split('\n')) {
    let rest = line;
    if (key !== null) {
      if (!line.startsWith(key) || (line[key.length] !== ' ' && line[key.length] !== ':')) continue;
      rest = line.slice(key.length + 1);
    }
    const m = /^\s*(\d+)\s*(kB)?/.exec(rest);
    if (!m?.[1]) return null;
    return Number(m[1]) * (m[2] === 'kB' ? 1024 : 1);
  }
  return null;
}

export async function readCounter(file: string, key: string | null): Promise<number | null> {
  return parseCounter(await readFile(file, 'utf8').catch(() => ''), key);
}

/** How the kernel keeps the inotify mark cache: its own, or merged into a generic one (and which). */
export async function markCache(): Promise<string> {
  const link = '/sys/kernel/slab/inotify_inode_mark';
  const st = await lstat(link).catch(() => null);
  if (st === null) return 'not visible (no /sys/kernel/slab)';
  if (!st.isSymbolicLink()) return 'own cache inotify_inode_mark';
  const target = path.basename(await readlink(link));
  const size = (await readFile(path.join('/sys/kernel/slab', target, 'object_size'), 'utf8').catch(() => '?')).trim();
  return `merged into ${target} (${size}-byte objects)`;
}

/** This process's cgroup path in the hierarchy holding the memory controller: v2 ("0::/x") or v1 ("N:...memory...:/x"). */
async function ownCgroups(): Promise<{ v2: string | undefined; v1: string | undefined }> {
  const text = await readFile('/proc/self/cgroup', 'utf8').catch(() => '');
  const v2 = /^0::(\/.*)$/m.exec(text)?.[1];
  const v1 = /^\d+:(?:[\w,]*,)?memory(?:,[\w,]*)?:(\/.*)$/m.exec(text)?.[1];
  return { v2, v1 };
}

/** Makes `parent`/fsbench-<hex>, journaled first; undefined (and nothing left behind) when the kernel refuses. */
async function childCgroup(teardown: Teardown, parent: string): Promise<{ dir: string } | { refused: string }> {
  const dir = path.join(parent, `fsbench-${randomUUID().replace(/-/g, '').slice(0, 12)}`);
  try {
    await teardown.add({ kind: 'cgroup', path: dir }, () => mkdir(dir));
    return { dir };
  } catch (err) {
    // The entry stays on the teardown, whose undo finds nothing to remove.
    return { refused: `cannot make a cgroup in ${parent}: ${messageOf(err)}` };
  }
}

/**
 * The best method this host allows for `wanted` (`meminfo` forces the host-wide figure). Making
 * the cgroup is the only change; a host that refuses it (read-only cgroupfs in a container, no
 * memory controller delegated) falls back to /proc/meminfo, and the run records why.
 */
export async function prepareAccounting(teardown: Teardown, wanted: 'auto' | 'meminfo'): Promise<Accounting> {
  if (wanted === 'meminfo') return MEMINFO('accounting: meminfo asked for the host-wide figure');
  const mounts = await readMounts();
  const own = await ownCgroups();
  const v2 = mounts.find((m) => m.type === 'cgroup2');
  if (v2 && own.v2 !== undefined) {
    const parent = path.join(v2.point, own.v2);
    // The child gets the memory controller only when this cgroup hands it down.
    const handed = (await readFile(path.join(parent, 'cgroup.subtree_control'), 'utf8').catch(() => '')).split(/\s+/).includes('memory');
    if (handed) {
      const child = await childCgroup(teardown, parent);
      if ('dir' in child) {
        const stat = await readFile(path.join(child.dir, 'memory.stat'), 'utf8').catch(() => '');
        const key = parseCounter(stat, 'kernel') !== null ? 'kernel' : parseCounter(stat, 'slab') !== null ? 'slab' : null;
        if (key !== null) return { method: 'memcg-v2', cgroup: child.dir, file: path.join(child.dir, 'memory.stat'), key, fallback: null };
      }
    }
  }
  const v1 = mounts.find((m) => m.type === 'cgroup' && m.options.split(',').includes('memory'));
  if (v1 && own.v1 !== undefined) {
    const parent = path.join(v1.point, own.v1);
    const kmem = 'memory.kmem.usage_in_bytes';
    if (await access(path.join(parent, kmem)).then(() => true, () => false)) {
      const child = await childCgroup(teardown, parent);
      if ('refused' in child) return MEMINFO(child.refused);
      if ((await readCounter(path.join(child.dir, kmem), null)) !== null) {
        return { method: 'memcg-v1', cgroup: child.dir, file: path.join(child.dir, kmem), key: null, fallback: null };
      }
    }
  }
  return MEMINFO('no memory cgroup with kernel memory accounting could be made here');
}
