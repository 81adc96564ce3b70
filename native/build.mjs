// Builds the native measurement programs: every native/*.c becomes native/build/<name>.
// They are plain executables (no Node headers, no node-gyp download), so the same step works on
// a fresh machine, in the Docker build stage, and offline. Runs on `npm install` and `npm run build`.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.join(here, 'build');
const cc = process.env.CC ?? 'cc';
mkdirSync(out, { recursive: true });

for (const file of readdirSync(here).filter((f) => f.endsWith('.c')).sort()) {
  const name = file.slice(0, -2);
  const args = ['-O2', '-g', '-std=gnu11', '-pthread', '-Wall', '-Wextra', '-Werror', '-o', path.join(out, name), path.join(here, file), '-lm'];
  try {
    execFileSync(cc, args, { stdio: 'inherit' });
  } catch (err) {
    const why = err instanceof Error && 'code' in err && err.code === 'ENOENT' ? `no C compiler '${cc}' found (install gcc or set CC)` : `${cc} failed on ${file}`;
    console.error(`fsbench: cannot build the native probes: ${why}`);
    process.exit(1);
  }
}
