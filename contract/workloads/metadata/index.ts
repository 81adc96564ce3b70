/**
 * The filesystem metadata workload (seed 001): create n1 directories x n2 files, read them back
 * by directory and interleaved, stat and unlink them, on a filesystem each run builds itself.
 */
import { z } from 'zod';
import type { MetricDocs } from '../../metrics.js';
import { defaultValue, directoryOr, numberParam, type ParamSpecs, type ParamValue } from '../../params.js';
import { containerParams, containerSkipReason } from '../container.js';
import { RUN_OVERHEAD_MS, type SliceParams, type WorkloadContract } from '../slice.js';

export const METADATA_FILESYSTEMS = ['xfs', 'ext4', 'btrfs', 'none'] as const;
export type MetadataFs = (typeof METADATA_FILESYSTEMS)[number];
type BuiltFs = Exclude<MetadataFs, 'none'>;

/** Measured phases, in the order every run performs them. */
export const METADATA_PHASES = ['create', 'readByDir', 'readInterleaved', 'stat', 'unlink'] as const;
export type MetadataPhase = (typeof METADATA_PHASES)[number];

export const FSYNC_POLICIES = ['none', 'end', 'file', 'dir'] as const;

/**
 * mkfs switches a cell may ask for, each mapped to the exact arguments it adds. Words, not
 * strings passed through: nothing a matrix says reaches a command line unchecked.
 */
export const MKFS_OPTIONS: Readonly<Record<string, { readonly fs: BuiltFs; readonly args: readonly string[] }>> = {
  'crc=0': { fs: 'xfs', args: ['-m', 'crc=0'] },
  'crc=1': { fs: 'xfs', args: ['-m', 'crc=1'] },
  'finobt=0': { fs: 'xfs', args: ['-m', 'finobt=0'] },
  'finobt=1': { fs: 'xfs', args: ['-m', 'finobt=1'] },
  'rmapbt=0': { fs: 'xfs', args: ['-m', 'rmapbt=0'] },
  'rmapbt=1': { fs: 'xfs', args: ['-m', 'rmapbt=1'] },
  'reflink=0': { fs: 'xfs', args: ['-m', 'reflink=0'] },
  'reflink=1': { fs: 'xfs', args: ['-m', 'reflink=1'] },
  'bigtime=0': { fs: 'xfs', args: ['-m', 'bigtime=0'] },
  'inobtcount=0': { fs: 'xfs', args: ['-m', 'inobtcount=0'] },
  'sparse=0': { fs: 'xfs', args: ['-i', 'sparse=0'] },
  'sparse=1': { fs: 'xfs', args: ['-i', 'sparse=1'] },
  'nrext64=1': { fs: 'xfs', args: ['-i', 'nrext64=1'] },
  nojournal: { fs: 'ext4', args: ['-O', '^has_journal'] },
  noflexbg: { fs: 'ext4', args: ['-O', '^flex_bg'] },
  nodirindex: { fs: 'ext4', args: ['-O', '^dir_index'] },
  nometadatacsum: { fs: 'ext4', args: ['-O', '^metadata_csum'] },
  inlinedata: { fs: 'ext4', args: ['-O', 'inline_data'] },
  'metadata=single': { fs: 'btrfs', args: ['-m', 'single'] },
  'metadata=dup': { fs: 'btrfs', args: ['-m', 'dup'] },
};

/** Mount options a cell may ask for, and the filesystems that know them. */
export const MOUNT_OPTIONS: Readonly<Record<string, readonly MetadataFs[]>> = {
  noatime: ['xfs', 'ext4', 'btrfs'],
  relatime: ['xfs', 'ext4', 'btrfs'],
  strictatime: ['xfs', 'ext4', 'btrfs'],
  lazytime: ['xfs', 'ext4', 'btrfs'],
  nodiratime: ['xfs', 'ext4', 'btrfs'],
  sync: ['xfs', 'ext4', 'btrfs'],
  dirsync: ['xfs', 'ext4', 'btrfs'],
  discard: ['xfs', 'ext4', 'btrfs'],
  inode32: ['xfs'],
  inode64: ['xfs'],
  largeio: ['xfs'],
  wsync: ['xfs'],
  'logbufs=8': ['xfs'],
  'logbsize=256k': ['xfs'],
  'data=ordered': ['ext4'],
  'data=writeback': ['ext4'],
  'data=journal': ['ext4'],
  nobarrier: ['ext4'],
  nodelalloc: ['ext4'],
  'compress=zstd': ['btrfs'],
  'compress=lzo': ['btrfs'],
  nodatacow: ['btrfs'],
  nodatasum: ['btrfs'],
  ssd: ['btrfs'],
  nossd: ['btrfs'],
};

