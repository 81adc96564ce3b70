/**
 * The lanes of `npm test` (tests/lanes.ts): every list names real test files, once; and no file
 * of the beside lane, which runs next to the host lane, shows a sign of host-wide state in its
 * code (comments aside; the quick files, which need no root, are beside by their definition and
 * may describe kernel limits in synthetic runs): a kernel limit written or set by a cell's parameters, a loop device or
 * mount made, the host journal opened, the Docker engine driven. A file that gains one fails
 * here until it moves to the host lane.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ALONE, BESIDE, laneOf } from './lanes.js';
import { QUICK } from './quick.js';

const dir = path.dirname(new URL(import.meta.url).pathname);
const files = readdirSync(dir).filter((f) => f.endsWith('.test.ts')).map((f) => f.slice(0, -'.test.ts'.length));

/** What touches the whole machine, as test code spells it. */
const HOST_WIDE: readonly [string, RegExp][] = [
  ['a kernel limit written', /\/proc\/sys\//],
  ["a cell's kernel limit", /\b(maxQueuedEvents|maxUserWatches|maxUserInstances)\b/],
  ['a loop device', /\blosetup\b/],
  ['a mount', /\b(mount|umount)\(|['"](mount|umount)['"]/],
  ['the host journal', /host\/journal\.js/],
  ['the Docker engine', /\bdockerode\b|\b(exec|execFile|execFileSync|spawn|spawnSync)\(\s*['"]docker(-compose)?['"]|\bcomposeStack\b/],
  ['a workload that measures the kernel', /workload: ['"](metadata|watches)['"]/],
];

/** The code of a file without its comments, so that a comment about /proc/sys is no sign. */
function code(name: string): string {
  return readFileSync(path.join(dir, `${name}.test.ts`), 'utf8')
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .split('\n')
    .filter((l) => !l.trim().startsWith('//'))
    .join('\n');
}

describe('the lanes of npm test', () => {
  it('name test files that exist, each once, and leave every other file to the host lane', () => {
    const listed = [...BESIDE, ...ALONE];
    expect(listed.filter((n) => !files.includes(n))).toEqual([]);
    expect(listed.filter((n, i) => listed.indexOf(n) !== i)).toEqual([]);
    expect(files.length).toBeGreaterThan(listed.length);
    expect(laneOf('no-such-file')).toBe('host');
    expect(laneOf('interference')).toBe('alone');
  });

  it('keep every file that touches the whole machine out of the beside lane', () => {
    const scanned = BESIDE.filter((n) => !QUICK.includes(n));
    expect(scanned.length).toBeGreaterThan(0);
    const signs = scanned.flatMap((n) => {
      const text = code(n);
      return HOST_WIDE.filter(([, re]) => re.test(text)).map(([what]) => `${n}: ${what}`);
    });
    expect(signs).toEqual([]);
  });

  it('would see each sign in a file of the host lane that has it', () => {
    // The signs are not dead patterns: files that do these things are caught by them.
    const caught = (name: string): string[] => HOST_WIDE.filter(([, re]) => re.test(code(name))).map(([what]) => what);
    expect(caught('compose')).toContain('the Docker engine');
    expect(caught('metadata')).toContain('a workload that measures the kernel');
    expect(caught('journal')).toContain('the host journal');
    expect(caught('facts')).toContain('a loop device');
  });
});
