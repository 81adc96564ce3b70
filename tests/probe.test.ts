/**
 * The native probe (native/probe.c) run for real on a temporary directory with small parameters:
 * its command line, its JSON output, and the invariants a user relies on.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { SysInfo } from '../host/fingerprint.js';
import { ProbeOutput } from '../workloads/inotify/probe.js';

type Result = ProbeOutput;

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PROBE = path.join(ROOT, 'native', 'build', 'probe');
const SOURCE = path.join(ROOT, 'native', 'probe.c');
const MAX_QUEUED = '/proc/sys/fs/inotify/max_queued_events';

// The schema the workload parses the probe's output with: these tests hold the probe to it.
const Result = ProbeOutput;

const ErrorLine = z
  .object({
    error: z
      .object({
        code: z.enum(['USAGE', 'PROBE_FAILED', 'PRIVILEGE_MISSING', 'LIMIT_REACHED', 'PIN_UNAVAILABLE', 'TARGET_UNUSABLE']),
        message: z.string().min(10),
      })
      .strict(),
  })
  .strict();

const Ready = z.object({ ready: z.literal(true) }).strict();

interface Exit {
  readonly code: number | null;
  readonly lines: readonly unknown[];
  readonly stderr: string;
}

function parseLines(out: string): unknown[] {
  return out
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => {
      try {
        return JSON.parse(l) as unknown;
      } catch {
        throw new Error(`the probe printed a line that is not JSON: ${l}`);
      }
    });
}

/** Runs the probe to completion (stdin closed) and parses every stdout line as JSON. */
function probe(args: readonly string[], timeoutMs = 20_000): Promise<Exit> {
  return new Promise((resolve, reject) => {
    const child = spawn(PROBE, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      try {
        resolve({ code, lines: parseLines(out), stderr: err });
      } catch (e) {
        reject(e instanceof Error ? e : new Error(String(e)));
      }
    });
  });
}

type Opts = Readonly<Record<string, string | number>>;

const SMALL: Opts = {
  files: 32,
  writers: 4,
  'duration-ms': 300,
  'write-bytes': 1,
  'buffer-bytes': 65536,
  watch: 'files',
  mode: 'concurrent',
  reader: 'full',
};

function inotifyArgs(dir: string, opts: Opts): string[] {
  const all: Opts = { dir, ...SMALL, ...opts };
  return ['inotify', ...Object.entries(all).flatMap(([k, v]) => [`--${k}`, String(v)])];
}

/** A successful run: exit 0 and exactly one result line. */
async function run(dir: string, opts: Opts): Promise<Result> {
  const r = await probe(inotifyArgs(dir, opts));
  expect(r.stderr).toBe('');
  expect(r.lines, JSON.stringify(r.lines)).toHaveLength(1);
  expect(r.code).toBe(0);
  return Result.parse(r.lines[0]);
}

/** What holds for every run, whatever the parameters. */
function checkInvariants(r: Result): void {
  expect(r.events).toBeLessThanOrEqual(r.writes);
  expect(r.markerEvents).toBeLessThanOrEqual(r.markerWrites);
  // Every record read is an event, a marker event or an overflow (nothing else writes the directory).
  expect(r.records).toBe(r.events + r.markerEvents + r.overflows);
  expect(r.bytesRead).toBeGreaterThanOrEqual(r.records * 16);
  expect(r.maxRecordsPerRead).toBeLessThanOrEqual(r.records);
  if (r.records > 0) expect(r.reads).toBeGreaterThan(0);
  expect(r.writeNs).toBeLessThanOrEqual(r.elapsedNs);
  expect(r.drainNs).toBeLessThanOrEqual(r.elapsedNs);
  if (r.firstEventNs !== null && r.lastEventNs !== null) {
    expect(r.firstEventNs).toBeLessThanOrEqual(r.lastEventNs);
    expect(r.lastEventNs).toBeLessThanOrEqual(r.elapsedNs);
  }
  expect(r.maxRssBytes).toBeGreaterThan(0);

  const { latency: l } = r;
  expect(l.buckets.reduce((s, b) => s + b[2], 0)).toBe(l.samples);
  let previousHigh = 0;
  for (const [low, high] of l.buckets) {
    expect(low).toBeGreaterThanOrEqual(previousHigh);
    expect(high).toBeGreaterThan(low);
    // Log-linear: at most 1/32 relative width above the exact range.
    if (low >= 64) expect((high - low) / low).toBeLessThanOrEqual(1 / 32);
    previousHigh = high;
  }
  if (l.samples === 0) {
    expect([l.p50Ns, l.p90Ns, l.p99Ns, l.maxNs]).toEqual([null, null, null, null]);
    expect(l.buckets).toEqual([]);
  }
}