/** Options of which a cell may hold at most one. */
const EXCLUSIVE_MOUNT_OPTIONS: readonly (readonly string[])[] = [
  ['noatime', 'relatime', 'strictatime'],
  ['inode32', 'inode64'],
  ['data=ordered', 'data=writeback', 'data=journal'],
  ['compress=zstd', 'compress=lzo'],
  ['ssd', 'nossd'],
];

const words = (v: ParamValue): string[] => (typeof v === 'string' && v !== '' ? v.split(',') : []);

function checkMountOptions(v: ParamValue): string | undefined {
  const set = words(v);
  const clash = EXCLUSIVE_MOUNT_OPTIONS.map((group) => group.filter((o) => set.includes(o))).find((g) => g.length > 1);
  return clash ? `contains ${clash.join(' and ')}, which exclude each other` : undefined;
}

function checkMkfsOptions(v: ParamValue): string | undefined {
  const byKey = new Map<string, string>();
  for (const w of words(v)) {
    const key = w.split('=')[0] ?? w;
    const other = byKey.get(key);
    if (other !== undefined) return `contains ${other} and ${w}, which exclude each other`;
    byKey.set(key, w);
  }
  return undefined;
}

/** ext4 with 4 KiB blocks, the usual scratch filesystem, caps a file at 2^32 - 1 blocks. */
const MAX_IMAGE_BYTES = 16 * 1024 ** 4 - 1024 ** 2;
const MIB = 1024 ** 2;

