/**
 * The metadata workload on real loop-mounted XFS and ext4 (needs root, loop devices, xfsprogs):
 * counts per phase, recorded geometry and cache state, refusals, and that no failure, abort or
 * SIGKILL leaves a mount, a loop device or an image behind.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { FsbenchError } from '../contract/errors.js';
import { expandMatrix, parseMatrix, type Cell } from '../contract/matrix.js';
import { metadataSkipReason } from '../contract/workloads/metadata/index.js';
import { Journal } from '../host/journal.js';
import { nativeProgram } from '../host/native.js';
import type { RunContext, WorkloadOutcome } from '../workloads/workload.js';
import { metadataWorkload } from '../workloads/metadata/index.js';
import { mkfsArgs } from '../workloads/metadata/mkfs.js';
import { xfsMaxInode } from '../workloads/metadata/geometry.js';

const exec = promisify(execFile);
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

let scratch = '';
let journalDir = '';
let journal: Journal;

function cellOf(params: Record<string, unknown>): Cell {
  const [cell] = expandMatrix(parseMatrix({ name: 'test', workload: 'metadata', params }));
  if (!cell) throw new Error('the matrix expanded to no cell');
  return cell;
}

function context(signal = new AbortController().signal, log: (line: string) => void = () => undefined): RunContext {
  return { scratchDir: scratch, journal, signal, log };
}

async function failure(run: Promise<WorkloadOutcome>): Promise<FsbenchError> {
  const err = await run.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof FsbenchError)) throw new Error(`expected an FsbenchError, got ${String(err)}`);
  return err;
}

/** Everything under the scratch directory that a run could leave behind. */
async function leftovers() {
  const mounts = (await readFile('/proc/mounts', 'utf8')).split('\n').filter((l) => l.includes(scratch));
  const loops = (await exec('losetup', ['-a'])).stdout.split('\n').filter((l) => l.includes(scratch));
  const dirs = (await readdir(scratch)).filter((n) => n.startsWith('fsbench-metadata-'));
  const entries = (await readdir(journalDir)).filter((n) => n.endsWith('.json'));
  return { mounts, loops, dirs, entries };
}

const NOTHING = { mounts: [], loops: [], dirs: [], entries: [] };

beforeAll(async () => {
  nativeProgram('metadata');
  scratch = await mkdtemp('/tmp/fsb-md-');
  journalDir = path.join(scratch, 'journal');
  journal = await Journal.open(journalDir);
});

