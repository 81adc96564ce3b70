// Builds the native measurement programs: every native/*.c becomes native/build/<name>.
// They are plain executables (no Node headers, no node-gyp download), so the same step works on
// a fresh machine, in the Docker build stage, and offline. Runs on `npm install` and `npm run build`.
//
//   node native/build.mjs [--strict] [--out DIR]
//
// Warnings do not fail the install: a newer compiler's new warning must not break every user's
// `npm install`, and neither does a missing compiler (see lacking()). The tests build with
// --strict (-Werror, and a missing compiler is an error) so that nothing goes unnoticed here.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

function fail(why) {
  console.error(`fsbench: cannot build the native probes: ${why}`);
  process.exit(1);
}

/**
 * What this machine lacks (a compiler, the C headers) fails the strict build, but not an install:
 * the CLI's other commands (submit, results, compare) and a coordinator need no probe, `fsbench
 * run` and agents say NATIVE_PROBE_MISSING until it is built, and `npm test` builds it after
 * installing the compiler on a fresh machine.
 */
function lacking(why) {
  if (values.strict) fail(why);
  console.error(`fsbench: skipped building the native probes: ${why}, then run 'npm run build'`);
  process.exit(0);
}

let values = { strict: false, out: undefined };
try {
  ({ values } = parseArgs({ options: { strict: { type: 'boolean', default: false }, out: { type: 'string' } } }));
} catch (err) {
  fail(`${err instanceof Error ? err.message : String(err)} (usage: node native/build.mjs [--strict] [--out DIR])`);
}
const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.resolve(values.out ?? path.join(here, 'build'));
const cc = process.env.CC ?? 'cc';
mkdirSync(out, { recursive: true });

for (const file of readdirSync(here).filter((f) => f.endsWith('.c')).sort()) {
  const name = file.slice(0, -2);
  const args = ['-O2', '-g', '-std=gnu11', '-pthread', '-Wall', '-Wextra', ...(values.strict ? ['-Werror'] : []), '-o', path.join(out, name), path.join(here, file), '-lm'];
  const r = spawnSync(cc, args, { encoding: 'utf8', stdio: ['ignore', 'inherit', 'pipe'] });
  if (r.stderr) process.stderr.write(r.stderr);
  if (r.error && 'code' in r.error && r.error.code === 'ENOENT') {
    lacking(`no C compiler '${cc}' found; install one (Debian: apt-get install gcc libc6-dev) or set CC`);
  }
  if (r.error) fail(`${cc} could not run: ${r.error.message}`);
  // gcc without the C library's headers (Debian installs libc6-dev only as a recommendation).
  if (r.status !== 0 && /fatal error: [\w/.]+\.h: No such file/.test(r.stderr ?? '')) {
    lacking(`${cc} finds no C library headers; install them (Debian: apt-get install libc6-dev)`);
  }
  if (r.status !== 0) fail(`${cc} failed on ${file}${r.signal ? ` (${r.signal})` : ''}`);
}
