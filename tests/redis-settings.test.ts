/**
 * Redis as production wants it (issue 21, item 5), against real redis-server processes: the
 * coordinator refuses an evicting maxmemory-policy with REDIS_EVICTS (the compiled CLI exits 2
 * with one line naming the setting and the fix), starts on noeviction, and says what a restart
 * of its Redis would lose; with CONFIG renamed away (managed Redis) it reads what INFO tells.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startCoordinator } from '../coordinator/server.js';
import { FsbenchError } from '../contract/errors.js';
import { startRedis, uniquePrefix, type RedisServerOptions, type TestRedis } from './fixtures/redis-server.js';
import { CLI, freshCli } from './helpers/local.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});
beforeAll(async () => {
  await freshCli();
}, 180_000);

async function redisWith(opts: RedisServerOptions): Promise<TestRedis> {
  const r = await startRedis(opts);
  cleanups.push(() => r.stop());
  return r;
}

async function tempDir(): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), 'fsbench-redis-settings-'));
  cleanups.push(() => rm(d, { recursive: true, force: true }));
  return d;
}

interface SettingsLine {
  readonly event?: string;
  readonly msg: string;
  readonly maxmemoryPolicy?: string | null;
  readonly restartLoses?: string;
  readonly unchecked?: string | null;
}

/** Starts a coordinator in this process against `redisUrl`; its `redis.settings` line, or the error it refused with. */
async function start(redisUrl: string): Promise<{ line?: SettingsLine; error?: FsbenchError }> {
  const lines: SettingsLine[] = [];
  try {
    const c = await startCoordinator(
      {
        redisUrl, queuePrefix: uniquePrefix('settings'), port: 0, host: '127.0.0.1', token: undefined, readAuth: 'open', dataDir: await tempDir(),
        maxAttempts: 3, maxBody: 64 * 1024, maxRuns: 1000, maxDuration: 86_400_000, maxQueued: 1000, hostTimeout: 600_000,
      },
      (line) => lines.push(JSON.parse(line) as SettingsLine),
    );
    cleanups.push(() => c.stop());
  } catch (err) {
    if (err instanceof FsbenchError) return { error: err };
    throw err;
  }
  return { line: lines.find((l) => l.event === 'redis.settings') };
}

describe("the coordinator's check of its Redis", () => {
  it('refuses an evicting maxmemory-policy: the CLI exits 2 with REDIS_EVICTS, naming the setting and the fix', async () => {
    const redis = await redisWith({ args: ['--maxmemory-policy', 'allkeys-lru'] });
    const child = spawn(process.execPath, [CLI, 'coordinator'], {
      env: { ...process.env, REDIS_URL: redis.url, FSBENCH_DATA_DIR: await tempDir(), FSBENCH_PORT: '0', FSBENCH_QUEUE_PREFIX: uniquePrefix('evicts') },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const started = Date.now();
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    // It exits at once: no connection left open keeps it alive.
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(code).toBe(2);
    const last = stderr.trim().split('\n').at(-1) ?? '';
    expect(last).toMatch(/^fsbench: Redis at redis:\/\/127\.0\.0\.1:\d+\/? has maxmemory-policy allkeys-lru: .* Set maxmemory-policy noeviction .* \[REDIS_EVICTS\]$/);
  }, 30_000);

  it('starts on noeviction and says a restart of an AOF-everysec Redis loses about a second', async () => {
    const redis = await redisWith({});
    const { line, error } = await start(redis.url);
    expect(error).toBeUndefined();
    expect(line).toMatchObject({ maxmemoryPolicy: 'noeviction', unchecked: null, restartLoses: 'about the last second of writes (AOF, appendfsync everysec)' });
    expect(line?.msg).toMatch(/maxmemory-policy noeviction; a restart of it would lose about the last second of writes/);
  });

  it('says a restart of a Redis without AOF or snapshots loses everything, and one with snapshots what came since the last', async () => {
    const none = await redisWith({ args: ['--appendonly', 'no', '--save', ''] });
    expect((await start(none.url)).line?.restartLoses).toMatch(/^everything: queued runs, reports not yet collected, enrolled agents \(no AOF, no RDB snapshots\)/);
    const rdb = await redisWith({ args: ['--appendonly', 'no', '--save', '3600 1'] });
    expect((await start(rdb.url)).line?.restartLoses).toMatch(/^every write since the last RDB snapshot, the last \d+ s ago \(no AOF; save 3600 1\)/);
  });

  it('with CONFIG renamed away (managed Redis): reads the policy from INFO, refuses an evicting one, and starts otherwise saying what it could not check', async () => {
    const evicting = await redisWith({ args: ['--rename-command', 'CONFIG', '', '--maxmemory-policy', 'volatile-lru'] });
    expect((await start(evicting.url)).error).toMatchObject({ code: 'REDIS_EVICTS', message: expect.stringContaining('maxmemory-policy volatile-lru') as unknown });
    const managed = await redisWith({ args: ['--rename-command', 'CONFIG', ''] });
    const { line, error } = await start(managed.url);
    expect(error).toBeUndefined();
    expect(line).toMatchObject({ maxmemoryPolicy: 'noeviction', restartLoses: 'the writes not yet synced to the append-only file (AOF, appendfsync not readable)' });
    expect(line?.unchecked).toMatch(/^CONFIG GET is not allowed \(ERR unknown command 'CONFIG'/);
  });
});
