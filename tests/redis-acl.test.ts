/**
 * Least privilege in Redis: each agent logs in as an ACL user of its own (`fsbench agents acl`),
 * the coordinator as another, and neither holds the admin password. Against a real redis-server:
 * an agent process with its user runs a matrix end to end, then every command and key an agent
 * must not reach is tried with its credentials, one by one, and refused with NOPERM. The same
 * users on a Redis Cluster (set on every node) and behind Sentinel (through a failover), whose
 * sentinels have credentials of their own that refuse the agent's.
 */
import { readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CoordinatorClient } from '../cli/client.js';
import { aclFileLine, agentAclRules, agentUserName, coordinatorAclRules, newAclPassword, sentinelClientAclRules, sentinelDataAclRules } from '../queue/acl.js';
import { qualifiedQueueName } from '../queue/jobs.js';
import { agentApprovalsKey, agentKeysKey, agentsKey, cancelledKey, fingerprintsKey, hostLockKey, refusalsKey, reportKeyKey } from '../queue/keys.js';
import { JOB_KEY_FILE, JOB_PUBLIC_KEY_FILE, writeNewJobKey } from '../queue/signing.js';
import { startRedisCluster, type RedisClusterFixture } from './fixtures/redis-cluster.js';
import { startSentinelGroup } from './fixtures/redis-sentinel.js';
import { startRedis, uniquePrefix, type TestRedis } from './fixtures/redis-server.js';
import { preEnroll } from './helpers/enroll.js';
import { sampleProgress, submit } from './helpers/failover.js';
import { freshCli } from './helpers/local.js';
import { useCliProcesses, type Proc } from './helpers/processes.js';

const ADMIN_PASSWORD = 'admin-only-0f-this-redis';

const { fsbench, tempDir } = useCliProcesses({ waitMs: 30_000 });

let redis: TestRedis;

beforeAll(async () => {
  await freshCli();
  // DEBUG allowed from loopback, so that the ACL alone decides whether an agent may run it.
  redis = await startRedis({ password: ADMIN_PASSWORD, args: ['--enable-debug-command', 'local'] });
}, 120_000);
afterAll(async () => {
  await redis.stop();
});

const Summary = z.object({ state: z.string(), progress: z.object({ stored: z.number() }).loose() }).loose();

/** Waits for the matrix to be done and returns how many runs were stored. */
async function finished(client: CoordinatorClient, id: string, ms = 40_000): Promise<number> {
  const end = Date.now() + ms;
  for (;;) {
    const s = Summary.parse(await client.json('GET', `/v1/matrices/${id}`));
    if (s.state === 'done') return s.progress.stored;
    if (Date.now() > end) throw new Error(`matrix ${id} still ${s.state} after ${ms / 1000} s (${s.progress.stored} stored)`);
    await sleep(100);
  }
}