function latencyOrder(r: Result): { p50: number; p90: number; p99: number; max: number } {
  const { p50Ns, p90Ns, p99Ns, maxNs } = r.latency;
  if (p50Ns === null || p90Ns === null || p99Ns === null || maxNs === null) throw new Error('no latency percentiles');
  return { p50: p50Ns, p90: p90Ns, p99: p99Ns, max: maxNs };
}

/** Every workload file holds 0 bytes (never written) or `writeBytes` (pwrite at offset 0); some were written. */
function expectWritten(dir: string, files: number, writeBytes: number): void {
  const sizes = fileSizes(dir);
  expect(sizes).toHaveLength(files);
  expect(sizes.filter((s) => s !== 0 && s !== writeBytes)).toEqual([]);
  expect(sizes).toContain(writeBytes);
}

function fileSizes(dir: string): number[] {
  return readdirSync(dir)
    .filter((n) => n.startsWith('file.'))
    .map((n) => statSync(path.join(dir, n)).size);
}

beforeAll(() => {
  // Build when the binary is missing or older than its source (the build step is `npm install`).
  if (!existsSync(PROBE) || statSync(PROBE).mtimeMs < statSync(SOURCE).mtimeMs) {
    execFileSync(process.execPath, [path.join(ROOT, 'native', 'build.mjs')], { stdio: 'inherit' });
  }
});

let dir = '';
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'fsbench-probe-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('probe sysinfo', () => {
  it('prints cache sizes, page size and CPU counts as one JSON line', async () => {
    const r = await probe(['sysinfo']);
    expect(r.code).toBe(0);
    expect(r.lines).toHaveLength(1);
    const info = SysInfo.parse(r.lines[0]);
    expect(info.pageSize).toBe(4096);
    expect(info.allowedCpus).toBeLessThanOrEqual(info.onlineCpus);
  });
});

