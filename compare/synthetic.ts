/**
 * Synthetic result sets that pass the `RunResult` schema: for tests, `npm run bench:results`
 * and dashboard demos, where measuring for real would take hours and give numbers nobody can
 * predict. The inotify model follows seed 000's shape (throughput rising with the read buffer
 * and flattening around the L3 size); noise is log-normal from a seeded PRNG, so a seed always
 * gives the same runs.
 */
import type { MachineFingerprint } from '../contract/fingerprint.js';
import { expandMatrix, parseMatrix, type Cell, type MatrixInput } from '../contract/matrix.js';
import type { RunResult } from '../contract/result.js';
import type { InotifyMetrics } from '../contract/workloads/inotify.js';
import type { MetadataMetrics } from '../contract/workloads/metadata.js';

/** mulberry32: a 32-bit PRNG, uniform in [0, 1). Tommy Ettinger's public-domain generator. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A standard normal draw (Box-Muller). */
export function gaussian(rand: () => number): number {
  const u = 1 - rand();
  const v = rand();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
}

export interface SyntheticMachine {
  readonly machine: string;
  readonly l3Bytes?: number | null;
  readonly cores?: number;
  /** Multiplies every throughput (1 = the seed's laptop). */
  readonly speed?: number;
}

export function syntheticFingerprint(m: SyntheticMachine): MachineFingerprint {
  const cores = m.cores ?? 8;
  return {
    hostname: m.machine,
    bootId: `00000000-0000-4000-8000-${Buffer.from(m.machine).toString('hex').padEnd(12, '0').slice(0, 12)}`,
    machine: m.machine,
    labels: [],
    kernel: { release: '6.1.0-synthetic', version: '#1 SMP', arch: 'x86_64' },
    cpu: {
      model: 'Synthetic CPU',
      logicalCores: cores,
      physicalCores: Math.max(1, cores / 2),
      l1dBytes: 48 * 1024,
      l2Bytes: 1280 * 1024,
      l3Bytes: m.l3Bytes === undefined ? 8 * 1024 ** 2 : m.l3Bytes,
    },
    memoryBytes: 8 * 1024 ** 3,
    container: { inContainer: false, runtime: null, docker: null },
    inotifyLimits: { maxQueuedEvents: 16384, maxUserWatches: 65536, maxUserInstances: 128 },
    targetFs: 'tmpfs',
    node: 'v20.0.0',
    fsbench: '0.1.0',
  };
}

const num = (v: unknown, fallback: number) => (typeof v === 'number' ? v : fallback);

/** Seed-000-shaped throughput: grows with the buffer, flattens past about a third of L3. */
export function inotifyThroughput(cell: Cell, m: SyntheticMachine): number {
  const b = num(cell.params['bufferBytes'], 65536);
  const files = num(cell.params['files'], 128);
  const l3 = m.l3Bytes ?? 8 * 1024 ** 2;
  const peak = 900_000 * (m.speed ?? 1) * (1 - 0.08 * Math.log2(Math.max(1, files / 128)));
  return peak * (1 - 0.9 * Math.exp(-b / (l3 / 8)));
}

function inotifyMetrics(cell: Cell, m: SyntheticMachine, noise: () => number): InotifyMetrics {
  const seconds = num(cell.params['duration'], 3000) / 1000;
  const eps = inotifyThroughput(cell, m) * noise();
  const events = Math.round(eps * seconds);
  const writes = Math.round(events * 1.08);
  const reads = Math.max(1, Math.round(events / 40));
  return {
    writes,
    writesPerSec: writes / seconds,
    events,
    eventsPerSec: eps,
    overflows: 0,
    reads,
    bytesRead: events * 32,
    meanEventsPerRead: events / reads,
    maxEventsPerRead: Math.round((2 * events) / reads),
    coalescedFraction: 1 - events / writes,
    writesPerEvent: writes / events,
    elapsedMs: seconds * 1000 + 20,
    writeMs: seconds * 1000,
    drainMs: 20,
    drainTimedOut: 0,
    readerUserMs: 100,
    readerSysMs: 900,
    readerCpuFraction: 0.33,
    readerVoluntaryCtxSwitches: 1000,
    readerInvoluntaryCtxSwitches: 50,
    writersUserMs: 200,
    writersSysMs: 2000,
    latencySamples: 100,
    latencyP50Us: 40,
    latencyP90Us: 90,
    latencyP99Us: 300,
    latencyMaxUs: 900,
    peakRssBytes: 50_000_000,
  };
}

