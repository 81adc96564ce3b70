/**
 * The filesystem under test: a sparse image under the scratch directory, made by mkfs and
 * loop-mounted, or (fs: none) a fresh directory on an existing filesystem. Everything is created
 * through the teardown, journaled before it exists.
 *
 * The image is mounted with `mount -o loop`, which attaches the loop device with autoclear: the
 * unmount detaches it. So the journal holds only the mount and the directory, each written down
 * before it exists, and no window remains in which a loop device exists that the journal does not
 * know, or names a device another process may have taken.
 */
import { lstat, mkdir, open, realpath, statfs } from 'node:fs/promises';
import path from 'node:path';
import { errnoOf, FsbenchError, messageOf } from '../../contract/errors.js';
import { formatSize } from '../../contract/units.js';
import { filesystemType, readMounts, type Mount } from '../../host/kernel.js';
import type { Teardown } from '../../host/teardown.js';
import { makeRunDirectory } from '../../host/run-dir.js';
import { resolveAllowedTarget } from '../../host/safe-dir.js';
import { command } from './command.js';
import { btrfsGeometry, ext4Geometry, NO_GEOMETRY, xfsGeometry, type Geometry } from './geometry.js';
import { makeFilesystem } from './mkfs.js';
import type { MetadataParams } from './params.js';
import { ensureFreeLoopDevice, kernelLogMark, kernelLogSince } from './loop.js';

export interface TestFilesystem {
  /** The directory the files go in. */
  readonly root: string;
  readonly fsType: string | null;
  /** Where the sparse image lives (null for fs: none): the files' bytes land there too. */
  readonly imageDir: string | null;
  readonly geometry: Geometry;
  readonly info: Readonly<Record<string, string | number | boolean>>;
}


/**
 * The scratch directory's real path. It exists: opening the journal made it, after checking that
 * only root (or this user) controls it (host/safe-dir.ts).
 */
async function realScratch(scratchDir: string): Promise<string> {
  return realpath(scratchDir);
}

/** Creates the sparse image: only what mkfs and the files write takes space. */
async function createImage(image: string, bytes: number): Promise<void> {
  const handle = await open(image, 'wx', 0o600);
  try {
    await handle.truncate(bytes);
  } catch (err) {
    const code = errnoOf(err);
    if (code === 'EFBIG' || code === 'EINVAL') {
      throw new FsbenchError(
        'FS_REFUSED',
        `the scratch filesystem (${filesystemType(image) ?? 'unknown'}) does not allow a ${formatSize(bytes)} file for the image: lower fsSize (${messageOf(err)})`,
      );
    }
    throw new FsbenchError(code === 'ENOSPC' ? 'NO_SPACE' : 'TARGET_UNUSABLE', `cannot create the image ${image}: ${messageOf(err)}`);
  } finally {
    await handle.close();
  }
  const st = await lstat(image);
  if (!st.isFile()) throw new FsbenchError('TARGET_UNUSABLE', `${image} is not a regular file`);
}

function mountFailure(stderr: string, kernel: readonly string[], p: MetadataParams, options: string): FsbenchError {
  const tool = (kernel.length > 0 ? stderr.replace(/\s*dmesg\(1\) may have more information.*$/m, '') : stderr).replace(/\s*\n\s*/g, ' ');
  // One line, so that summaries and logs can show it as it is.
  const said = [tool, ...kernel.map((l) => `kernel: ${l}`)].join(' / ');
  if (/loop device|loop-control|free loop/i.test(stderr)) {
    return new FsbenchError('LOOP_UNAVAILABLE', `no loop device could be attached to the image: ${said}`);
  }
  if (/permission denied|must be superuser|not permitted|only root/i.test(stderr)) {
    return new FsbenchError('PRIVILEGE_MISSING', `mounting the image needs root with CAP_SYS_ADMIN: ${said}`);
  }
  if (/wrong fs type|bad option|bad superblock|unknown filesystem|invalid argument/i.test(stderr)) {
    const v4 = kernel.some((l) => /V4 format|crc=0/i.test(l)) || (p.fs === 'xfs' && p.mkfsOptions.includes('crc=0'));
    const why = v4
      ? 'mkfsOptions crc=0 makes the old V4 XFS format, which this kernel (built without CONFIG_XFS_SUPPORT_V4) refuses to mount.'
      : `the kernel refused to mount ${p.fs} with options '${options}'${kernel.length === 0 ? ' (the kernel log was not readable)' : ''}.`;
    return new FsbenchError('FS_REFUSED', `mount refused the new filesystem: "${said}". ${why}`);
  }
  return new FsbenchError('MOUNT_FAILED', `mount failed: ${said}`);
}

