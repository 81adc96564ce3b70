/**
 * Redis Cluster with real processes: three primaries and three replicas
 * (tests/fixtures/redis-cluster.ts), a coordinator and two agents as the CLI starts them,
 * configured only through FSBENCH_REDIS_CLUSTER and a hash-tag FSBENCH_QUEUE_PREFIX. The primary
 * serving the tag's slot is killed with SIGKILL in the middle of a matrix; its replica is
 * promoted; the matrix must complete with every run stored exactly once. The test prints how
 * long runs stopped completing (one JSON line, `cluster-failover`), for docs/operating.md.
 * Then a failover that loses acknowledged writes (replication cut first): the coordinator must
 * notice the slot's server changed and queue again what it has not stored (`cluster-failover-lossy`).
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CoordinatorClient } from '../cli/client.js';
import { clusterOptions, redisOptions, shownRedis } from '../queue/redis.js';
import { JOB_KEY_FILE, JOB_PUBLIC_KEY_FILE, writeNewJobKey } from '../queue/signing.js';
import { loadSettings } from '../settings/index.js';
import { startRedisCluster, type RedisClusterFixture } from './fixtures/redis-cluster.js';
import { uniquePrefix } from './fixtures/redis-server.js';
import { preEnroll } from './helpers/enroll.js';
import { freshCli } from './helpers/local.js';
import { cutReplication, expectStoredOnce, sampleProgress, submit, throughLossyFailover } from './helpers/failover.js';
import { useCliProcesses, type Proc } from './helpers/processes.js';

describe('Cluster settings', () => {
  it('parses FSBENCH_REDIS_CLUSTER (default port 6379, IPv6 in brackets) and refuses what is not host:port', () => {
    const s = loadSettings(['redisCluster'], {}, { FSBENCH_REDIS_CLUSTER: 'a.example:7000, [::1]:7001 ,b' });
    expect(s.redisCluster).toEqual([{ host: 'a.example', port: 7000 }, { host: '::1', port: 7001 }, { host: 'b', port: 6379 }]);
    expect(() => loadSettings(['redisCluster'], {}, { FSBENCH_REDIS_CLUSTER: ' , ' })).toThrow(/names no node/);
  });

  it('gives each node the credentials, TLS and name, never a keyPrefix, and waits rather than fails', () => {
    const { nodes, options } = clusterOptions(
      { redisUrl: 'rediss://app:s3cret@redis.example:6380', redisCluster: [{ host: 'n1.example', port: 7000 }], queuePrefix: '{fsbench}', redisCa: '-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n' },
      'fsbench-coordinator',
    );
    expect(nodes).toEqual([{ host: 'n1.example', port: 7000 }]);
    const o = options.redisOptions ?? {};
    expect(o).toMatchObject({ username: 'app', password: 's3cret', connectionName: 'fsbench-coordinator', maxRetriesPerRequest: null });
    expect(o).not.toHaveProperty('keyPrefix');
    expect(o).not.toHaveProperty('host');
    // Each node's certificate is checked against the address the Cluster announces, not REDIS_URL's host.
    expect(o.tls).toMatchObject({ rejectUnauthorized: true });
    expect(o.tls).not.toHaveProperty('servername');
    expect(shownRedis({ redisUrl: 'redis://:pw@x:1', redisCluster: [{ host: '::1', port: 7000 }] })).toBe('the Redis Cluster of [::1]:7000 (redis://:redacted@x:1)');
  });

  it('refuses a prefix without a hash tag, sentinels beside it, and a database other than 0', () => {
    const cluster = [{ host: '127.0.0.1', port: 7000 }];
    expect(() => redisOptions({ redisUrl: 'redis://127.0.0.1', redisCluster: cluster, queuePrefix: 'fsbench' }, 'n')).toThrow(/FSBENCH_QUEUE_PREFIX fsbench is not a hash tag: write it in braces \(\{fsbench\}\)/);
    expect(() => redisOptions({ redisUrl: 'redis://127.0.0.1', redisCluster: cluster }, 'n')).toThrow(/not a hash tag/);
    expect(() => redisOptions({ redisUrl: 'redis://127.0.0.1', redisCluster: cluster, queuePrefix: '{fsbench}', redisSentinels: cluster }, 'n')).toThrow(
      /FSBENCH_REDIS_CLUSTER and FSBENCH_REDIS_SENTINELS both set/,
    );
    expect(() => redisOptions({ redisUrl: 'redis://127.0.0.1/3', redisCluster: cluster, queuePrefix: '{fsbench}' }, 'n')).toThrow(/has only database 0/);
  });
});

let cluster: RedisClusterFixture;

const { fsbench, tempDir } = useCliProcesses({ waitMs: 30_000 });

beforeAll(async () => {
  await freshCli();
  cluster = await startRedisCluster();
}, 120_000);
afterAll(async () => {
  await cluster.stop();
});

/**
 * A data directory with a job key, and the environment of a coordinator and its agents on the
 * cluster under `prefix` (stall timeout 2 s). REDIS_URL is left at its default: only its scheme
 * and credentials count under a Cluster.
 */