export const metadataParams = {
  fs: {
    kind: 'enum',
    values: METADATA_FILESYSTEMS,
    default: 'xfs',
    doc:
      'Filesystem the run makes on a sparse image under the scratch directory, loop-mounts, measures and removes. ' +
      '`none` measures the `target` directory as it is.',
  },
  fsSize: {
    kind: 'size',
    min: 300 * MIB,
    max: MAX_IMAGE_BYTES,
    default: '4GiB',
    minReason: 'is below 300MiB, the smallest filesystem mkfs.xfs makes (the floor is the same for every fs so cells compare)',
    check: (v: ParamValue) => (typeof v === 'number' && v % MIB !== 0 ? 'is not a whole number of MiB' : undefined),
    doc:
      'Size of the sparse image file, which costs only what is written. Geometry follows it: XFS inodes outgrow 32 bits ' +
      'above 1TiB with 256-byte inodes (2TiB with 512, 8TiB with 2048), which is when `inode32` changes the allocator. ' +
      'The maximum, just under 16TiB, is the largest file ext4 allows with 4KiB blocks.',
  },
  inodeSize: {
    kind: 'size',
    min: 128,
    max: 4096,
    keywords: ['default'],
    default: 'default',
    check: (v: ParamValue) =>
      typeof v === 'number' && (v & (v - 1)) !== 0 ? 'is not a power of two' : undefined,
    doc:
      'Inode size given to mkfs (`-i size=` for XFS, `-I` for ext4); `default` leaves it to mkfs. XFS with CRCs refuses ' +
      'below 512 bytes: such runs fail with FS_REFUSED and mkfs\'s message. btrfs has no fixed inode size.',
  },
  agCount: {
    kind: 'integer',
    min: 1,
    max: 100_000,
    keywords: ['default'],
    default: 'default',
    doc: 'XFS allocation groups (`-d agcount=`); `default` lets mkfs.xfs choose from the size. XFS only.',
  },
  mkfsOptions: {
    kind: 'list',
    values: Object.keys(MKFS_OPTIONS),
    default: '',
    check: checkMkfsOptions,
    doc:
      'mkfs switches, each for one filesystem: XFS `crc=`, `finobt=`, `rmapbt=`, `reflink=`, `sparse=`, `bigtime=`, ' +
      '`inobtcount=`, `nrext64=`; ext4 `no*` (features off) and `inlinedata`; btrfs `metadata=`. Words from this list ' +
      'only, never passed through as text. `crc=0` makes the old V4 format, which kernels without ' +
      'CONFIG_XFS_SUPPORT_V4 refuse to mount.',
  },
  mountOptions: {
    kind: 'list',
    values: Object.keys(MOUNT_OPTIONS),
    default: '',
    check: checkMountOptions,
    doc:
      'Mount options, from this list only. `inode32` and `inode64` (the default since Linux 3.7), `largeio`, `wsync`, ' +
      '`logbufs=`, `logbsize=` are XFS; `data=`, `nobarrier`, `nodelalloc` are ext4; `compress=`, `nodatacow`, ' +
      '`nodatasum`, `ssd`, `nossd` are btrfs; the rest apply to all three.',
  },
  target: {
    kind: 'text',
    default: 'scratch',
    allowed: "'scratch' or a normalised absolute directory path",
    maxLength: 4096,
    check: directoryOr('scratch'),
    doc:
      'With `fs: none`, where the files go: a fresh subdirectory of the scratch directory or of this existing directory, ' +
      'removed afterwards. Ignored otherwise.',
  },
  dirs: { kind: 'integer', min: 1, max: 1_000_000, default: 100, doc: 'Directories (n1), named `dir.NNN`.' },
  filesPerDir: {
    kind: 'integer',
    min: 1,
    max: 1_000_000,
    default: 100,
    doc: 'Files per directory (n2), named `file.NNN` as in the seed, so short names fit in a shortform directory.',
  },
  fileSize: {
    kind: 'size',
    min: 0,
    max: 1024 ** 3,
    default: '4KiB',
    doc: 'Bytes written to each file in `create` and read back in full by each read phase; 0 measures metadata alone.',
  },
  fsync: {
    kind: 'enum',
    values: FSYNC_POLICIES,
    default: 'end',
    doc:
      'Durability in `create`: `none` leaves writeback to the kernel; `end` calls syncfs() once after the last file ' +
      '(timed, also reported alone as `createSyncMs`); `file` fsyncs every file; `dir` fsyncs every file and each ' +
      'directory after its files.',
  },
  cache: {
    kind: 'enum',
    values: ['cold', 'warm'],
    default: 'cold',
    doc:
      '`cold` runs `sync` and writes 3 to /proc/sys/vm/drop_caches (page cache, dentries, inodes) before every phase ' +
      'after `create`; `warm` leaves the caches as `create` left them. Each result records which.',
  },
} as const satisfies ParamSpecs;

/** Combinations that cannot be measured meaningfully become `skipped` runs with this reason. */
export function metadataSkipReason(p: Readonly<Record<string, ParamValue>>): string | undefined {
  const fs = p['fs'];
  const set = (name: keyof typeof metadataParams) => p[name] !== undefined && p[name] !== defaultValue(metadataParams[name]);
  if (fs === 'none') {
    const given = (['inodeSize', 'agCount', 'mkfsOptions', 'mountOptions'] as const).filter(set);
    if (given.length > 0) return `fs: none measures the target directory as it is; ${given.join(', ')} apply only to a filesystem the run makes`;
    return undefined;
  }
  if (set('target')) return `target applies only to fs: none; fs: ${String(fs)} is made on an image under the scratch directory`;
  if (fs === 'btrfs' && set('inodeSize')) return 'btrfs has no fixed inode size: use inodeSize: default with fs: btrfs';
  if (fs !== 'xfs' && set('agCount')) return `agCount is an XFS setting; fs: ${String(fs)} has no allocation groups`;
  const mkfs = words(p['mkfsOptions'] ?? '').find((w) => MKFS_OPTIONS[w]?.fs !== fs);
  if (mkfs !== undefined) return `mkfsOptions ${mkfs} is for ${MKFS_OPTIONS[mkfs]?.fs ?? 'another filesystem'}, not ${String(fs)}`;
  const mount = words(p['mountOptions'] ?? '').find((w) => !(MOUNT_OPTIONS[w] ?? []).includes(fs as MetadataFs));
  if (mount !== undefined) return `mountOptions ${mount} is for ${(MOUNT_OPTIONS[mount] ?? []).join(', ')}, not ${String(fs)}`;
  return undefined;
}

