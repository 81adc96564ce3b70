/**
 * Redis Sentinel with real processes: a primary, a replica and three sentinels
 * (tests/fixtures/redis-sentinel.ts), a coordinator and two agents as the CLI starts them,
 * configured only through FSBENCH_REDIS_SENTINELS and the password files. The primary is killed
 * with SIGKILL in the middle of a matrix; the sentinels promote the replica; the matrix must
 * complete with every run stored exactly once. The test prints how long runs stopped completing
 * (one JSON line, `sentinel-failover`), for docs/operating.md to quote.
 */
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CoordinatorClient } from '../cli/client.js';
import { redisOptions, refusal, shownRedis } from '../queue/redis.js';
import { JOB_KEY_FILE, JOB_PUBLIC_KEY_FILE, writeNewJobKey } from '../queue/signing.js';
import { loadSettings } from '../settings/index.js';
import { startSentinelGroup, type SentinelGroup } from './fixtures/redis-sentinel.js';
import { uniquePrefix } from './fixtures/redis-server.js';
import { preEnroll } from './helpers/enroll.js';
import { freshCli } from './helpers/local.js';
import { cutReplication, expectStoredOnce, sampleProgress, submit, throughLossyFailover } from './helpers/failover.js';
import { useCliProcesses, type Proc } from './helpers/processes.js';

const PASSWORD = 'data-n0des-secret';
const SENTINEL_PASSWORD = 'sentinel-s3cret';

describe('Sentinel settings', () => {
  it('parses FSBENCH_REDIS_SENTINELS (default port 26379, IPv6 in brackets) and refuses what is not host:port', () => {
    const s = loadSettings(['redisSentinels', 'redisMaster'], {}, { FSBENCH_REDIS_SENTINELS: 'a.example:26380, [::1]:1 ,b' });
    expect(s.redisSentinels).toEqual([{ host: 'a.example', port: 26380 }, { host: '::1', port: 1 }, { host: 'b', port: 26379 }]);
    expect(s.redisMaster).toBe('mymaster');
    expect(() => loadSettings(['redisSentinels'], {}, { FSBENCH_REDIS_SENTINELS: 'a:1,b:99999' })).toThrow(/FSBENCH_REDIS_SENTINELS .*"b:99999" is not host:port/);
    expect(() => loadSettings(['redisSentinels'], {}, { FSBENCH_REDIS_SENTINELS: ' , ' })).toThrow(/names no sentinel/);
    expect(() => loadSettings(['redisMaster'], {}, { FSBENCH_REDIS_MASTER: 'my master' })).toThrow(/FSBENCH_REDIS_MASTER/);
  });

  it('builds ioredis Sentinel options from the same channel, TLS to the primary and to the sentinels, no password shown', () => {
    const channel = {
      redisUrl: `rediss://fsbench:${PASSWORD}@ignored.example:6379/2`,
      redisSentinels: [{ host: 's1.example', port: 26379 }, { host: '::1', port: 26380 }],
      redisMaster: 'queues',
      redisSentinelPassword: SENTINEL_PASSWORD,
      redisSentinelTls: true,
    };
    const o = redisOptions(channel, 'n');
    expect(o).toMatchObject({
      sentinels: [{ host: 's1.example', port: 26379 }, { host: '::1', port: 26380 }],
      name: 'queues',
      sentinelPassword: SENTINEL_PASSWORD,
      username: 'fsbench',
      password: PASSWORD,
      db: 2,
      enableTLSForSentinelMode: true,
      tls: { rejectUnauthorized: true },
      sentinelTLS: { rejectUnauthorized: true },
      maxRetriesPerRequest: null,
    });
    // The URL's host is not where the connection goes: its name must not be what certificates are checked against.
    expect(o.tls?.servername).toBeUndefined();
    expect(o.host).toBeUndefined();
    const shown = shownRedis(channel);
    expect(shown).toBe('the primary of queues (sentinels s1.example:26379,[::1]:26380, TLS; rediss://fsbench:redacted@ignored.example:6379/2)');
    expect(shown).not.toContain(PASSWORD);
    const refused = refusal(new Error('All sentinels are unreachable. Retrying from scratch after 100ms. Last error: WRONGPASS invalid username-password pair'), channel);
    expect(refused?.code).toBe('REDIS_REFUSED');
    expect(refused?.message).toMatch(/sentinels .* refused fsbench \(WRONGPASS\): check FSBENCH_REDIS_SENTINEL_PASSWORD/);
    expect(refused?.message).not.toContain(SENTINEL_PASSWORD);
  });

  it('refuses sentinel credentials without sentinels rather than ignoring them', () => {
    expect(() => redisOptions({ redisUrl: 'redis://127.0.0.1:6379', redisSentinelPassword: 'x' }, 'n')).toThrow(/FSBENCH_REDIS_SENTINEL_PASSWORD set, but FSBENCH_REDIS_SENTINELS is not/);
    expect(() => redisOptions({ redisUrl: 'redis://127.0.0.1:6379', redisSentinelTls: true }, 'n')).toThrow(/FSBENCH_REDIS_SENTINEL_TLS set/);
  });
});