async function clusterEnv(prefix: string): Promise<{ dataDir: string; env: Record<string, string> }> {
  const dataDir = await tempDir('data');
  await writeNewJobKey(dataDir);
  const env = {
    FSBENCH_REDIS_CLUSTER: cluster.seeds,
    FSBENCH_JOB_KEY: path.join(dataDir, JOB_PUBLIC_KEY_FILE),
    FSBENCH_QUEUE_PREFIX: prefix,
    FSBENCH_DATA_DIR: dataDir,
    FSBENCH_PORT: '0',
    FSBENCH_HEARTBEAT: '200ms',
    FSBENCH_STALL_TIMEOUT: '2s',
    FSBENCH_SCRATCH: await tempDir('scratch'),
  };
  return { dataDir, env };
}


describe('the primary of the prefix slot killed in the middle of a matrix', () => {
  it('is replaced by its replica; coordinator and agents carry on and every run is stored exactly once', async () => {
    const tag = uniquePrefix('cluster');
    const prefix = `{${tag}}`;
    const { dataDir, env } = await clusterEnv(prefix);
    const refused = fsbench(['coordinator'], { ...env, FSBENCH_QUEUE_PREFIX: tag });
    await new Promise((r) => refused.child.once('exit', r));
    expect(refused.output).toMatch(/FSBENCH_QUEUE_PREFIX \S+ is not a hash tag/);

    const coordinator = fsbench(['coordinator'], env);
    const client = new CoordinatorClient((await coordinator.waitFor(/listening on (http:\/\/\S+);/))[1] ?? '');
    const { primary, replica } = await cluster.ownerOf(tag);
    expect(replica).toBeDefined();
    const agents: Proc[] = [];
    for (const host of ['host-1', 'host-2']) {
      const stateDir = path.join(env['FSBENCH_SCRATCH'] ?? '', 'state', host);
      // Written straight to the node serving the tag's slot: every key of the prefix is there.
      await preEnroll(cluster.urlOf(primary), prefix, await readFile(path.join(dataDir, JOB_KEY_FILE), 'utf8'), stateDir, host, host);
      const a = fsbench(['agent'], { ...env, FSBENCH_MACHINE: host, FSBENCH_HOST_ID: host, FSBENCH_STATE_DIR: stateDir });
      await a.waitFor(/waiting for runs/);
      agents.push(a);
    }

    const CELLS = 30;
    const REPS = 2;
    const HOSTS = 2;
    const id = await submit(client, {
      name: 'cluster-failover',
      workload: 'noop',
      repetitions: REPS,
      warmup: 0,
      placement: 'all',
      params: { value: Array.from({ length: CELLS }, (_, i) => i), sleep: '100ms' },
    });
    const expected = CELLS * REPS * HOSTS;

    // From submission to the end: the recovery figure is read off the samples.
    const { samples, state, done: polling } = sampleProgress(client, id, 40_000);
    while ((samples.at(-1)?.stored ?? 0) < expected / 4) {
      if (state() === 'done') throw new Error('the matrix finished before the primary could be killed');
      await sleep(20);
    }
    const killedAt = Date.now();
    cluster.kill(primary);
    const promoted = await cluster.promotedFrom(primary, tag);
    const promotedAt = Date.now();
    expect(promoted).toBe(replica);
    await polling;
    expect(state(), `coordinator:\n${coordinator.output.slice(-3000)}\nagent:\n${agents[0]?.output.slice(-2000) ?? ''}`).toBe('done');

    const storedAtKill = samples.filter((x) => x.t <= killedAt).at(-1)?.stored ?? 0;
    const storedAtPromotion = Math.max(storedAtKill, ...samples.filter((x) => x.t <= promotedAt).map((x) => x.stored));
    const resumed = samples.find((x) => x.t > promotedAt && x.stored > storedAtPromotion);
    expect(resumed).toBeDefined();

    const { results, stored, duplicates } = await expectStoredOnce(client, id, expected);

    console.log(
      JSON.stringify({
        figure: 'cluster-failover',
        runs: expected,
        storedAtKill,
        clusterNodeTimeoutMs: 1000,
        killToPromotedMs: promotedAt - killedAt,
        killToRunsStoredAgainMs: (resumed?.t ?? Number.NaN) - killedAt,
        stored,
        duplicates,
        missing: expected - stored,
        runsRetried: results.runs.filter((r) => r.attempts > 1).length,
        serverChangeNoticed: /Redis is another server now/.test(coordinator.output),
      }),
    );
  }, 60_000);
});