describe('probe inotify', () => {
  it('never reports more events than writes, with one watch per file', async () => {
    const r = await run(dir, { 'sample-every': 0 });
    checkInvariants(r);
    expect(r.writes).toBeGreaterThan(100);
    expect(r.events).toBeGreaterThan(0);
    expect(r.markerWrites).toBe(0);
    expect(r.latency.samples).toBe(0);
    expect(r.firstEventNs).not.toBeNull();
    expect(r.drainTimedOut).toBe(0);
    expect([r.pinned, r.readerNice, r.readerCpu]).toEqual([false, null, null]);
    expect(r.reader.userNs + r.reader.sysNs).toBeGreaterThan(0);
    // No markers without sampling; every workload file exists and was written.
    expect(readdirSync(dir).filter((n) => n.startsWith('mark.'))).toEqual([]);
    expectWritten(dir, 32, 1);
  });

  it('maps directory-watch events back to files by name', async () => {
    const r = await run(dir, { watch: 'dir', 'write-bytes': 3, 'sample-every': 0 });
    checkInvariants(r);
    expect(r.events).toBeGreaterThan(0);
    // Records carry "file.NNNNN" (NUL-padded to 16 bytes): 32 bytes each; an overflow record has no name.
    expect(r.bytesRead).toBe((r.records - r.overflows) * 32 + r.overflows * 16);
    expectWritten(dir, 32, 3);
  });

  it.each(['files', 'dir'])('samples write-to-event latency with --watch %s', async (watch) => {
    const r = await run(dir, { watch, writers: 2, files: 8, 'sample-every': 16 });
    checkInvariants(r);
    expect(r.markerWrites).toBeGreaterThan(0);
    expect(r.markerEvents).toBeGreaterThan(0);
    expect(r.latency.samples).toBeGreaterThan(0);
    expect(r.latency.samples).toBeLessThanOrEqual(r.markerEvents);
    const { p50, p90, p99, max } = latencyOrder(r);
    expect(p50).toBeLessThanOrEqual(p90);
    expect(p90).toBeLessThanOrEqual(p99);
    expect(p99).toBeLessThanOrEqual(max);
    expect(max).toBeLessThan(r.elapsedNs);
    // The maximum lies in the last non-empty bucket.
    const last = r.latency.buckets.at(-1);
    expect(last).toBeDefined();
    if (last) {
      expect(max).toBeGreaterThanOrEqual(last[0]);
      expect(max).toBeLessThan(last[1]);
    }
    expect(readdirSync(dir).filter((n) => n.startsWith('mark.'))).toHaveLength(2);
  });

  it('counts overflows from a tiny queue, a 4 KiB buffer and a nice 19 reader', async ({ skip }) => {
    const original = readFileSync(MAX_QUEUED, 'utf8').trim();
    try {
      // The kernel copies the value into each instance at inotify_init: set it before the spawn.
      writeFileSync(MAX_QUEUED, '64');
    } catch {
      skip(`${MAX_QUEUED} is not writable here`);
    }
    let r: Result;
    try {
      r = await run(dir, { writers: 8, files: 64, 'buffer-bytes': 4096, 'reader-nice': 19, 'sample-every': 16 });
    } finally {
      writeFileSync(MAX_QUEUED, original);
    }
    expect(readFileSync(MAX_QUEUED, 'utf8').trim()).toBe(original);
    checkInvariants(r);
    expect(r.overflows).toBeGreaterThan(0);
    expect(r.readerNice).toBe(19);
    // A 4 KiB buffer holds at most 256 records of 16 bytes.
    expect(r.maxRecordsPerRead).toBeLessThanOrEqual(4096 / 16);
    expect(r.events).toBeLessThan(r.writes);
  });

  it('measures the read path alone in drain mode', async () => {
    const r = await run(dir, { mode: 'drain', files: 256, 'buffer-bytes': 1 << 20, 'sample-every': 0 });
    checkInvariants(r);
    expect(r.events).toBeGreaterThan(0);
    // The reader reads nothing while the writers write: at most one overflow record.
    expect(r.overflows).toBeLessThanOrEqual(1);
    expect(r.firstEventNs).not.toBeNull();
    expect(r.firstEventNs ?? 0).toBeGreaterThanOrEqual(r.writeNs);
    expect(r.drainNs).toBeGreaterThan(0);
    expect(r.elapsedNs).toBeGreaterThanOrEqual(r.writeNs + r.drainNs);
  });

  it('runs the bare read loop with the same counters and no latency sampling', async () => {
    const r = await run(dir, { reader: 'bare' });
    checkInvariants(r);
    expect(r.events).toBeGreaterThan(0);
    expect(r.markerWrites).toBe(0);
    expect(r.latency.samples).toBe(0);
  });

  it('pins the reader and the writers, or says why it cannot', async () => {
    const r = await probe(inotifyArgs(dir, { pin: 1, 'reader-nice': 5 }));
    const info = SysInfo.parse((await probe(['sysinfo'])).lines[0]);
    if (info.allowedCpus >= 2) {
      expect(r.code).toBe(0);
      const out = Result.parse(r.lines[0]);
      checkInvariants(out);
      expect(out.pinned).toBe(true);
      expect(out.readerCpu).not.toBeNull();
      expect(out.readerNice).toBe(5);
    } else {
      expect(r.code).toBe(3);
      expect(ErrorLine.parse(r.lines[0]).error.code).toBe('PIN_UNAVAILABLE');
    }
  });

  it('with --reader none prints the ready line and writes only after a line on stdin', async () => {
    const child = spawn(PROBE, inotifyArgs(dir, { reader: 'none', 'write-bytes': 3 }), { stdio: ['pipe', 'pipe', 'pipe'] });
    const closed = new Promise<number | null>((resolve) => child.on('close', resolve));
    const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
    try {
      const ready = await lines.next();
      expect(Ready.parse(JSON.parse(String(ready.value)))).toEqual({ ready: true });
      // The files exist and nothing has been written while the probe waits.
      await sleep(300);
      expect(child.exitCode).toBeNull();
      expect(fileSizes(dir)).toEqual(Array<number>(32).fill(0));
      child.stdin.end('go\n');
      const result = await lines.next();
      const r = Result.parse(JSON.parse(String(result.value)));
      expect(await closed).toBe(0);
      expect((await lines.next()).done).toBe(true);
      checkInvariants(r);
      expect(r.writes).toBeGreaterThan(0);
      expect([r.records, r.events, r.reads, r.markerWrites, r.drainNs]).toEqual([0, 0, 0, 0, 0]);
      expect([r.firstEventNs, r.lastEventNs, r.readerNice, r.readerCpu]).toEqual([null, null, null, null]);
      expect(r.reader).toEqual({ userNs: 0, sysNs: 0, voluntaryCtxSwitches: 0, involuntaryCtxSwitches: 0 });
      expectWritten(dir, 32, 3);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });

  it.each([
    ['a buffer below the kernel minimum', ['--buffer-bytes', '100'], '272'],
    ['zero writers', ['--writers', '0'], '--writers'],
    ['an unknown watch kind', ['--watch', 'both'], 'files or dir'],
    ['an unknown option', ['--bogus', '1'], 'unknown option'],
    ['drain mode without a reader', ['--mode', 'drain', '--reader', 'none'], 'drain'],
    ['a non-numeric duration', ['--duration-ms', '1s'], '--duration-ms'],
  ])('refuses %s with exit 2 and a JSON USAGE error', async (_what, override, mentions) => {
    const args = inotifyArgs(dir, {});
    for (let i = 0; i + 1 < override.length; i += 2) {
      const [name, value] = [override[i] ?? '', override[i + 1] ?? ''];
      const at = args.indexOf(name);
      if (at >= 0) args.splice(at, 2, name, value);
      else args.push(name, value);
    }
    const r = await probe(args);
    expect(r.code).toBe(2);
    expect(r.lines).toHaveLength(1);
    const { error } = ErrorLine.parse(r.lines[0]);
    expect(error.code).toBe('USAGE');
    expect(error.message).toContain(mentions);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('refuses a missing required option and an unknown subcommand with exit 2', async () => {
    const missing = await probe(inotifyArgs(dir, {}).filter((a, i, all) => a !== '--reader' && all[i - 1] !== '--reader'));
    expect(missing.code).toBe(2);
    expect(ErrorLine.parse(missing.lines[0]).error.message).toContain('--reader is required');
    const unknown = await probe(['bogus']);
    expect(unknown.code).toBe(2);
    expect(ErrorLine.parse(unknown.lines[0]).error.code).toBe('USAGE');
  });

  it('reports a directory it cannot use with exit 3 and TARGET_UNUSABLE', async () => {
    const r = await probe(inotifyArgs(path.join(dir, 'missing'), {}));
    expect(r.code).toBe(3);
    expect(r.lines).toHaveLength(1);
    const { error } = ErrorLine.parse(r.lines[0]);
    expect(error.code).toBe('TARGET_UNUSABLE');
    expect(error.message).toContain('No such file or directory');
  });
});