let group: SentinelGroup;

const { fsbench, tempDir } = useCliProcesses({ waitMs: 30_000 });

beforeAll(async () => {
  await freshCli();
  group = await startSentinelGroup({ password: PASSWORD, sentinelPassword: SENTINEL_PASSWORD, downAfterMs: 1000 });
}, 180_000);
afterAll(async () => {
  await group.stop();
});

/** Coordinator and agents reach Redis only through the sentinels: REDIS_URL is left at its default, whose host is not used. */
async function sentinelEnv(name: string, g: SentinelGroup = group): Promise<{ env: Record<string, string>; dataDir: string }> {
  const dataDir = await tempDir('data');
  await writeNewJobKey(dataDir);
  const secrets = await tempDir('secrets');
  await writeFile(path.join(secrets, 'redis'), `${PASSWORD}\n`, { mode: 0o600 });
  await writeFile(path.join(secrets, 'sentinel'), `${SENTINEL_PASSWORD}\n`, { mode: 0o600 });
  return {
    dataDir,
    env: {
      FSBENCH_REDIS_SENTINELS: g.sentinels,
      FSBENCH_REDIS_MASTER: g.master,
      FSBENCH_REDIS_PASSWORD_FILE: path.join(secrets, 'redis'),
      FSBENCH_REDIS_SENTINEL_PASSWORD_FILE: path.join(secrets, 'sentinel'),
      FSBENCH_JOB_KEY: path.join(dataDir, JOB_PUBLIC_KEY_FILE),
      FSBENCH_QUEUE_PREFIX: uniquePrefix(name),
      FSBENCH_DATA_DIR: dataDir,
      FSBENCH_PORT: '0',
      FSBENCH_HEARTBEAT: '200ms',
      FSBENCH_STALL_TIMEOUT: '2s',
      FSBENCH_SCRATCH: await tempDir('scratch'),
    },
  };
}


const replOffset = async (port: number, field: string): Promise<number> => {
  const r = new Redis(group.urlOf(port), { maxRetriesPerRequest: 1 });
  try {
    const info = await r.info('replication');
    return Number(new RegExp(`^${field}:(\\d+)`, 'm').exec(info)?.[1] ?? Number.NaN);
  } finally {
    r.disconnect();
  }
};