/** The mount's line in /proc/mounts: what the kernel actually applied. */
async function mountEntry(target: string): Promise<Mount | undefined> {
  return (await readMounts()).find((m) => m.point === target);
}

async function mountImage(teardown: Teardown, p: MetadataParams, image: string, mnt: string): Promise<Record<string, string>> {
  await mkdir(mnt, { mode: 0o700 });
  await ensureFreeLoopDevice();
  const options = ['loop', ...p.mountOptions].join(',');
  await teardown.add({ kind: 'mount', target: mnt }, async () => {
    const logStart = await kernelLogMark();
    const r = await command('mount', ['-t', p.fs, '-o', options, image, mnt]);
    if (r.ok) return;
    if (r.missing) throw new FsbenchError('MOUNT_FAILED', 'mount is not installed (Debian package mount)');
    throw mountFailure(r.output, await kernelLogSince(logStart), p, p.mountOptions.join(','));
  });
  const entry = await mountEntry(mnt);
  if (entry?.type !== p.fs) {
    throw new FsbenchError('MOUNT_FAILED', `${mnt} is not mounted as ${p.fs} after mount succeeded (${entry?.type ?? 'not mounted'})`);
  }
  return { loopDevice: entry.source, mountOptionsApplied: entry.options };
}

async function geometryOf(p: MetadataParams, image: string): Promise<Geometry> {
  switch (p.fs) {
    case 'xfs':
      return xfsGeometry(image, p.mountOptions.includes('inode32'));
    case 'ext4':
      return ext4Geometry(image);
    case 'btrfs':
      return btrfsGeometry(image);
    case 'none':
      return NO_GEOMETRY;
  }
}

/**
 * An existing directory for fs: none, resolved and checked against the journal's roots (the
 * scratch directory and FSBENCH_ALLOWED_TARGETS), with the run's own subdirectory in it: the
 * resolved path that was checked is the one the run uses. The native loop opens the run
 * directory without following symlinks and only if this user owns it (native/metadata.c).
 */
async function existingTarget(teardown: Teardown, p: MetadataParams, scratch: string): Promise<TestFilesystem> {
  const parent = p.target === 'scratch' ? scratch : await resolveAllowedTarget(p.target, teardown.journal.allowedRoots);
  const root = await makeRunDirectory(teardown, parent, 'metadata');
  const fsType = filesystemType(root);
  const geometry = { ...NO_GEOMETRY, blockSize: (await statfs(root)).bsize };
  return { root, fsType, imageDir: null, geometry, info: { fs: 'none', targetFs: fsType ?? 'unknown' } };
}

/**
 * Builds the filesystem a cell asks for and returns where to put the files. Throws before any
 * file is written when mkfs, the loop driver or the kernel refuse.
 */
export async function prepareFilesystem(
  teardown: Teardown,
  p: MetadataParams,
  scratchDir: string,
  checkAborted: () => void,
): Promise<TestFilesystem> {
  const scratch = await realScratch(scratchDir);
  if (p.fs === 'none') return existingTarget(teardown, p, scratch);
  const runDir = await makeRunDirectory(teardown, scratch, 'metadata');
  const image = path.join(runDir, 'image');
  await createImage(image, p.fsSize);
  checkAborted();
  const mkfsCommand = await makeFilesystem(p.fs, p, image);
  const geometry = await geometryOf(p, image);
  checkAborted();
  const mnt = path.join(runDir, 'mnt');
  const mounted = await mountImage(teardown, p, image, mnt);
  return {
    root: mnt,
    fsType: p.fs,
    imageDir: runDir,
    geometry,
    info: { fs: p.fs, mkfsCommand, ...mounted, ...geometry.info },
  };
}
