/**
 * The geometry a filesystem was made with, read back from the image by the filesystem's own tool
 * before it is mounted: what mkfs actually chose, not what was asked for.
 */
import { FsbenchError } from '../../contract/errors.js';
import { command } from './command.js';

export interface Geometry {
  readonly inodeSize: number | null;
  readonly blockSize: number | null;
  readonly agCount: number | null;
  readonly agSizeBlocks: number | null;
  /** XFS: inode numbers are `agno << agInoShift | agino`, so `ino >> agInoShift` is the inode's AG. */
  readonly agInoShift: number | null;
  /** XFS: bits of the largest inode number the geometry allows. */
  readonly inodeNumberBits: number | null;
  /** Non-numeric facts for the result's `info`. */
  readonly info: Readonly<Record<string, string | number | boolean>>;
}

const MAX_32_BIT_INODE = 2 ** 32 - 1;

export const NO_GEOMETRY: Geometry = {
  inodeSize: null,
  blockSize: null,
  agCount: null,
  agSizeBlocks: null,
  agInoShift: null,
  inodeNumberBits: null,
  info: {},
};

/** `key = value` or `key: value` lines into a map (xfs_db, dumpe2fs, btrfs dump-super). */
function fields(text: string, separator: RegExp): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split('\n')) {
    const m = separator.exec(line);
    if (m?.[1] !== undefined && m[2] !== undefined) out.set(m[1].trim(), m[2].trim());
  }
  return out;
}

function int(map: Map<string, string>, key: string, tool: string): number {
  const raw = map.get(key);
  const n = raw === undefined ? NaN : Number(raw);
  if (!Number.isSafeInteger(n)) throw new FsbenchError('WORKLOAD_FAILED', `${tool} did not report ${key} (got ${String(raw)})`);
  return n;
}

async function toolOutput(file: string, args: readonly string[]): Promise<string> {
  const r = await command(file, args);
  if (!r.ok) throw new FsbenchError('WORKLOAD_FAILED', `${file} could not read the new filesystem's geometry: ${r.output}`);
  return r.stdout;
}

/**
 * The largest inode number an XFS geometry allows, as the kernel computes it when it decides
 * whether `inode32` must restrict the allocator (xfs_set_inode_alloc): the last inode slot of the
 * last block of the last allocation group.
 */
export function xfsMaxInode(agCount: number, agBlocks: number, agBlkLog: number, inoPbLog: number): bigint {
  const agino = (BigInt(agBlocks - 1) << BigInt(inoPbLog)) | ((1n << BigInt(inoPbLog)) - 1n);
  return (BigInt(agCount - 1) << BigInt(agBlkLog + inoPbLog)) | agino;
}

export async function xfsGeometry(image: string, inode32: boolean): Promise<Geometry> {
  const out = await toolOutput('xfs_db', ['-r', '-c', 'sb 0', '-c', 'p agblocks agblklog inopblog agcount inodesize blocksize versionnum', image]);
  const f = fields(out, /^(\w+) = (.*)$/);
  const agBlocks = int(f, 'agblocks', 'xfs_db');
  const agBlkLog = int(f, 'agblklog', 'xfs_db');
  const inoPbLog = int(f, 'inopblog', 'xfs_db');
  const agCount = int(f, 'agcount', 'xfs_db');
  const maxIno = xfsMaxInode(agCount, agBlocks, agBlkLog, inoPbLog);
  const above32 = maxIno > BigInt(MAX_32_BIT_INODE);
  const version = Number(f.get('versionnum') ?? NaN) & 0xf;
  return {
    inodeSize: int(f, 'inodesize', 'xfs_db'),
    blockSize: int(f, 'blocksize', 'xfs_db'),
    agCount,
    agSizeBlocks: agBlocks,
    agInoShift: agBlkLog + inoPbLog,
    inodeNumberBits: maxIno.toString(2).length,
    info: {
      xfsFormat: Number.isNaN(version) ? 'unknown' : `V${version}`,
      // The kernel keeps inode numbers within 32 bits only when asked to and when they could exceed it.
      xfsInode32Allocator: inode32 && above32,
      inodesMayExceed32Bits: above32 && !inode32,
    },
  };
}

export async function ext4Geometry(image: string): Promise<Geometry> {
  const f = fields(await toolOutput('dumpe2fs', ['-h', image]), /^([^:]+):\s*(.*)$/);
  return {
    ...NO_GEOMETRY,
    inodeSize: int(f, 'Inode size', 'dumpe2fs'),
    blockSize: int(f, 'Block size', 'dumpe2fs'),
    info: {
      ext4Features: f.get('Filesystem features') ?? '',
      ext4InodeCount: int(f, 'Inode count', 'dumpe2fs'),
      ext4FlexBgSize: Number(f.get('Flex block group size') ?? 0),
    },
  };
}

export async function btrfsGeometry(image: string): Promise<Geometry> {
  const f = fields(await toolOutput('btrfs', ['inspect-internal', 'dump-super', image]), /^(\w+)\s+(\S+)/);
  return {
    ...NO_GEOMETRY,
    blockSize: int(f, 'sectorsize', 'btrfs'),
    info: { btrfsNodeSize: int(f, 'nodesize', 'btrfs') },
  };
}