const ms = z.number().nonnegative();
const rate = z.number().nonnegative();
const count = z.number().int().nonnegative();
/** null where the filesystem has no such thing (no allocation groups on ext4, no fixed inode size on btrfs). */
const geometry = count.nullable();

/** Metric names are stable: the coordinator, compare and dashboard read them by name. */
export const MetadataMetrics = z
  .object({
    createMs: ms,
    createSyncMs: ms,
    createFilesPerSec: rate,
    createMiBPerSec: rate,
    readByDirMs: ms,
    readByDirFilesPerSec: rate,
    readByDirMiBPerSec: rate,
    readInterleavedMs: ms,
    readInterleavedFilesPerSec: rate,
    readInterleavedMiBPerSec: rate,
    statMs: ms,
    statFilesPerSec: rate,
    unlinkMs: ms,
    unlinkFilesPerSec: rate,
    dirsCreated: count,
    filesCreated: count,
    bytesWritten: count,
    filesReadByDir: count,
    filesReadInterleaved: count,
    bytesRead: count,
    filesStatted: count,
    filesRemoved: count,
    dirsRemoved: count,
    /** Time spent syncing and dropping caches between phases; not part of any phase. */
    dropCachesMs: ms,
    /** From the start of create to the end of unlink, cache drops included. */
    elapsedMs: ms,
    inodeSize: geometry,
    blockSize: geometry,
    agCount: geometry,
    agSizeBlocks: geometry,
    /** Bits of the largest inode number the geometry allows (XFS); above 32, `inode32` restricts the allocator. */
    inodeNumberBits: geometry,
    maxInodeNumber: count,
    inodesAbove32Bits: count,
    /** XFS: allocation groups holding at least one inode / one file's first data block. */
    inodeAgsUsed: geometry,
    dataAgsUsed: geometry,
    /** XFS: files whose first data block lies in another allocation group than their inode. */
    filesDataAwayFromInode: geometry,
  })
  .strict();
export type MetadataMetrics = z.infer<typeof MetadataMetrics>;

/** The metrics a summary table shows first, in order. */
export const METADATA_HEADLINE_METRICS = [
  'createFilesPerSec',
  'readByDirFilesPerSec',
  'readInterleavedFilesPerSec',
  'statFilesPerSec',
  'unlinkFilesPerSec',
  'inodeSize',
  'agCount',
] as const;

const phase = (what: string) =>
  ({
    ms: { unit: 'ms', direction: 'lower', doc: `${what}: wall time.` },
    filesPerSec: { unit: 'files/s', direction: 'higher', doc: `${what}: files per second.` },
    mibPerSec: { unit: 'MiB/s', direction: 'higher', doc: `${what}: file data per second.` },
  }) as const;
const create = phase('create (with the fsync policy)');
const readByDir = phase('readByDir (every file, directory by directory)');
const readInterleaved = phase('readInterleaved (file 1 of every directory, then file 2, ...)');
const stat = phase('stat (every file)');
const unlink = phase('unlink (every file and directory)');
const counted = (doc: string) => ({ unit: 'files', direction: 'neither', doc }) as const;
const fact = (unit: string, doc: string) => ({ unit, direction: 'neither', doc }) as const;