/** A direct connection as `user`, refusing nothing on its side: what an agent's host holds, used as it likes. */
async function connectAs(port: number, user: string, password: string): Promise<Redis> {
  const r = new Redis({ host: '127.0.0.1', port, username: user, password, lazyConnect: true, enableReadyCheck: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
  r.on('error', () => undefined);
  await r.connect();
  return r;
}

/** An ACL refusal: NOPERM, or as Redis 7.0 words it for a call inside a script. */
const ACL_REFUSAL = /: (NOPERM |ERR The user executing the script can't access)/;

/** Runs `command` and returns Redis's error message, or `ran` when Redis carried it out. */
async function attempt(r: Redis, command: readonly string[]): Promise<string> {
  const [name, ...args] = command;
  try {
    await r.call(name ?? '', ...args);
    return 'ran';
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

/**
 * Tries each command once as `r`'s user and returns the answers that were not an ACL refusal:
 * empty when every one was refused. Checks first that every command was tried.
 */
async function notRefused(r: Redis, commands: readonly (readonly string[])[]): Promise<string[]> {
  const answers: string[] = [];
  for (const command of commands) answers.push(`${command.slice(0, 2).join(' ')}: ${await attempt(r, command)}`);
  expect(answers).toHaveLength(commands.length);
  return answers.filter((a) => !ACL_REFUSAL.test(a));
}

/** The `fsbench agents acl` command as an operator runs it, with the admin's REDIS_URL for --apply. */
async function makeUser(args: string[], env: Record<string, string>, out: string): Promise<{ user: string; password: string; line: string }> {
  const p = fsbench(['agents', 'acl', ...args, '--out', out, '--apply'], env);
  const { code } = await p.exited();
  expect(code, p.output).toBe(0);
  const line = p.output.split('\n').find((l) => l.startsWith('user ')) ?? '';
  const user = line.split(' ')[1] ?? '';
  const password = (await readFile(path.join(out, `${user}.password`), 'utf8')).trim();
  expect(p.output).not.toContain(password);
  return { user, password, line };
}

/** A user's login as a process takes it: REDIS_URL naming the user (its host and port are not used behind Sentinel or a Cluster), the password in a file. */
interface Login {
  readonly user: string;
  readonly passwordFile: string;
}

/**
 * A coordinator and one enrolled agent on host `host`, from the CLI, each logged in as its own
 * user, with `env` for where Redis is (the prefix, sentinels, a Cluster). The agent's approval is
 * written beforehand through `adminUrl`, a direct URL of the primary with the admin password.
 */
async function startPair(o: { env: Record<string, string>; prefix: string; port: number; adminUrl: string; host: string; coordinator: Login; agent: Login }): Promise<{ client: CoordinatorClient; coordinator: Proc; agent: Proc }> {
  const dataDir = await tempDir('data');
  await writeNewJobKey(dataDir);
  const scratch = await tempDir('scratch');
  const base = {
    ...o.env,
    FSBENCH_QUEUE_PREFIX: o.prefix,
    FSBENCH_JOB_KEY: path.join(dataDir, JOB_PUBLIC_KEY_FILE),
    FSBENCH_DATA_DIR: dataDir,
    FSBENCH_PORT: '0',
    FSBENCH_HEARTBEAT: '200ms',
    FSBENCH_STALL_TIMEOUT: '2s',
    FSBENCH_SCRATCH: scratch,
  };
  const loginOf = (l: Login) => ({ REDIS_URL: `redis://${l.user}@127.0.0.1:${o.port}`, FSBENCH_REDIS_PASSWORD_FILE: l.passwordFile });
  const coordinator = fsbench(['coordinator'], { ...base, ...loginOf(o.coordinator) });
  const client = new CoordinatorClient((await coordinator.waitFor(/listening on (http:\/\/\S+);/))[1] ?? '');
  const stateDir = path.join(scratch, 'state');
  await preEnroll(o.adminUrl, o.prefix, await readFile(path.join(dataDir, JOB_KEY_FILE), 'utf8'), stateDir, o.host, `machine-${o.host}`);
  const agent = fsbench(['agent'], { ...base, ...loginOf(o.agent), FSBENCH_MACHINE: `machine-${o.host}`, FSBENCH_HOST_ID: o.host, FSBENCH_STATE_DIR: stateDir });
  await agent.waitFor(/waiting for runs/);
  return { client, coordinator, agent };
}

describe('an agent logged in as its own ACL user', () => {
  it('runs a matrix end to end, and is refused with NOPERM every command and key that is not its own', async () => {
    const prefix = uniquePrefix('acl');
    const out = await tempDir('acl');
    const admin = { REDIS_URL: redis.url, FSBENCH_QUEUE_PREFIX: prefix };
    const agentUser = await makeUser(['host-a'], admin, out);
    const coordinatorUser = await makeUser(['--coordinator'], admin, out);
    expect(agentUser.user).toBe(agentUserName('host-a'));
    // The rule files hold the password's hash only; the password file is the owner's alone.
    expect(await readFile(path.join(out, `${agentUser.user}.acl`), 'utf8')).not.toContain(agentUser.password);
    expect((await stat(path.join(out, `${agentUser.user}.password`))).mode & 0o777).toBe(0o600);

    const { client, coordinator, agent } = await startPair({
      env: {},
      prefix,
      port: redis.port,
      adminUrl: redis.url,
      host: 'host-a',
      coordinator: { user: coordinatorUser.user, passwordFile: path.join(out, `${coordinatorUser.user}.password`) },
      agent: { user: agentUser.user, passwordFile: path.join(out, `${agentUser.user}.password`) },
    });
    const id = await submit(client, { name: 'acl', workload: 'noop', repetitions: 3, warmup: 1, placement: 'all', params: { value: [1, 2] } });
    expect(await finished(client, id)).toBe(6);

    const direct = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    try {
      // Nothing the agent did was refused on the way (ACL LOG lists every refusal, with its user).
      const log = z.array(z.array(z.unknown())).parse(await direct.call('ACL', 'LOG'));
      expect(log.filter((entry) => entry.includes(agentUser.user) || entry.includes(coordinatorUser.user)).map(String)).toEqual([]);

      // Another host's queue, with a job in it, and the coordinator's keys as the coordinator wrote them.
      const other = qualifiedQueueName(prefix, 'host-b');
      await direct.rpush(`${other}:wait`, 'job-of-host-b');
      const agentConn = await connectAs(redis.port, agentUser.user, agentUser.password);
      try {
        expect(await agentConn.call('ACL', 'WHOAMI')).toBe(agentUser.user);
        const script = "return redis.call('DEL', KEYS[1])";
        const FORBIDDEN: readonly (readonly string[])[] = [
          ['DEL', `${other}:wait`],
          ['LPUSH', `${other}:wait`, 'x'],
          ['XADD', `${other}:events`, '*', 'event', 'completed'],
          ['RPOPLPUSH', `${other}:wait`, `${qualifiedQueueName(prefix, 'host-a')}:wait`],
          ['EVAL', script, '1', `${other}:wait`],
          // A script may not reach a key it did not declare either: each call inside is checked.
          ['EVAL', `return redis.call('DEL', '${other}:wait')`, '0'],
          ['HSET', agentApprovalsKey(prefix), 'SHA256:x', '{}'],
          ['HDEL', agentApprovalsKey(prefix), 'SHA256:x'],
          ['DEL', agentApprovalsKey(prefix)],
          ['SET', reportKeyKey(prefix), 'forged'],
          ['SET', cancelledKey(prefix, 'm1'), '1'],
          ['DEL', cancelledKey(prefix, 'm1')],
          ['SET', hostLockKey(prefix, 'host-b'), 'stolen'],
          ['SET', `${prefix}:anything-else`, 'x'],
          ['GET', `${prefix}:anything-else`],
          ['CONFIG', 'GET', '*'],
          ['CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru'],
          ['FLUSHALL'],
          ['FLUSHDB'],
          ['KEYS', '*'],
          ['SCAN', '0'],
          ['RANDOMKEY'],
          ['SCRIPT', 'FLUSH'],
          ['FUNCTION', 'FLUSH'],
          ['DEBUG', 'SLEEP', '0'],
          ['ACL', 'SETUSER', agentUser.user, '+@all', '~*'],
          ['ACL', 'LIST'],
          ['CLIENT', 'LIST'],
          ['CLIENT', 'KILL', 'TYPE', 'normal'],
          ['SWAPDB', '0', '1'],
          ['REPLICAOF', 'NO', 'ONE'],
          ['BGSAVE'],
          ['PUBLISH', 'anything', 'x'],
          ['SHUTDOWN', 'NOSAVE'],
        ];
        expect(await notRefused(agentConn, FORBIDDEN)).toEqual([]);
        expect(await direct.lrange(`${other}:wait`, 0, -1)).toEqual(['job-of-host-b']);

        // What an agent does is still allowed on the same connection: its refusals are the ACL's, not a broken login.
        const ALLOWED: readonly (readonly string[])[] = [
          ['LLEN', `${qualifiedQueueName(prefix, 'host-a')}:wait`],
          ['LLEN', `${qualifiedQueueName(prefix, 'any')}:wait`],
          ['HGET', agentApprovalsKey(prefix), 'SHA256:x'],
          ['GET', reportKeyKey(prefix)],
          ['EXISTS', cancelledKey(prefix, 'm1')],
          ['HLEN', agentsKey(prefix)],
          ['HLEN', agentKeysKey(prefix)],
          ['HLEN', fingerprintsKey(prefix)],
          ['PTTL', hostLockKey(prefix, 'host-a')],
          ['INFO', 'server'],
        ];
        const allowed: string[] = [];
        for (const command of ALLOWED) allowed.push(`${command.join(' ')}: ${await attempt(agentConn, command)}`);
        expect(allowed).toHaveLength(ALLOWED.length);
        expect(allowed.filter((a) => !a.endsWith(': ran'))).toEqual([]);

        // The refusal counts are a hash every agent writes: /metrics labels only the catalog's codes, the rest as one.
        await agentConn.hincrby(refusalsKey(prefix), 'JOB_FORGED_BY_AN_AGENT', 5);
        await agentConn.hincrby(refusalsKey(prefix), 'JOB_CANCELLED', 2);
        const metrics = await client.text('/metrics');
        expect(metrics).toMatch(/^fsbench_jobs_refused_total\{code="other"\} 5$/m);
        expect(metrics).toMatch(/^fsbench_jobs_refused_total\{code="JOB_CANCELLED"\} 2$/m);
        expect(metrics).not.toContain('JOB_FORGED_BY_AN_AGENT');
      } finally {
        agentConn.disconnect();
      }
    } finally {
      direct.disconnect();
    }
    for (const p of [coordinator, agent]) {
      expect(p.output).not.toContain(agentUser.password);
      expect(p.output).not.toContain(coordinatorUser.password);
    }
  }, 60_000);
});

/** An ACL user as a server's `--user` option takes it: the name, then `on`, the password's hash and the rules. */
function userArgs(user: string, password: string, rules: readonly string[]): string[] {
  return aclFileLine(user, password, rules).split(' ').slice(1);
}

/** Writes `password` to a 0600 file of `dir` and returns its path. */
async function secretFile(dir: string, name: string, password: string): Promise<string> {
  const file = path.join(dir, name);
  await writeFile(file, `${password}\n`, { mode: 0o600 });
  return file;
}

describe("the sentinels' client user of compose.sentinel.yaml", () => {
  it('has the rules of fsbench agents acl --sentinel-client, written out in docker/sentinel-entrypoint.sh', async () => {
    const script = await readFile(path.join(import.meta.dirname, '..', 'docker', 'sentinel-entrypoint.sh'), 'utf8');
    const written = /'(resetkeys resetchannels [^']*)'/.exec(script)?.[1];
    expect(written?.split(' ')).toEqual(sentinelClientAclRules());
  });
});

describe('behind Sentinel', () => {
  it('an agent with its ACL user follows a failover, and the sentinels refuse its credentials and every change to them', async () => {
    const prefix = uniquePrefix('acl-sentinel');
    const SENTINEL_ADMIN = newAclPassword();
    const agentPw = newAclPassword();
    const coordinatorPw = newAclPassword();
    const sentinelDataPw = newAclPassword();
    const agentName = agentUserName('host-s');
    const group = await startSentinelGroup({
      password: ADMIN_PASSWORD,
      sentinelPassword: SENTINEL_ADMIN,
      downAfterMs: 1000,
      dataUsers: [
        userArgs(agentName, agentPw, agentAclRules(prefix, 'host-s')),
        userArgs('fsbench-coordinator', coordinatorPw, coordinatorAclRules(prefix)),
        userArgs('fsbench-sentinel', sentinelDataPw, sentinelDataAclRules()),
      ],
      sentinelAuth: { user: 'fsbench-sentinel', password: sentinelDataPw },
    });
    try {
      const secrets = await tempDir('secrets');
      // The sentinels' client user, set on each of them by the command, as their admin.
      const clientUser = await makeUser(
        ['--sentinel-client'],
        { FSBENCH_REDIS_SENTINELS: group.sentinels, FSBENCH_REDIS_MASTER: group.master, FSBENCH_REDIS_SENTINEL_PASSWORD_FILE: await secretFile(secrets, 'sentinel-admin', SENTINEL_ADMIN) },
        await tempDir('acl'),
      );
      expect(clientUser.user).toBe('fsbench-client');
      const clientPw = clientUser.password;
      const primary = await group.primaryPort();
      const { client, coordinator, agent } = await startPair({
        env: {
          FSBENCH_REDIS_SENTINELS: group.sentinels,
          FSBENCH_REDIS_MASTER: group.master,
          FSBENCH_REDIS_SENTINEL_USER: 'fsbench-client',
          FSBENCH_REDIS_SENTINEL_PASSWORD_FILE: await secretFile(secrets, 'sentinel-client', clientPw),
        },
        prefix,
        port: 6379,
        adminUrl: group.urlOf(primary),
        host: 'host-s',
        coordinator: { user: 'fsbench-coordinator', passwordFile: await secretFile(secrets, 'coordinator', coordinatorPw) },
        agent: { user: agentName, passwordFile: await secretFile(secrets, 'agent', agentPw) },
      });
      const RUNS = 16;
      const id = await submit(client, { name: 'acl-sentinel', workload: 'noop', repetitions: 2, warmup: 0, placement: 'all', params: { value: [1, 2, 3, 4, 5, 6, 7, 8], sleep: '150ms' } });
      const { samples, state, done } = sampleProgress(client, id, 50_000);
      while ((samples.at(-1)?.stored ?? 0) < 3) {
        if (state() === 'done') throw new Error('the matrix finished before the primary could be killed');
        await sleep(20);
      }
      group.kill(primary);
      const promoted = await group.promotedFrom(primary);
      expect(promoted).not.toBe(primary);
      await done;
      expect(state()).toBe('done');
      expect(await finished(client, id)).toBe(RUNS);

      const sentinelPort = group.sentinelPorts[0] ?? 0;
      const asClient = await connectAs(sentinelPort, 'fsbench-client', clientPw);
      try {
        // What coordinator and agents ask: allowed.
        expect(z.tuple([z.string(), z.string()]).parse(await asClient.call('SENTINEL', 'get-master-addr-by-name', group.master))[1]).toBe(String(promoted));
        const FORBIDDEN: readonly (readonly string[])[] = [
          ['SENTINEL', 'FAILOVER', group.master],
          ['SENTINEL', 'REMOVE', group.master],
          ['SENTINEL', 'SET', group.master, 'down-after-milliseconds', '1'],
          ['SENTINEL', 'RESET', '*'],
          ['SENTINEL', 'MONITOR', 'other', '127.0.0.1', '1', '1'],
          ['SENTINEL', 'CONFIG', 'SET', 'resolve-hostnames', 'yes'],
          ['SENTINEL', 'FLUSHCONFIG'],
          ['SENTINEL', 'MASTER', group.master],
          ['ACL', 'SETUSER', 'fsbench-client', '+@all'],
          ['ACL', 'LIST'],
          ['CLIENT', 'KILL', 'TYPE', 'normal'],
          ['SHUTDOWN', 'NOSAVE'],
        ];
        expect(await notRefused(asClient, FORBIDDEN)).toEqual([]);
      } finally {
        asClient.disconnect();
      }
      // The agent's own credentials, and the data nodes' admin password, are not the sentinels'.
      const logins = [
        [agentName, agentPw],
        ['default', agentPw],
        ['default', ADMIN_PASSWORD],
      ] as const;
      const refusedLogins: string[] = [];
      const anonymous = new Redis({ host: '127.0.0.1', port: sentinelPort, lazyConnect: true, enableReadyCheck: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
      anonymous.on('error', () => undefined);
      try {
        await anonymous.connect();
        for (const [user, password] of logins) refusedLogins.push(await attempt(anonymous, ['AUTH', user, password]));
      } finally {
        anonymous.disconnect();
      }
      expect(refusedLogins).toHaveLength(logins.length);
      expect(refusedLogins.filter((m) => !m.startsWith('WRONGPASS'))).toEqual([]);
      for (const p of [coordinator, agent]) for (const secret of [agentPw, coordinatorPw, clientPw]) expect(p.output).not.toContain(secret);
    } finally {
      await group.stop();
    }
  }, 90_000);
});

describe('on a Redis Cluster', () => {
  let cluster: RedisClusterFixture | undefined;
  afterAll(async () => {
    await cluster?.stop();
  });

  it('`fsbench agents acl --apply` sets the users on every node, and an agent with its user runs a matrix', async () => {
    cluster = await startRedisCluster();
    const tag = uniquePrefix('acl-cluster');
    const prefix = `{${tag}}`;
    const out = await tempDir('acl');
    const admin = { FSBENCH_REDIS_CLUSTER: cluster.seeds, FSBENCH_QUEUE_PREFIX: prefix };
    const agentUser = await makeUser(['host-c'], admin, out);
    const coordinatorUser = await makeUser(['--coordinator'], admin, out);
    const holding: number[] = [];
    for (const port of cluster.ports) {
      const node = new Redis(cluster.urlOf(port), { maxRetriesPerRequest: 1 });
      try {
        if ((await node.call('ACL', 'GETUSER', agentUser.user)) !== null && (await node.call('ACL', 'GETUSER', coordinatorUser.user)) !== null) holding.push(port);
      } finally {
        node.disconnect();
      }
    }
    expect(cluster.ports.length).toBeGreaterThanOrEqual(6);
    expect(holding).toEqual([...cluster.ports]);

    const { primary } = await cluster.ownerOf(tag);
    const { client } = await startPair({
      env: { FSBENCH_REDIS_CLUSTER: cluster.seeds },
      prefix,
      port: 6379,
      adminUrl: cluster.urlOf(primary),
      host: 'host-c',
      coordinator: { user: coordinatorUser.user, passwordFile: path.join(out, `${coordinatorUser.user}.password`) },
      agent: { user: agentUser.user, passwordFile: path.join(out, `${agentUser.user}.password`) },
    });
    const id = await submit(client, { name: 'acl-cluster', workload: 'noop', repetitions: 2, warmup: 0, placement: 'all', params: { value: [1, 2] } });
    expect(await finished(client, id)).toBe(4);

    // On the node that holds the installation's slot, the agent's user still reaches nothing of another host's.
    const asAgent = await connectAs(primary, agentUser.user, agentUser.password);
    try {
      const FORBIDDEN: readonly (readonly string[])[] = [
        ['DEL', `${qualifiedQueueName(prefix, 'host-d')}:wait`],
        ['HSET', agentApprovalsKey(prefix), 'SHA256:x', '{}'],
        ['FLUSHALL'],
        ['CLUSTER', 'RESET'],
        ['CLUSTER', 'FAILOVER'],
      ];
      expect(await notRefused(asAgent, FORBIDDEN)).toEqual([]);
    } finally {
      asAgent.disconnect();
    }
  }, 90_000);
});
