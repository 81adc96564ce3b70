/**
 * Two agents of one host as compose deploys them, with real processes (the compiled CLI), a real
 * redis-server and the real kernel: each its own scratch directory for its runs, one journal for
 * the host. The first changes max_queued_events in an inotify run and is killed with SIGKILL
 * (its whole process group, probe included, as when its container is removed); the second
 * restores the value, and unmounts the first one's tmpfs, before its first run.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CoordinatorClient } from '../cli/client.js';
import { JOB_KEY_FILE, JOB_PUBLIC_KEY_FILE, writeNewJobKey } from '../queue/signing.js';
import { startRedis, uniquePrefix, type TestRedis } from './fixtures/redis-server.js';
import { preEnroll } from './helpers/enroll.js';
import { until } from './helpers/http.js';
import { CLI, freshCli, mountsUnder } from './helpers/local.js';

const QUEUED = '/proc/sys/fs/inotify/max_queued_events';

let redis: TestRedis;
const children: ChildProcess[] = [];
const dirs: string[] = [];
beforeAll(async () => {
  await freshCli();
  redis = await startRedis();
}, 180_000);
afterAll(async () => {
  await redis.stop();
});
afterEach(async () => {
  for (const c of children.splice(0)) {
    if (c.exitCode === null && c.signalCode === null && c.pid !== undefined) {
      process.kill(-c.pid, 'SIGKILL');
      await new Promise((r) => c.once('exit', r));
    }
  }
  for (const d of dirs.splice(0)) {
    for (const m of mountsUnder(d)) await promisify(execFile)('umount', ['-l', m.split(' ')[1] ?? '']).catch(() => undefined);
    await rm(d, { recursive: true, force: true });
  }
});

interface Proc {
  readonly child: ChildProcess;
  output: () => string;
  waitFor(re: RegExp, ms?: number): Promise<RegExpMatchArray>;
}

/** The CLI in a process group of its own, so a kill takes its children (the probe) with it. */
function fsbench(args: string[], env: Record<string, string>): Proc {
  const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  children.push(child);
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  return {
    child,
    output: () => out,
    waitFor: async (re, ms = 20_000) => {
      const end = Date.now() + ms;
      for (;;) {
        const m = re.exec(out);
        if (m) return m;
        if (child.exitCode !== null || Date.now() > end) throw new Error(`no ${String(re)} in:\n${out}`);
        await sleep(20);
      }
    },
  };
}

async function tempDir(name: string): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), `fsbench-shared-${name}-`));
  dirs.push(d);
  return d;
}

const Matrix = z.object({ state: z.string() }).loose();
const Results = z.object({
  runs: z.array(z.object({ machine: z.string(), state: z.string(), limits: z.object({ maxQueuedEvents: z.number() }).loose().nullish() }).loose()),
});

describe('two agents of one host with separate scratch directories and one journal', () => {
  it("the second restores the max_queued_events the SIGKILLed first one changed, before its first run", async () => {
    const original = Number((await readFile(QUEUED, 'utf8')).trim());
    const changed = original === 20_000 ? 20_001 : 20_000;
    const dataDir = await tempDir('data');
    await writeNewJobKey(dataDir);
    const journalDir = path.join(await tempDir('journal'), 'journal');
    const env = {
      REDIS_URL: redis.url,
      FSBENCH_JOB_KEY: path.join(dataDir, JOB_PUBLIC_KEY_FILE),
      FSBENCH_QUEUE_PREFIX: uniquePrefix('shared-journal'),
      FSBENCH_DATA_DIR: dataDir,
      FSBENCH_PORT: '0',
      FSBENCH_HEARTBEAT: '200ms',
      FSBENCH_STALL_TIMEOUT: '1s',
      // The killed run is given up, not retried: the second agent's first run is the next matrix's.
      FSBENCH_MAX_ATTEMPTS: '1',
      FSBENCH_JOURNAL_DIR: journalDir,
      FSBENCH_HOST_ID: 'one-host',
    };
    const coordinator = fsbench(['coordinator'], env);
    const client = new CoordinatorClient((await coordinator.waitFor(/listening on (http:\/\/\S+);/))[1] ?? '');
    const scratchA = await tempDir('scratch-a');
    // Enrolled before they start (their keys in their state directories, approved with the coordinator's key).
    const enroll = async (scratch: string, machine: string) =>
      preEnroll(redis.url, env.FSBENCH_QUEUE_PREFIX, await readFile(path.join(dataDir, JOB_KEY_FILE), 'utf8'), path.join(scratch, 'agent'), env.FSBENCH_HOST_ID, machine);
    await enroll(scratchA, 'a');
    const a = fsbench(['agent'], { ...env, FSBENCH_MACHINE: 'a', FSBENCH_SCRATCH: scratchA });
    await a.waitFor(/waiting for runs/);

    const long = { name: 'changes-limit', workload: 'inotify', warmup: 0, repetitions: 1, params: { maxQueuedEvents: changed, duration: '30s', files: 8, writers: 1 } };
    await client.json('POST', '/v1/matrices', long);
    // The limit is set before the tmpfs is mounted: wait for both, so the kill leaves both behind.
    await until('the first agent changed max_queued_events and mounted its tmpfs', async () => (Number((await readFile(QUEUED, 'utf8')).trim()) === changed && mountsUnder(scratchA).length === 1 ? true : undefined), { ms: 20_000 });
    if (a.child.pid === undefined) throw new Error('the first agent has no pid');
    process.kill(-a.child.pid, 'SIGKILL');
    await new Promise((r) => a.child.once('exit', r));
    expect(Number((await readFile(QUEUED, 'utf8')).trim())).toBe(changed);

    const scratchB = await tempDir('scratch-b');
    await enroll(scratchB, 'b');
    const b = fsbench(['agent'], { ...env, FSBENCH_MACHINE: 'b', FSBENCH_SCRATCH: scratchB });
    await b.waitFor(/waiting for runs/);
    const { id } = z.object({ id: z.string() }).parse(
      await client.json('POST', '/v1/matrices', { name: 'reads-limit', workload: 'inotify', warmup: 0, repetitions: 1, params: { duration: '100ms', files: 8, writers: 1 } }),
    );
    await until('the second matrix is done', async () => (Matrix.parse(await client.json('GET', `/v1/matrices/${id}`)).state === 'done' ? true : undefined));

    // The run the second agent measured ran under the original limit: restored before it started.
    const { runs } = Results.parse(await client.json('GET', `/v1/matrices/${id}/results`));
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({ machine: 'b', state: 'ok', limits: { maxQueuedEvents: original } });
    expect(Number((await readFile(QUEUED, 'utf8')).trim())).toBe(original);
    expect(b.output()).toContain(`restored what a dead run left: undid ${QUEUED} = ${original}`);
    // The first agent's tmpfs, in its own scratch directory, is gone too, and the journal is empty.
    expect(mountsUnder(scratchA)).toEqual([]);
    expect(readdirSync(journalDir).filter((n) => n.endsWith('.json'))).toEqual([]);
  }, 60_000);
});
