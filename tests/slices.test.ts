/**
 * Workloads are slices (docs/adding-a-workload.md): one folder in contract/workloads/, one in
 * workloads/, one line in each registry, and no other product file names a workload or reaches
 * into a slice's folder (tests/helpers/slices.ts says exactly what counts). tests/, bench/,
 * examples/ and docs/ may name workloads: they use them as inputs. Each registered slice also
 * answers what the rest of fsbench asks of it, for its default cell.
 */
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { expandMatrix, parseMatrix } from '../contract/matrix.js';
import { paramsSchema, type ParamSpecs } from '../contract/params.js';
import { containerParams } from '../contract/workloads/container.js';
import { WORKLOAD_NAMES, WORKLOADS } from '../contract/workloads/index.js';
import { PACKAGE_ROOT } from '../host/native.js';
import { RUNNERS } from '../runner/workloads.js';
import { findOffences, formatOffence, sliceFolders, unlistedDirectories } from './helpers/slices.js';

const names = new Set<string>([...WORKLOAD_NAMES, ...sliceFolders(PACKAGE_ROOT)]);

describe('no product file names a workload', () => {
  it('outside its two folders and the two registries, listing each offence as file:line', () => {
    // On failure the diff lists every offence: move that knowledge into the slice, behind a field
    // of WorkloadContract or WorkloadSlice the caller asks instead.
    expect(findOffences(PACKAGE_ROOT, names).map(formatOffence)).toEqual([]);
  });

  it('and every source directory is either scanned or exempt for a stated reason', () => {
    expect(unlistedDirectories(PACKAGE_ROOT)).toEqual([]);
  });

  it('fails on planted files: a name, a template, an import of a slice, and one slice importing another', () => {
    // Written into the tree for the scan to see, removed whatever happens (and ignored by git).
    const planted: Record<string, string> = {
      'host/zz-lint-probe-slice-name.ts': "export const which = (w: string): boolean => w === 'metadata';\n",
      'report/zz-lint-probe-slice-template.ts': 'export const which = `noop`;\n',
      'coordinator/zz-lint-probe-slice-import.ts': "import { noopContract } from '../contract/workloads/noop/index.js';\nexport const c = noopContract;\n",
      'workloads/noop/zz-lint-probe-slice-across.ts': "import { inotifyWorkload } from '../inotify/index.js';\nexport const across = inotifyWorkload;\n",
      'contract/workloads/noop/zz-lint-probe-slice-across.ts': "export { metadataParams } from '../metadata/index.js';\n",
      // Allowed: a slice naming itself and importing its own contract; a comment naming any.
      'workloads/noop/zz-lint-probe-slice-own.ts':
        "import { noopContract } from '../../contract/workloads/noop/index.js';\n// unlike 'inotify'\nexport const own = ['noop', noopContract] as const;\n",
    };
    const files = Object.keys(planted).map((f) => path.join(PACKAGE_ROOT, f));
    try {
      for (const [file, text] of Object.entries(planted)) writeFileSync(path.join(PACKAGE_ROOT, file), text);
      const found = findOffences(PACKAGE_ROOT, names)
        .filter((o) => o.file.includes('zz-lint-probe-slice'))
        .map(formatOffence);
      expect(found).toEqual([
        "contract/workloads/noop/zz-lint-probe-slice-across.ts:1: the noop slice imports the metadata slice (contract/workloads/metadata/index.js)",
        'coordinator/zz-lint-probe-slice-import.ts:1: imports the noop slice (contract/workloads/noop/index.js)',
        "host/zz-lint-probe-slice-name.ts:1: names the workload 'metadata'",
        "report/zz-lint-probe-slice-template.ts:1: names the workload 'noop'",
        'workloads/noop/zz-lint-probe-slice-across.ts:1: the noop slice imports the inotify slice (workloads/inotify/index.js)',
      ]);
    } finally {
      for (const f of files) rmSync(f, { force: true });
    }
  });
});

describe('each workload is one folder in each tree and one line in each registry', () => {
  it('registered in both registries, with both folders', () => {
    expect(Object.keys(RUNNERS)).toEqual([...WORKLOAD_NAMES]);
    expect(sliceFolders(PACKAGE_ROOT)).toEqual([...WORKLOAD_NAMES].sort());
    for (const name of WORKLOAD_NAMES) {
      expect(existsSync(path.join(PACKAGE_ROOT, 'contract/workloads', name, 'index.ts')), `contract/workloads/${name}/index.ts`).toBe(true);
      expect(existsSync(path.join(PACKAGE_ROOT, 'workloads', name, 'index.ts')), `workloads/${name}/index.ts`).toBe(true);
    }
  });

  it.each(WORKLOAD_NAMES)('%s answers for its default cell: parameters, estimate, host needs, native programs, sandbox', (name) => {
    const slice = WORKLOADS[name];
    const [cell] = expandMatrix(parseMatrix({ name: 'slice', workload: name }));
    if (!cell) throw new Error('a matrix without params has its default cell');
    // The derived schema reads every declared parameter of a default cell.
    expect(Object.keys(paramsSchema(slice.params).parse(cell.params)).sort()).toEqual(Object.keys(slice.params).sort());
    expect(slice.skipReason(cell.params)).toBeUndefined();
    const estimate = slice.estimateRunMs(cell.params);
    expect(Number.isFinite(estimate) && estimate >= 0).toBe(true);
    expect(Array.isArray(RUNNERS[name].hostNeeds(cell))).toBe(true);
    for (const program of slice.native) expect(existsSync(path.join(PACKAGE_ROOT, 'native', `${program}.c`)), `native/${program}.c`).toBe(true);
    // A slice runs in a sandbox exactly when it takes the container's parameters.
    expect(slice.sandbox !== null).toBe(Object.hasOwn(slice.params, 'container.storage'));
    const workDir = slice.sandbox?.workDirParam(cell.params);
    if (workDir !== undefined) expect(Object.hasOwn(slice.params, workDir)).toBe(true);
  });
});

describe('paramsSchema', () => {
  const specs = {
    size: { kind: 'size', min: 1024, max: 1024 ** 2, default: '4KiB', doc: '' },
    queue: { kind: 'integer', min: 16, max: 100, default: 'system', keywords: ['system'], doc: '' },
    mode: { kind: 'enum', values: ['a', 'b'], default: 'a', doc: '' },
    on: { kind: 'boolean', default: false, doc: '' },
    ...containerParams,
  } as const satisfies ParamSpecs;
  const schema = paramsSchema(specs);

  it('types each value from its spec, fills defaults and leaves out names it does not declare', () => {
    const p = schema.parse({ size: 2048, mode: 'b', other: 1 });
    expect(p).toEqual({ size: 2048, queue: 'system', mode: 'b', on: false, 'container.storage': 'none', 'container.cpus': 0, 'container.memory': 0 });
    // Typed: a number or the keyword, an enum's values.
    const queue: number | 'system' = p.queue;
    const mode: 'a' | 'b' = p.mode;
    expect([queue, mode]).toEqual(['system', 'b']);
  });

  it('refuses what the spec refuses, in its words', () => {
    expect(schema.safeParse({ size: 512 }).error?.issues[0]?.message).toBe('512 is below the minimum 1KiB');
    expect(schema.safeParse({ mode: 'c' }).success).toBe(false);
    expect(schema.safeParse({ queue: 'auto' }).success).toBe(false);
    expect(schema.safeParse({ 'container.memory': 1024 }).error?.issues[0]?.message).toBe('1024 must be 0 (no limit) or at least 64MiB');
  });
});