/** Phases are timed (lower is better) and rated (higher is better); counts and geometry are facts. */
export const METADATA_METRIC_DOCS = {
  createMs: create.ms,
  createSyncMs: { unit: 'ms', direction: 'lower', doc: 'The syncfs() after the last file (`fsync: end`), also part of createMs.' },
  createFilesPerSec: create.filesPerSec,
  createMiBPerSec: create.mibPerSec,
  readByDirMs: readByDir.ms,
  readByDirFilesPerSec: readByDir.filesPerSec,
  readByDirMiBPerSec: readByDir.mibPerSec,
  readInterleavedMs: readInterleaved.ms,
  readInterleavedFilesPerSec: readInterleaved.filesPerSec,
  readInterleavedMiBPerSec: readInterleaved.mibPerSec,
  statMs: stat.ms,
  statFilesPerSec: stat.filesPerSec,
  unlinkMs: unlink.ms,
  unlinkFilesPerSec: unlink.filesPerSec,
  dirsCreated: fact('dirs', 'Directories created.'),
  filesCreated: counted('Files created.'),
  bytesWritten: fact('bytes', 'File data written by create.'),
  filesReadByDir: counted('Files read by readByDir.'),
  filesReadInterleaved: counted('Files read by readInterleaved.'),
  bytesRead: fact('bytes', 'File data read by both read phases.'),
  filesStatted: counted('Files stat()ed.'),
  filesRemoved: counted('Files removed.'),
  dirsRemoved: fact('dirs', 'Directories removed.'),
  dropCachesMs: fact('ms', 'Time spent syncing and dropping caches between phases (`cache: cold`); in no phase.'),
  elapsedMs: { unit: 'ms', direction: 'lower', doc: 'From the start of create to the end of unlink, cache drops included.' },
  inodeSize: fact('bytes', 'Inode size as made (null on btrfs).'),
  blockSize: fact('bytes', 'Filesystem block size as made.'),
  agCount: fact('AGs', 'XFS allocation groups as made.'),
  agSizeBlocks: fact('blocks', 'Blocks per XFS allocation group.'),
  inodeNumberBits: fact('bits', 'Bits of the largest inode number the geometry allows (XFS); above 32, `inode32` restricts the allocator.'),
  maxInodeNumber: fact('1', 'The largest inode number among the created files.'),
  inodesAbove32Bits: counted('Created files whose inode number needs more than 32 bits.'),
  inodeAgsUsed: fact('AGs', 'XFS allocation groups holding at least one created inode.'),
  dataAgsUsed: fact('AGs', 'XFS allocation groups holding at least one file\'s first data block.'),
  filesDataAwayFromInode: counted('XFS: files whose first data block lies in another allocation group than their inode.'),
} as const satisfies MetricDocs<MetadataMetrics>;

/** Every parameter of a cell, the container's included: what the workload's code parses a cell with. */
export const metadataSpecs = { ...metadataParams, ...containerParams } as const satisfies ParamSpecs;

/** Making the filesystem (mkfs, mount) for a run that does not use fs: none. */
const MKFS_MS = 2000;
/** What one file's inode costs over its five phases on an ordinary disk, cold caches included. */
const MS_PER_FILE = 0.2;
/** Each file's data is written once and read twice; assumed at this rate. */
const BYTES_PER_MS = 200 * 1024;
/** One fsync() of a small file or a directory, and one syncfs(), on an ordinary SSD. */
const FSYNC_MS = 2;
const SYNCFS_MS = 100;
/** `cache: cold` syncs and drops the caches before each of the four phases after create. */
const DROP_CACHES_MS = 4 * 250;

function estimateRunMs(p: SliceParams): number {
  const dirs = numberParam(p, 'dirs');
  const files = dirs * numberParam(p, 'filesPerDir');
  const fsync = p['fsync'];
  const syncs = fsync === 'file' ? files : fsync === 'dir' ? files + dirs : 0;
  return (
    RUN_OVERHEAD_MS +
    (p['fs'] === 'none' ? 0 : MKFS_MS) +
    files * MS_PER_FILE +
    (files * numberParam(p, 'fileSize') * 3) / BYTES_PER_MS +
    syncs * FSYNC_MS +
    (fsync === 'end' ? SYNCFS_MS : 0) +
    (p['cache'] === 'cold' ? DROP_CACHES_MS : 0)
  );
}

export const metadataContract: WorkloadContract = {
  params: metadataSpecs,
  metrics: MetadataMetrics,
  metricDocs: METADATA_METRIC_DOCS,
  headline: METADATA_HEADLINE_METRICS,
  sweeps: [],
  skipReason: (p) => containerSkipReason(p) ?? metadataSkipReason(p),
  exclusive: true,
  estimateRunMs,
  native: ['metadata'],
  // A filesystem the run makes lives in an image under the scratch directory, which in a
  // container is the work directory already; fs: none measures the `target` directory itself.
  sandbox: { workDirParam: (p) => (p['fs'] === 'none' ? 'target' : undefined) },
};