function metadataMetrics(cell: Cell, m: SyntheticMachine, noise: () => number): MetadataMetrics {
  const files = num(cell.params['dirs'], 100) * num(cell.params['filesPerDir'], 100);
  const inode = num(cell.params['inodeSize'], 512);
  const mount = String(cell.params['mountOptions'] ?? '');
  // Larger inodes cost reads; inode32 spreads data away from inodes (seed 001's effect).
  const readFactor = (512 / Math.max(256, inode)) ** 0.3 * (mount.includes('inode32') ? 0.7 : 1) * (m.speed ?? 1);
  const rate = (base: number) => base * readFactor * noise();
  const create = rate(40_000);
  const byDir = rate(60_000);
  const inter = rate(25_000);
  const stat = rate(150_000);
  const unlink = rate(50_000);
  const ms = (r: number) => (files / r) * 1000;
  return {
    createMs: ms(create),
    createSyncMs: 50,
    createFilesPerSec: create,
    createMiBPerSec: (create * 4096) / 1024 ** 2,
    readByDirMs: ms(byDir),
    readByDirFilesPerSec: byDir,
    readByDirMiBPerSec: (byDir * 4096) / 1024 ** 2,
    readInterleavedMs: ms(inter),
    readInterleavedFilesPerSec: inter,
    readInterleavedMiBPerSec: (inter * 4096) / 1024 ** 2,
    statMs: ms(stat),
    statFilesPerSec: stat,
    unlinkMs: ms(unlink),
    unlinkFilesPerSec: unlink,
    dirsCreated: num(cell.params['dirs'], 100),
    filesCreated: files,
    bytesWritten: files * 4096,
    filesReadByDir: files,
    filesReadInterleaved: files,
    bytesRead: files * 8192,
    filesStatted: files,
    filesRemoved: files,
    dirsRemoved: num(cell.params['dirs'], 100),
    dropCachesMs: 30,
    elapsedMs: ms(create) + ms(byDir) + ms(inter) + ms(stat) + ms(unlink),
    inodeSize: inode,
    blockSize: 4096,
    agCount: 4,
    agSizeBlocks: 262144,
    inodeNumberBits: 32,
    maxInodeNumber: 2 ** 31,
    inodesAbove32Bits: 0,
    inodeAgsUsed: 4,
    dataAgsUsed: 4,
    filesDataAwayFromInode: mount.includes('inode32') ? files : 0,
  };
}

export interface SyntheticOptions {
  readonly matrix: MatrixInput;
  readonly machine: SyntheticMachine;
  readonly seed?: number;
  /** Relative run-to-run noise (standard deviation of the log), default 0.03. */
  readonly noise?: number;
  /** Multiplies the metrics of the cells it returns a factor for (to plant a known difference). */
  readonly effect?: (cell: Cell) => number;
  /** Names the matrix in the runs (defaults to the matrix's name). */
  readonly matrixId?: string;
}

/** Every measured run of a matrix on one synthetic machine, cell after cell. */
export function syntheticRuns(o: SyntheticOptions): RunResult[] {
  const matrix = parseMatrix(o.matrix);
  return [...syntheticRunStream(expandMatrix(matrix), matrix.repetitions, { ...o, matrixId: o.matrixId ?? matrix.name })];
}

/**
 * The same, lazily, for given cells and any number of repetitions (beyond a matrix's own
 * limits): benchmarks stream a million runs through it without holding them.
 */
export function* syntheticRunStream(
  cells: readonly Cell[],
  repetitions: number,
  o: Omit<SyntheticOptions, 'matrix'> & { readonly matrixId: string },
): Generator<RunResult> {
  const rand = mulberry32(o.seed ?? 1);
  const sigma = o.noise ?? 0.03;
  const fingerprint = syntheticFingerprint(o.machine);
  let clock = Date.UTC(2026, 0, 1);
  for (const cell of cells) {
    const effect = o.effect?.(cell) ?? 1;
    for (let repetition = 0; repetition < repetitions; repetition++) {
      const noise = () => effect * Math.exp(sigma * gaussian(rand));
      const metrics =
        cell.workload === 'inotify'
          ? inotifyMetrics(cell, o.machine, noise)
          : cell.workload === 'metadata'
            ? metadataMetrics(cell, o.machine, noise)
            : { value: num(cell.params['value'], 1) * noise(), elapsedMs: 1 };
      const startedAt = new Date(clock).toISOString();
      clock += 1000;
      yield {
        matrix: o.matrixId,
        cellId: cell.id,
        workload: cell.workload,
        repetition,
        params: cell.params,
        startedAt,
        finishedAt: new Date(clock).toISOString(),
        fingerprint,
        limits: cell.workload === 'inotify' ? fingerprint.inotifyLimits : null,
        state: 'ok',
        metrics,
        histograms:
          cell.workload === 'inotify'
            ? { writeToEventLatency: { unit: 'ns', buckets: [[32768, 33792, 50 + (repetition % 10)], [65536, 67584, 40], [262144, 270336, 10]] } }
            : {},
        info: {},
      };
    }
  }
}