afterAll(async () => {
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

describe('metadata workload on real filesystems', () => {
  it('runs every phase over n1 x n2 files on XFS and records geometry and cold caches', async () => {
    const out = await metadataWorkload.run(cellOf({ fs: 'xfs', fsSize: '512MiB', dirs: 10, filesPerDir: 10, inodeSize: 512 }), context());
    const m = out.metrics;
    expect(m).toMatchObject({
      dirsCreated: 10,
      filesCreated: 100,
      bytesWritten: 100 * 4096,
      filesReadByDir: 100,
      filesReadInterleaved: 100,
      bytesRead: 2 * 100 * 4096,
      filesStatted: 100,
      filesRemoved: 100,
      dirsRemoved: 10,
      inodeSize: 512,
      blockSize: 4096,
    });
    expect(m['agCount']).toBeGreaterThan(0);
    expect(m['createFilesPerSec']).toBeGreaterThan(0);
    expect(m['inodesAbove32Bits']).toBe(0);
    expect(out.info).toMatchObject({
      fs: 'xfs',
      cache: 'cold',
      cacheDroppedBefore: 'readByDir,readInterleaved,stat,unlink',
      phaseOrder: 'create,readByDir,readInterleaved,stat,unlink',
      xfsFormat: 'V5',
      xfsInode32Allocator: false,
      inodesMayExceed32Bits: false,
      measuredBy: 'native',
    });
    expect(out.info?.['mountOptionsApplied']).toMatch(/inode64/);
    expect(out.targetFs).toBe('xfs');
    expect(await leftovers()).toEqual(NOTHING);
  });

  it('runs on ext4 with warm caches and mount options, reporting ext4 geometry', async () => {
    const cell = cellOf({ fs: 'ext4', fsSize: '512MiB', dirs: 10, filesPerDir: 10, inodeSize: 1024, cache: 'warm', mountOptions: 'noatime' });
    const out = await metadataWorkload.run(cell, context());
    expect(out.metrics).toMatchObject({ filesCreated: 100, filesReadByDir: 100, filesRemoved: 100, inodeSize: 1024, agCount: null });
    expect(out.info).toMatchObject({ fs: 'ext4', cache: 'warm', cacheDroppedBefore: 'none', mkfsCommand: 'mkfs.ext4 -q -F -I 1024 IMAGE' });
    expect(out.info?.['mountOptionsApplied']).toMatch(/noatime/);
    expect(await leftovers()).toEqual(NOTHING);
  });

  it('measures fs: none in a fresh subdirectory of the target and removes it', async () => {
    const target = path.join(scratch, 'target');
    await mkdir(target);
    const out = await metadataWorkload.run(cellOf({ fs: 'none', target, dirs: 3, filesPerDir: 4, fileSize: 0, cache: 'warm' }), context());
    expect(out.metrics).toMatchObject({ filesCreated: 12, filesReadByDir: 12, filesStatted: 12, filesRemoved: 12, bytesRead: 0, inodeSize: null });
    expect(out.info).toMatchObject({ fs: 'none', cache: 'warm' });
    expect(await readdir(target)).toEqual([]);
    await rm(target, { recursive: true });
    expect(await leftovers()).toEqual(NOTHING);
  });

  it('refuses 256-byte XFS inodes with mkfs\'s own message before writing files', async () => {
    const err = await failure(metadataWorkload.run(cellOf({ fs: 'xfs', fsSize: '512MiB', inodeSize: 256, dirs: 2, filesPerDir: 2 }), context()));
    expect(err.code).toBe('FS_REFUSED');
    expect(err.message).toContain('Minimum inode size for CRCs is 512 bytes');
    expect(err.message).toMatch(/CONFIG_XFS_SUPPORT_V4/);
    expect(await leftovers()).toEqual(NOTHING);
  });

  it('leaves nothing behind when the files do not fit in fsSize (fails after mounting)', async () => {
    const cell = cellOf({ fs: 'xfs', fsSize: '300MiB', dirs: 2, filesPerDir: 2, fileSize: '200MiB' });
    const err = await failure(metadataWorkload.run(cell, context()));
    expect(err.code).toBe('NO_SPACE');
    expect(err.message).toMatch(/raise fsSize/);
    expect(await leftovers()).toEqual(NOTHING);
  });

  it('stops on an abort during create and leaves nothing behind', async () => {
    const ac = new AbortController();
    const cell = cellOf({ fs: 'xfs', fsSize: '512MiB', dirs: 20, filesPerDir: 100, fsync: 'file' });
    const err = await failure(
      metadataWorkload.run(
        cell,
        context(ac.signal, (line) => {
          if (line.startsWith('metadata: create')) {
            setTimeout(() => {
              ac.abort();
            }, 20);
          }
        }),
      ),
    );
    expect(err.code).toBe('CANCELLED');
    // Stopped between two files by the loop itself, or killed before it started: either way in create.
    expect(err.message).toMatch(/create stopped after \d+ files|cancelled during create/);
    expect(await leftovers()).toEqual(NOTHING);
  });

  it('cleans up after a run killed with SIGKILL on the next Journal.recover()', async () => {
    const dir = await mkdtemp(path.join(scratch, 'child-'));
    const typescript = pathToFileURL(createRequire(path.join(repo, 'package.json')).resolve('typescript')).href;
    // Node 20 runs no TypeScript: a loader hook transpiles the sources the child imports.
    await writeFile(
      path.join(dir, 'hooks.mjs'),
      `import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import ts from ${JSON.stringify(typescript)};
export async function resolve(spec, context, next) {
  if (spec.endsWith('.js') && spec.startsWith('.') && context.parentURL?.endsWith('.ts')) {
    const url = new URL(spec.slice(0, -3) + '.ts', context.parentURL);
    if (existsSync(fileURLToPath(url))) return { url: url.href, shortCircuit: true };
  }
  return next(spec, context);
}
export async function load(url, context, next) {
  if (!url.endsWith('.ts')) return next(url, context);
  const out = ts.transpileModule(readFileSync(fileURLToPath(url), 'utf8'), {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
  });
  return { format: 'module', source: out.outputText, shortCircuit: true };
}
`,
    );
    await writeFile(path.join(dir, 'register.mjs'), `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(path.join(dir, 'hooks.mjs')).href)});\n`);
    const src = (f: string) => JSON.stringify(pathToFileURL(path.join(repo, f)).href);
    await writeFile(
      path.join(dir, 'child.mjs'),
      `import { metadataWorkload } from ${src('workloads/metadata/index.ts')};
import { Journal } from ${src('host/journal.ts')};
const journal = await Journal.open(${JSON.stringify(journalDir)});
const cell = JSON.parse(process.argv[2]);
await metadataWorkload.run(cell, { scratchDir: ${JSON.stringify(scratch)}, journal, signal: new AbortController().signal, log: (l) => console.log(l) });
console.log('finished');
`,
    );
    const cell = cellOf({ fs: 'xfs', fsSize: '512MiB', dirs: 20, filesPerDir: 50, cache: 'warm', fsync: 'file' });
    const child = spawn(process.execPath, ['--import', path.join(dir, 'register.mjs'), path.join(dir, 'child.mjs'), JSON.stringify(cell)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const killed = new Promise<string>((resolve) => {
      let seen = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => {
        seen += d;
        // In the middle of create, with the filesystem mounted and files being written.
        if (seen.includes('metadata: create')) child.kill('SIGKILL');
      });
      child.on('close', (_code, signal) => {
        resolve(`${String(signal)}: ${seen}${stderr}`);
      });
    });
    expect(await killed).toMatch(/^SIGKILL/);
    await rm(dir, { recursive: true, force: true });

    const left = await leftovers();
    expect(left.mounts).toHaveLength(1);
    expect(left.entries.length).toBeGreaterThan(0);
    const undone = await (await Journal.open(journalDir)).recover();
    expect(undone.join('\n')).toMatch(/undid mount/);
    expect(await leftovers()).toEqual(NOTHING);
  });
});

describe('metadata parameters', () => {
  const refuse = (params: Record<string, unknown>) => {
    try {
      cellOf(params);
    } catch (err) {
      if (err instanceof FsbenchError) return `${err.code}: ${err.message}`;
      throw err;
    }
    throw new Error(`accepted ${JSON.stringify(params)}`);
  };

  it('refuses bad values, naming the parameter and what is allowed', () => {
    expect(refuse({ fs: 'zfs' })).toMatch(/MATRIX_INVALID[\s\S]*fs = "zfs" is not an allowed value \(allowed: one of xfs, ext4, btrfs, none\)/);
    expect(refuse({ inodeSize: 1000 })).toMatch(/inodeSize = 1000 is not a power of two/);
    expect(refuse({ inodeSize: 8192 })).toMatch(/inodeSize = 8192 is above the maximum 4KiB .*or 'default'/);
    expect(refuse({ fsSize: '20TiB' })).toMatch(/fsSize = "20TiB" is above the maximum/);
    expect(refuse({ fsSize: '1GB' })).toMatch(/fsSize = "1GB" has unknown unit 'GB'/);
    expect(refuse({ fsSize: '100MiB' })).toMatch(/fsSize .* 300MiB, the smallest filesystem mkfs.xfs makes/);
    expect(refuse({ mkfsOptions: '-m crc=0; rm -rf /' })).toMatch(/mkfsOptions = .* contains '-m crc=0; rm -rf \/', which is not allowed \(allowed: a list of crc=0, crc=1/);
    expect(refuse({ mkfsOptions: 'crc=0,crc=1' })).toMatch(/mkfsOptions = .* contains crc=0 and crc=1, which exclude each other/);
    expect(refuse({ mountOptions: 'inode32,inode64' })).toMatch(/mountOptions = .* contains inode32 and inode64, which exclude each other/);
    expect(refuse({ mountOptions: 'remount' })).toMatch(/mountOptions = "remount" contains 'remount', which is not allowed/);
    expect(refuse({ target: 'relative/dir' })).toMatch(/target = "relative\/dir" must be 'scratch' or an absolute directory path/);
    expect(refuse({ dirs: 0 })).toMatch(/dirs = 0 is below the minimum 1/);
    expect(refuse({ fileSize: '2GiB' })).toMatch(/fileSize = "2GiB" is above the maximum 1GiB/);
  });

  it.each(['metadata-quick', 'metadata-inode-size'])('example %s expands to cells that all run', async (name) => {
    const raw: unknown = parseYaml(await readFile(path.join(repo, 'examples', `${name}.yaml`), 'utf8'));
    const cells = expandMatrix(parseMatrix(raw));
    expect(cells.length).toBeGreaterThan(3);
    for (const cell of cells) expect(metadataSkipReason(cell.params)).toBeUndefined();
  });

  it('skips combinations that do not apply to the filesystem, saying why', () => {
    const skip = (params: Record<string, unknown>) => metadataSkipReason(cellOf(params).params);
    expect(skip({ fs: 'ext4', mountOptions: 'inode32' })).toBe('mountOptions inode32 is for xfs, not ext4');
    expect(skip({ fs: 'ext4', mkfsOptions: 'crc=0' })).toBe('mkfsOptions crc=0 is for xfs, not ext4');
    expect(skip({ fs: 'btrfs', inodeSize: 512 })).toMatch(/btrfs has no fixed inode size/);
    expect(skip({ fs: 'ext4', agCount: 8 })).toMatch(/agCount is an XFS setting/);
    expect(skip({ fs: 'none', inodeSize: 512 })).toMatch(/fs: none measures the target directory as it is; inodeSize/);
    expect(skip({ fs: 'xfs', target: '/srv' })).toMatch(/target applies only to fs: none/);
    expect(skip({ fs: 'xfs', inodeSize: 256, mountOptions: 'inode32', mkfsOptions: 'finobt=0' })).toBeUndefined();
  });

  it('builds mkfs arguments from checked words only, grouping suboptions', () => {
    expect(mkfsArgs('xfs', { inodeSize: 512, agCount: 8, mkfsOptions: ['finobt=0', 'sparse=1', 'nojournal'] })).toEqual([
      '-q',
      '-i',
      'size=512,sparse=1',
      '-d',
      'agcount=8',
      '-m',
      'finobt=0',
    ]);
    expect(mkfsArgs('ext4', { inodeSize: 256, agCount: null, mkfsOptions: ['nojournal', 'inlinedata'] })).toEqual([
      '-q',
      '-F',
      '-I',
      '256',
      '-O',
      '^has_journal,inline_data',
    ]);
  });

  it('computes when XFS inode numbers outgrow 32 bits, as the seed says: 1TiB x inode size / 256', () => {
    // 4KiB blocks, 1TiB allocation groups (2^28 blocks, agblklog 28).
    const bits = (agCount: number, inodeSize: number) => xfsMaxInode(agCount, 2 ** 28, 28, Math.log2(4096 / inodeSize)).toString(2).length;
    expect(bits(1, 256)).toBe(32);
    expect(bits(2, 256)).toBe(33);
    expect(bits(2, 512)).toBe(32);
    expect(bits(6, 2048)).toBe(32);
    expect(bits(9, 2048)).toBe(33);
  });
});