describe('a Cluster failover that loses writes the primary had acknowledged', () => {
  it('has the coordinator queue again the runs whose jobs vanished, each stored once', async () => {
    // A slot whose primary still has a replica (the test above left one shard without).
    let tag = '';
    let owner: { primary: number; replica: number | undefined } = { primary: 0, replica: undefined };
    for (let i = 0; i < 50 && owner.replica === undefined; i++) {
      tag = uniquePrefix(`lossy${String(i)}`);
      owner = await cluster.ownerOf(tag);
    }
    const { primary, replica } = owner;
    if (replica === undefined) throw new Error('no shard of the cluster has a live replica left');
    const prefix = `{${tag}}`;
    const { dataDir, env } = await clusterEnv(prefix);
    const coordinator = fsbench(['coordinator'], env);
    const client = new CoordinatorClient((await coordinator.waitFor(/listening on (http:\/\/\S+);/))[1] ?? '');
    const stateDir = path.join(env['FSBENCH_SCRATCH'] ?? '', 'state', 'host-1');
    await preEnroll(cluster.urlOf(primary), prefix, await readFile(path.join(dataDir, JOB_KEY_FILE), 'utf8'), stateDir, 'host-1', 'host-1');
    await fsbench(['agent'], { ...env, FSBENCH_MACHINE: 'host-1', FSBENCH_HOST_ID: 'host-1', FSBENCH_STATE_DIR: stateDir }).waitFor(/waiting for runs/);

    // Replication cut: the replica can no longer log in to its primary, which goes on
    // acknowledging writes that exist nowhere else; the replica may still take over however
    // stale it is (validity factor 0), as one lagging by a second would.
    const onReplica = await cutReplication(cluster.urlOf(replica), cluster.urlOf(primary), [
      ['cluster-replica-validity-factor', '0'],
      ['masteruser', 'no-such-user'],
      ['masterauth', 'not-the-password'],
    ]);

    try {
      await throughLossyFailover({
        client,
        name: 'cluster-lossy',
        figure: 'cluster-failover-lossy',
        output: () => coordinator.output,
        kill: () => {
          cluster.kill(primary);
        },
        promoted: async () => {
          expect(await cluster.promotedFrom(primary, tag)).toBe(replica);
        },
      });
    } finally {
      onReplica.disconnect();
    }
  }, 180_000);
});
