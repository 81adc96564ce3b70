/**
 * `npm install` builds the native programs without -Werror, so that a newer compiler's new
 * warning cannot break a user's install; here they must build with no warning at all
 * (`--strict`). Built into a temporary directory: other tests run native/build's programs.
 */
import { spawnSync } from 'node:child_process';
import { accessSync, constants, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = path.join(import.meta.dirname, '..');
const BUILD = path.join(ROOT, 'native', 'build.mjs');
const out = mkdtempSync(path.join(os.tmpdir(), 'fsbench-native-'));

afterAll(() => {
  rmSync(out, { recursive: true, force: true });
});

function build(args: string[], env: NodeJS.ProcessEnv = process.env) {
  return spawnSync(process.execPath, [BUILD, ...args], { encoding: 'utf8', env, timeout: 120_000 });
}

describe('native build', () => {
  it('compiles every native program with -Werror and no warning', () => {
    const r = build(['--strict', '--out', out]);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const sources = readdirSync(path.join(ROOT, 'native')).filter((f) => f.endsWith('.c')).map((f) => f.slice(0, -2));
    expect(sources.length).toBeGreaterThan(0);
    expect(readdirSync(out).sort()).toEqual(sources.sort());
    for (const name of sources) accessSync(path.join(out, name), constants.X_OK);
  });

  it('says in one line what to install when there is no C compiler, without failing an install', () => {
    const env = { ...process.env, CC: 'fsbench-no-such-cc' };
    const install = build(['--out', out], env);
    expect(install.status).toBe(0);
    expect(install.stderr).toBe(
      "fsbench: skipped building the native probes: no C compiler 'fsbench-no-such-cc' found; install one (Debian: apt-get install gcc libc6-dev) or set CC, then run 'npm run build'\n",
    );
    const strict = build(['--strict', '--out', out], env);
    expect(strict.status).toBe(1);
    expect(strict.stderr).toBe("fsbench: cannot build the native probes: no C compiler 'fsbench-no-such-cc' found; install one (Debian: apt-get install gcc libc6-dev) or set CC\n");
  });
});
