/**
 * The summary line CI reads (tests/summary-reporter.ts) against the real vitest on small
 * temporary test files: failures outside any test (import, beforeAll, unhandled errors) count,
 * so the line never says 0 failed when vitest exits non-zero.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, it } from 'vitest';

const ROOT = path.join(import.meta.dirname, '..');
const VITEST = path.join(ROOT, 'node_modules', 'vitest', 'vitest.mjs');
const REPORTER = path.join(ROOT, 'tests', 'summary-reporter.ts');
const dirs: string[] = [];

afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

interface Outcome {
  code: number | null;
  /** The reporter's lines, without the blank line it starts with. */
  lines: string[];
  stderr: string;
}

/** Runs vitest on `files` (name -> source; globals on, so they need no imports) with only the summary reporter. */
function runVitest(files: Record<string, string>): Promise<Outcome> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'fsbench-summary-'));
  dirs.push(dir);
  for (const [name, source] of Object.entries(files)) writeFileSync(path.join(dir, name), source);
  const config = path.join(dir, 'vitest.config.mjs');
  const test = { root: dir, include: ['*.test.js'], globals: true, reporters: [REPORTER], watch: false };
  writeFileSync(config, `export default ${JSON.stringify({ test, cacheDir: path.join(dir, '.cache') })};\n`);
  // This process is itself a vitest worker: its VITEST_* variables would confuse the inner run,
  // and the lane's summary file (FSBENCH_TEST_SUMMARY) is the outer run's.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('VITEST') && !k.startsWith('FSBENCH_TEST')));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [VITEST, 'run', '--config', config], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, lines: stdout.split('\n').filter((l) => l !== ''), stderr });
    });
  });
}

const PASSING = "it('passes', () => {});\n";

// Each case is a separate vitest process: run them side by side to keep this file fast.
describe.concurrent('summary reporter', () => {
  it('counts a file that throws at import and a failing beforeAll as failed, and vitest fails', async ({ expect }) => {
    const r = await runVitest({
      'a-import.test.js': "throw new Error('broken at import');\n",
      'b-before-all.test.js': "describe('setup', () => {\n  beforeAll(() => { throw new Error('broken in beforeAll'); });\n  it('one', () => {});\n  it('two', () => {});\n});\n",
      'c-passing.test.js': PASSING,
    });
    expect(r.code, r.stderr).toBe(1);
    expect(r.lines).toEqual([
      'failed outside a test: a-import.test.js: Error: broken at import',
      'failed outside a test: b-before-all.test.js > setup: Error: broken in beforeAll',
      '1 passed, 2 failed, 2 skipped',
    ]);
  });

  it('counts an unhandled error as failed', async ({ expect }) => {
    const r = await runVitest({
      'a-unhandled.test.js': "it('passes but leaves a rejection behind', async () => {\n  void Promise.reject(new Error('nobody caught this'));\n  await new Promise((r) => setTimeout(r, 50));\n});\n",
    });
    expect(r.code, r.stderr).toBe(1);
    expect(r.lines).toEqual(['failed outside a test: unhandled error: Error: nobody caught this', '1 passed, 1 failed']);
  });

  it('counts a failed test once and says 0 failed only when vitest passes', async ({ expect }) => {
    const [failing, passing] = await Promise.all([
      runVitest({ 'a-failing.test.js': "it('fails', () => { expect(1).toBe(2); });\n", 'b-passing.test.js': PASSING }),
      runVitest({ 'a-passing.test.js': PASSING }),
    ]);
    expect(failing.code, failing.stderr).toBe(1);
    expect(failing.lines).toEqual(['1 passed, 1 failed']);
    expect(passing.code, passing.stderr).toBe(0);
    expect(passing.lines).toEqual(['1 passed, 0 failed']);
  });
});
