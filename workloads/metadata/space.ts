/**
 * Free-space checks before any file is written. The image is sparse, the files are not: every
 * byte written inside the filesystem under test also lands in the scratch filesystem.
 */
import { statfs } from 'node:fs/promises';
import { FsbenchError } from '../../contract/errors.js';
import { formatAmount, formatSize } from '../../contract/units.js';
import type { MetadataParams } from './params.js';

/** Room for the journal/log and allocator slack the estimate below does not see. */
const SLACK_BYTES = 64 * 1024 ** 2;

function roundUp(n: number, to: number): number {
  return Math.ceil(n / to) * to;
}

const MiB = 1024 ** 2;

/** What mkfs writes into a sparse image besides the files: XFS zeroes its log (up to 2 GiB), ext4 its tables. */
export function mkfsBytes(fsSize: number): number {
  return 64 * MiB + Math.ceil(fsSize / 2048);
}

/** Bytes the files and directories take on a filesystem with `blockSize` blocks and `inodeSize` inodes. */
export function bytesNeeded(p: Pick<MetadataParams, 'dirs' | 'filesPerDir' | 'fileSize'>, blockSize: number, inodeSize: number): number {
  const files = p.dirs * p.filesPerDir;
  return files * (roundUp(p.fileSize, blockSize) + inodeSize) + p.dirs * blockSize;
}

/**
 * Refuses with NO_SPACE when the files cannot fit in the filesystem under test (`root`) or when
 * the scratch filesystem holding its image (`backing`, null for fs: none) cannot take them.
 */
export async function checkFreeSpace(p: MetadataParams, root: string, backing: string | null, inodeSize: number | null): Promise<void> {
  const inside = await statfs(root);
  const need = bytesNeeded(p, inside.bsize, inodeSize ?? 256);
  const shape = `${p.dirs} dirs x ${p.filesPerDir} files x ${formatSize(p.fileSize)}`;
  const free = inside.bavail * inside.bsize;
  if (free < need) {
    throw new FsbenchError(
      'NO_SPACE',
      `the files need about ${formatAmount(need)} (${shape}), but the ${p.fs === 'none' ? 'target' : `new ${p.fs}`} filesystem has ` +
        `${formatAmount(free)} free: ${p.fs === 'none' ? 'free some space' : 'raise fsSize'} or lower dirs, filesPerDir or fileSize`,
    );
  }
  const files = p.dirs * p.filesPerDir + p.dirs;
  // Filesystems with dynamic inodes (btrfs) report no inode counts at all.
  if (inside.files > 0 && inside.ffree < files) {
    throw new FsbenchError(
      'NO_SPACE',
      `the run makes ${files} files and directories but the filesystem has only ${inside.ffree} free inodes: raise fsSize or lower dirs or filesPerDir`,
    );
  }
  if (backing === null) return;
  const host = await statfs(backing);
  const hostFree = host.bavail * host.bsize;
  if (hostFree < need + SLACK_BYTES) {
    throw new FsbenchError(
      'NO_SPACE',
      `the sparse image grows by what the run writes, about ${formatAmount(need + SLACK_BYTES)}, but the scratch filesystem ` +
        `(${backing}) has ${formatAmount(hostFree)} free: free space there or lower dirs, filesPerDir or fileSize`,
    );
  }
}
