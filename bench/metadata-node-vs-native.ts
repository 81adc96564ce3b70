/**
 * Does Node's fs API add measurable time to the metadata phases? Runs every phase with the
 * native loop (native/metadata.c, what the workload uses) and with the same loop written against
 * Node's synchronous fs API (the cheapest Node can do: no thread pool, no promises) and with
 * fs.promises, on one loop-mounted XFS, alternating the order, warm and cold caches.
 *
 *   npm run build && sudo node dist/bench/metadata-node-vs-native.js [--dirs 100] [--files 100]
 *     [--file-size 4096] [--reps 5] [--scratch /var/tmp/fsbench-bench]
 *
 * Prints the median ms per phase and Node's extra microseconds per file.
 */
import { closeSync, lstatSync, mkdirSync, openSync, readSync, rmdirSync, unlinkSync, writeSync, promises as fsp } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Journal } from '../host/journal.js';
import { Teardown } from '../host/teardown.js';
import { dropCaches } from '../workloads/metadata/caches.js';
import { prepareFilesystem } from '../workloads/metadata/filesystem.js';
import type { MetadataParams } from '../workloads/metadata/params.js';
import { phaseArgv, runPhase } from '../workloads/metadata/phases.js';
import { median } from '../stats/summary.js';

type Phase = 'create' | 'readByDir' | 'readInterleaved' | 'stat' | 'unlink';
const PHASES: readonly Phase[] = ['create', 'readByDir', 'readInterleaved', 'stat', 'unlink'];
type Impl = 'native' | 'nodeSync' | 'nodePromises';
const IMPLS: readonly Impl[] = ['native', 'nodeSync', 'nodePromises'];

const { values } = parseArgs({
  options: {
    dirs: { type: 'string', default: '100' },
    files: { type: 'string', default: '100' },
    'file-size': { type: 'string', default: '4096' },
    reps: { type: 'string', default: '5' },
    scratch: { type: 'string', default: '/var/tmp/fsbench-bench' },
  },
});
const dirs = Number(values.dirs);
const files = Number(values.files);
const fileSize = Number(values['file-size']);
const reps = Number(values.reps);

const params: MetadataParams = {
  fs: 'xfs',
  fsSize: 4 * 1024 ** 3,
  inodeSize: null,
  agCount: null,
  mkfsOptions: [],
  mountOptions: [],
  target: 'scratch',
  dirs,
  filesPerDir: files,
  fileSize,
  fsync: 'none',
  cache: 'warm',
};

const width = (n: number) => Math.max(3, String(n - 1).length);
const dirName = (d: number) => `dir.${String(d).padStart(width(dirs), '0')}`;
const fileName = (d: number, f: number) => `${dirName(d)}/file.${String(f).padStart(width(files), '0')}`;
const buf = Buffer.alloc(Math.max(1, Math.min(fileSize, 1024 ** 2)), 'x');

function order(phase: Phase): [number, number][] {
  const out: [number, number][] = [];
  if (phase === 'readInterleaved') for (let f = 0; f < files; f++) for (let d = 0; d < dirs; d++) out.push([d, f]);
  else for (let d = 0; d < dirs; d++) for (let f = 0; f < files; f++) out.push([d, f]);
  return out;
}

/** The same syscalls as the native loop, relative to the cwd as it is relative to its root fd. */
function nodeSync(phase: Phase): void {
  const pairs = order(phase);
  for (const [d, f] of pairs) {
    const name = fileName(d, f);
    if (phase === 'create') {
      if (f === 0) mkdirSync(dirName(d));
      const fd = openSync(name, 'wx', 0o644);
      for (let left = fileSize; left > 0; left -= writeSync(fd, buf, 0, Math.min(left, buf.length)));
      closeSync(fd);
    } else if (phase === 'stat') {
      lstatSync(name);
    } else if (phase === 'unlink') {
      unlinkSync(name);
      if (f === files - 1) rmdirSync(dirName(d));
    } else {
      const fd = openSync(name, 'r');
      for (let got = 0; got < fileSize; got += readSync(fd, buf, 0, Math.min(fileSize - got, buf.length), null));
      closeSync(fd);
    }
  }
}

async function nodePromises(phase: Phase): Promise<void> {
  for (const [d, f] of order(phase)) {
    const name = fileName(d, f);
    if (phase === 'create') {
      if (f === 0) await fsp.mkdir(dirName(d));
      const h = await fsp.open(name, 'wx', 0o644);
      for (let left = fileSize; left > 0; left -= (await h.write(buf, 0, Math.min(left, buf.length))).bytesWritten);
      await h.close();
    } else if (phase === 'stat') {
      await fsp.lstat(name);
    } else if (phase === 'unlink') {
      await fsp.unlink(name);
      if (f === files - 1) await fsp.rmdir(dirName(d));
    } else {
      const h = await fsp.open(name, 'r');
      for (let got = 0; got < fileSize; got += (await h.read(buf, 0, Math.min(fileSize - got, buf.length), null)).bytesRead);
      await h.close();
    }
  }
}

async function timePhase(impl: Impl, phase: Phase, root: string, signal: AbortSignal): Promise<number> {
  if (impl === 'native') return (await runPhase(phaseArgv(phase, root, params), signal)).ns / 1e6;
  const start = performance.now();
  if (impl === 'nodeSync') nodeSync(phase);
  else await nodePromises(phase);
  return performance.now() - start;
}


async function main(): Promise<void> {
  const journal = await Journal.open(path.join(values.scratch, 'journal'));
  await journal.recover();
  const teardown = new Teardown(journal);
  const signal = new AbortController().signal;
  try {
    const target = await prepareFilesystem(teardown, params, values.scratch, () => undefined);
    process.chdir(target.root);
    for (const cache of ['warm', 'cold'] as const) {
      const samples = new Map<string, number[]>();
      for (let rep = 0; rep < reps; rep++) {
        // Rotate which implementation goes first, so none always meets the freshest filesystem.
        const impls = IMPLS.map((_, i) => IMPLS[(i + rep) % IMPLS.length] ?? 'native');
        for (const impl of impls) {
          for (const phase of PHASES) {
            if (cache === 'cold' && phase !== 'create') await dropCaches();
            const ms = await timePhase(impl, phase, target.root, signal);
            const key = `${impl}:${phase}`;
            samples.set(key, [...(samples.get(key) ?? []), ms]);
          }
        }
      }
      console.log(`\n${cache} caches, ${dirs} x ${files} files of ${fileSize} B, median of ${reps} (ms; Node's extra us per file)`);
      console.log(['phase', ...IMPLS, 'sync +us/file', 'promises +us/file'].join('\t'));
      for (const phase of PHASES) {
        const m = IMPLS.map((impl) => median(samples.get(`${impl}:${phase}`) ?? []));
        const [native = 0, sync = 0, promises = 0] = m;
        const extra = (ms: number) => (((ms - native) * 1000) / (dirs * files)).toFixed(1);
        console.log([phase, ...m.map((v) => v.toFixed(1)), extra(sync), extra(promises)].join('\t'));
      }
    }
  } finally {
    process.chdir('/');
    await teardown.dispose();
  }
}

await main();
