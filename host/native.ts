/** Where the native measurement programs built by `native/build.mjs` live. */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { FsbenchError } from '../contract/errors.js';

/** The repository (or installed package) root: the nearest ancestor holding `native/build.mjs`. */
function packageRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(path.join(dir, 'native', 'build.mjs'))) return dir;
    const parent = path.dirname(dir);
    if (parent === dir) return process.cwd();
    dir = parent;
  }
}

const root = packageRoot();

/** Path of a native program, or NATIVE_PROBE_MISSING saying how to build it. */
export function nativeProgram(name: string): string {
  const file = path.join(root, 'native', 'build', name);
  if (!existsSync(file)) {
    throw new FsbenchError(
      'NATIVE_PROBE_MISSING',
      `the native program ${file} is missing: run 'npm install' or 'npm run build' (needs a C compiler)`,
    );
  }
  return file;
}

export const PACKAGE_ROOT = root;
