/**
 * The version of this fsbench: package.json's, read once. The CLI's `--version`, each run's
 * fingerprint, the coordinator's /healthz and its `fsbench_build_info` metric all say this one
 * value, so an agent of another version is told apart wherever it shows.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { PACKAGE_ROOT } from './native.js';

function readVersion(): string {
  try {
    return z.object({ version: z.string().min(1).max(64) }).parse(JSON.parse(readFileSync(path.join(PACKAGE_ROOT, 'package.json'), 'utf8'))).version;
  } catch {
    // A package without its package.json is broken, but its runs still say they came from it.
    return 'unknown';
  }
}

export const FSBENCH_VERSION: string = readVersion();
