/** Turns what the native loop counted into the contract's metrics: a pure function. */
import type { MetadataMetrics } from '../../contract/workloads/metadata/index.js';
import type { Geometry } from './geometry.js';
import type { PhaseOutput } from './phases.js';

export interface PhaseResults {
  readonly create: PhaseOutput;
  readonly readByDir: PhaseOutput;
  readonly readInterleaved: PhaseOutput;
  readonly stat: PhaseOutput;
  readonly unlink: PhaseOutput;
  /** XFS only: where inodes and data landed. */
  readonly layout: PhaseOutput | null;
}

const NS_PER_MS = 1e6;
const MIB = 1024 ** 2;

function perSec(count: number, ns: number): number {
  return ns > 0 ? count / (ns / 1e9) : 0;
}

function timing(r: PhaseOutput) {
  return { ms: r.ns / NS_PER_MS, filesPerSec: perSec(r.files, r.ns), mibPerSec: perSec(r.bytes / MIB, r.ns) };
}

export function toMetrics(r: PhaseResults, g: Geometry, dropCachesMs: number, elapsedMs: number): MetadataMetrics {
  const create = timing(r.create);
  const byDir = timing(r.readByDir);
  const interleaved = timing(r.readInterleaved);
  const stat = timing(r.stat);
  const unlink = timing(r.unlink);
  return {
    createMs: create.ms,
    createSyncMs: (r.create.syncNs ?? 0) / NS_PER_MS,
    createFilesPerSec: create.filesPerSec,
    createMiBPerSec: create.mibPerSec,
    readByDirMs: byDir.ms,
    readByDirFilesPerSec: byDir.filesPerSec,
    readByDirMiBPerSec: byDir.mibPerSec,
    readInterleavedMs: interleaved.ms,
    readInterleavedFilesPerSec: interleaved.filesPerSec,
    readInterleavedMiBPerSec: interleaved.mibPerSec,
    statMs: stat.ms,
    statFilesPerSec: stat.filesPerSec,
    unlinkMs: unlink.ms,
    unlinkFilesPerSec: unlink.filesPerSec,
    dirsCreated: r.create.dirs,
    filesCreated: r.create.files,
    bytesWritten: r.create.bytes,
    filesReadByDir: r.readByDir.files,
    filesReadInterleaved: r.readInterleaved.files,
    bytesRead: r.readByDir.bytes + r.readInterleaved.bytes,
    filesStatted: r.stat.files,
    filesRemoved: r.unlink.files,
    dirsRemoved: r.unlink.dirs,
    dropCachesMs,
    elapsedMs,
    inodeSize: g.inodeSize,
    blockSize: g.blockSize,
    agCount: g.agCount,
    agSizeBlocks: g.agSizeBlocks,
    inodeNumberBits: g.inodeNumberBits,
    maxInodeNumber: r.stat.maxIno ?? 0,
    inodesAbove32Bits: r.stat.inodesAbove32Bits ?? 0,
    inodeAgsUsed: r.layout?.inodeAgs ?? null,
    dataAgsUsed: r.layout?.dataAgs ?? null,
    filesDataAwayFromInode: r.layout?.dataAwayFromInode ?? null,
  };
}
