/**
 * The metadata workload on this host (seed 001): builds the filesystem a cell asks for, runs the
 * phases in their fixed order with the native loop, dropping caches between them unless the cell
 * asks for warm ones, and tears everything down whatever happened.
 */
import { FsbenchError } from '../../contract/errors.js';
import type { Cell } from '../../contract/matrix.js';
import { formatSize } from '../../contract/units.js';
import { METADATA_PHASES } from '../../contract/workloads/metadata/index.js';
import { Teardown } from '../../host/teardown.js';
import { cellParams, withTeardown, type HostNeed, type RunContext, type WorkloadOutcome, type WorkloadSlice } from '../workload.js';
import { dropCaches } from './caches.js';
import { prepareFilesystem, type TestFilesystem } from './filesystem.js';
import { toMetrics } from './metrics.js';
import { MetadataParams } from './params.js';
import { phaseArgv, runPhase, type LayoutGeometry, type NativePhase, type PhaseOutput } from './phases.js';
import { bytesNeeded, checkFreeSpace, mkfsBytes } from './space.js';

/**
 * What a run writes, before anything of it exists: with fs: none its files in the target
 * directory; otherwise the sparse image under the scratch directory, which grows by what mkfs
 * and the files write, never past fsSize.
 */
function hostNeeds(cell: Cell): HostNeed[] {
  const p = cellParams(MetadataParams, cell);
  // 4 KiB blocks and 512-byte inodes: what mkfs picks unless told otherwise, and no less than any choice costs.
  const files = bytesNeeded(p, 4096, p.inodeSize ?? 512);
  const shape = `${p.dirs} x ${p.filesPerDir} files of ${formatSize(p.fileSize)}`;
  if (p.fs === 'none') {
    return [{ kind: 'space', ...(p.target === 'scratch' ? {} : { dir: p.target }), bytes: files, what: shape, fix: 'lower dirs, filesPerDir or fileSize' }];
  }
  return [
    {
      kind: 'space',
      bytes: Math.min(p.fsSize, files + mkfsBytes(p.fsSize)),
      what: `the sparse ${p.fs} image (fsSize ${formatSize(p.fsSize)}; mkfs's metadata and ${shape})`,
      fix: 'lower dirs, filesPerDir or fileSize (or fsSize), or give the host a larger scratch filesystem',
    },
  ];
}

function layoutGeometry(target: TestFilesystem): LayoutGeometry | undefined {
  const g = target.geometry;
  if (g.agSizeBlocks === null || g.agCount === null || g.agInoShift === null || g.blockSize === null) return undefined;
  return { agBlocks: g.agSizeBlocks, agCount: g.agCount, agInoShift: g.agInoShift, blockSize: g.blockSize };
}

async function measure(p: MetadataParams, ctx: RunContext, teardown: Teardown): Promise<WorkloadOutcome> {
  const checkAborted = () => {
    if (ctx.signal.aborted) throw new FsbenchError('CANCELLED', 'the run was cancelled');
  };
  checkAborted();
  const target = await prepareFilesystem(teardown, p, ctx.scratchDir, checkAborted);
  await checkFreeSpace(p, target.root, target.imageDir, target.geometry.inodeSize);

  const dropped: string[] = [];
  let dropCachesMs = 0;
  const phase = async (name: NativePhase, cold: boolean, layout?: LayoutGeometry): Promise<PhaseOutput> => {
    checkAborted();
    if (cold && p.cache === 'cold') {
      dropCachesMs += await dropCaches();
      dropped.push(name);
    }
    ctx.log(`metadata: ${name} (${p.dirs} x ${p.filesPerDir} files)`);
    return runPhase(phaseArgv(name, target.root, p, layout), ctx.signal);
  };

  const start = performance.now();
  const create = await phase('create', false);
  const readByDir = await phase('readByDir', true);
  const readInterleaved = await phase('readInterleaved', true);
  const stat = await phase('stat', true);
  const geometry = layoutGeometry(target);
  // Unmeasured, and it only reads: files still in delayed allocation are left out rather than flushed.
  const layout = geometry ? await phase('layout', false, geometry) : null;
  const unlink = await phase('unlink', true);
  const elapsedMs = performance.now() - start;

  return {
    metrics: toMetrics({ create, readByDir, readInterleaved, stat, unlink, layout }, target.geometry, dropCachesMs, elapsedMs),
    info: {
      ...target.info,
      cache: p.cache,
      cacheDroppedBefore: dropped.length > 0 ? dropped.join(',') : 'none',
      phaseOrder: METADATA_PHASES.join(','),
      fsync: p.fsync,
      measuredBy: 'native',
    },
    limits: null,
    targetFs: target.fsType,
  };
}

export const metadataWorkload: WorkloadSlice = {
  hostNeeds,
  run(cell, ctx) {
    const p = cellParams(MetadataParams, cell);
    return withTeardown(ctx, (teardown) => measure(p, ctx, teardown));
  },
};