describe('a primary killed in the middle of a matrix', () => {
  it('is replaced by its replica; coordinator and agents carry on and every run is stored exactly once', async () => {
    const s = await sentinelEnv('failover');
    const coordinator = fsbench(['coordinator'], s.env);
    const client = new CoordinatorClient((await coordinator.waitFor(/listening on (http:\/\/\S+);/))[1] ?? '');
    const primary = await group.primaryPort();
    const agents: Proc[] = [];
    for (const host of ['host-1', 'host-2']) {
      const stateDir = path.join(s.env['FSBENCH_SCRATCH'] ?? '', 'state', host);
      await preEnroll(group.urlOf(primary), s.env['FSBENCH_QUEUE_PREFIX'] ?? '', await readFile(path.join(s.dataDir, JOB_KEY_FILE), 'utf8'), stateDir, host, host);
      const a = fsbench(['agent'], { ...s.env, FSBENCH_MACHINE: host, FSBENCH_HOST_ID: host, FSBENCH_STATE_DIR: stateDir });
      await a.waitFor(/waiting for runs/);
      agents.push(a);
    }
    // The password never appears in a log line, even one naming where Redis is.
    for (const p of [coordinator, ...agents]) expect(p.output).not.toContain(PASSWORD);

    const CELLS = 40;
    const REPS = 2;
    const HOSTS = 2;
    const id = await submit(client, {
      name: 'sentinel-failover',
      workload: 'noop',
      repetitions: REPS,
      warmup: 0,
      placement: 'all',
      params: { value: Array.from({ length: CELLS }, (_, i) => i), sleep: '100ms' },
    });
    const expected = CELLS * REPS * HOSTS;

    // From submission to the end: the recovery figure is read off the samples.
    const { samples, state, done: polling } = sampleProgress(client, id, 150_000);
    while ((samples.at(-1)?.stored ?? 0) < expected / 4) {
      if (state() === 'done') throw new Error('the matrix finished before the primary could be killed');
      await sleep(20);
    }
    const replica = group.dataPorts.find((p) => p !== primary) ?? 0;
    // How far the replica was behind when the primary died: what a failover can lose.
    const [primaryOffset, replicaOffset] = await Promise.all([replOffset(primary, 'master_repl_offset'), replOffset(replica, 'slave_repl_offset')]);
    const killedAt = Date.now();
    group.kill(primary);
    const promoted = await group.promotedFrom(primary);
    const promotedAt = Date.now();
    expect(promoted).toBe(replica);
    await polling;
    expect(state()).toBe('done');

    const storedAtKill = samples.filter((x) => x.t <= killedAt).at(-1)?.stored ?? 0;
    const storedAtPromotion = Math.max(storedAtKill, ...samples.filter((x) => x.t <= promotedAt).map((x) => x.stored));
    const resumed = samples.find((x) => x.t > promotedAt && x.stored > storedAtPromotion);
    expect(resumed).toBeDefined();

    const { results, stored, duplicates } = await expectStoredOnce(client, id, expected);

    const figure = {
      figure: 'sentinel-failover',
      runs: expected,
      storedAtKill,
      downAfterMs: 1000,
      killToPromotedMs: promotedAt - killedAt,
      killToRunsStoredAgainMs: (resumed?.t ?? Number.NaN) - killedAt,
      replicaLagBytesAtKill: primaryOffset - replicaOffset,
      stored,
      duplicates,
      missing: expected - stored,
      runsRetried: results.runs.filter((r) => r.attempts > 1).length,
      requeuedByCoordinator: (coordinator.output.match(/queued again/g) ?? []).length,
      lostReportsNoticed: (coordinator.output.match(/were lost before they were read/g) ?? []).length,
    };
    console.log(JSON.stringify(figure));
    for (const p of [coordinator, ...agents]) expect(p.output).not.toContain(PASSWORD);
    expect(coordinator.output).not.toContain(SENTINEL_PASSWORD);
  }, 240_000);
});

describe('a failover that loses writes Redis had acknowledged', () => {
  let lossy: SentinelGroup;
  beforeAll(async () => {
    lossy = await startSentinelGroup({ password: PASSWORD, sentinelPassword: SENTINEL_PASSWORD, downAfterMs: 1000 });
  }, 120_000);
  afterAll(async () => {
    await lossy.stop();
  });

  it('has the coordinator queue again the runs whose jobs vanished, each stored once', async () => {
    const s = await sentinelEnv('lossy', lossy);
    const coordinator = fsbench(['coordinator'], s.env);
    const client = new CoordinatorClient((await coordinator.waitFor(/listening on (http:\/\/\S+);/))[1] ?? '');
    const primary = await lossy.primaryPort();
    const replica = lossy.dataPorts.find((p) => p !== primary) ?? 0;
    const stateDir = path.join(s.env['FSBENCH_SCRATCH'] ?? '', 'state', 'host-1');
    await preEnroll(lossy.urlOf(primary), s.env['FSBENCH_QUEUE_PREFIX'] ?? '', await readFile(path.join(s.dataDir, JOB_KEY_FILE), 'utf8'), stateDir, 'host-1', 'host-1');
    await fsbench(['agent'], { ...s.env, FSBENCH_MACHINE: 'host-1', FSBENCH_HOST_ID: 'host-1', FSBENCH_STATE_DIR: stateDir }).waitFor(/waiting for runs/);

    // Replication cut: the replica can no longer authenticate to the primary, which goes on
    // acknowledging writes that exist nowhere else, as a lagging replica's primary would.
    const onReplica = await cutReplication(lossy.urlOf(replica), lossy.urlOf(primary), [['masterauth', 'not-the-password']]);

    try {
      await throughLossyFailover({
        client,
        name: 'sentinel-lossy',
        figure: 'sentinel-failover-lossy',
        output: () => coordinator.output,
        kill: () => {
          lossy.kill(primary);
        },
        promoted: async () => {
          // The replica may be promoted now; it has none of the matrix's jobs.
          await onReplica.config('SET', 'masterauth', PASSWORD);
          expect(await lossy.promotedFrom(primary)).toBe(replica);
        },
      });
    } finally {
      onReplica.disconnect();
    }
  }, 180_000);
});
