/**
 * The Redis of deploy/kubernetes/redis-acl run for real, short of a cluster: its script exactly
 * as the rendered StatefulSet holds it, in a container of the same image, as uid 999 with a
 * read-only root, the admin password and the users' Secret where the pod mounts them (the users
 * made by `fsbench agents acl --kubernetes` for two nodes). Then each node's agent credentials,
 * as the node's Secret holds them, are used the way that node's agent would: its own queue is
 * open to it; another node's queue, CONFIG and FLUSHALL are refused NOPERM, and the other node's
 * user does not take its password.
 */
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { qualifiedQueueName } from '../queue/jobs.js';
import { dockerClient, engineReachable } from '../sandbox/engine.js';
import { until } from './helpers/http.js';
import { aclOverlay, containersOf, objectId, podsOf, secretData, type AclOverlay } from './helpers/kubernetes.js';

const docker = dockerClient();
if (!(await engineReachable(docker))) throw new Error('this test needs a running Docker engine: `npm test` starts one (scripts/prepare-host.sh)');

const NODES = ['node-a', 'node-b'] as const;
const suffix = `${process.pid}-${randomBytes(3).toString('hex')}`;
const network = `fsbench-k8s-acl-${suffix}`;
const name = `fsbench-redis-0-${suffix}`;
let acl: AclOverlay;
let address = '';
const clients: Redis[] = [];

/** A connection as `user` with `password`. */
async function login(user: string, password: string): Promise<Redis> {
  const r = new Redis({ host: address, port: 6379, username: user, password, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, enableReadyCheck: false });
  r.on('error', () => undefined);
  clients.push(r);
  await r.connect();
  // Who the server says we are: a refused AUTH leaves a connection open that answers as nobody.
  expect(await r.call('ACL', 'WHOAMI')).toBe(user);
  return r;
}

/** Redis's answer to `command`: `ran`, or its error message. */
async function attempt(r: Redis, command: readonly string[]): Promise<string> {
  const [c, ...args] = command;
  try {
    await r.call(c ?? '', ...args);
    return 'ran';
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

/** The password of `node`'s agent as its Secret holds it: what the node's pod reads at /run/fsbench-redis/password. */
const agentPassword = (node: string) => (secretData(acl.objects, 'fsbench-agents', `fsbench-agent-redis-${node}`).get('password') ?? '').trim();

beforeAll(async () => {
  acl = await aclOverlay(NODES);
  const redis = podsOf(acl.objects).find((p) => objectId(p.owner) === 'StatefulSet fsbench/fsbench-redis');
  const c = redis === undefined ? undefined : containersOf(redis.spec)[0]?.container;
  const command = z.array(z.string()).length(3).parse(c?.['command']);
  // The two Secrets as the pod gets them: a file per key, readable by the pod's group (0440, fsGroup 999).
  const mounts = path.join(acl.root, 'mounts');
  for (const [dir, secret] of [['password', 'fsbench-redis'], ['users', 'fsbench-redis-users']] as const) {
    await mkdir(path.join(mounts, dir), { recursive: true });
    for (const [key, value] of secretData(acl.objects, 'fsbench', secret)) {
      await writeFile(path.join(mounts, dir, key), value);
      await chmod(path.join(mounts, dir, key), 0o444);
    }
  }
  await chmod(acl.root, 0o755);
  await docker.createNetwork({ Name: network });
  const container = await docker.createContainer({
    name,
    Image: z.string().parse(c?.['image']),
    User: '999:999',
    Entrypoint: [command[0] ?? '', command[1] ?? ''],
    Cmd: [command[2] ?? ''],
    HostConfig: {
      NetworkMode: network,
      ReadonlyRootfs: true,
      Binds: [`${path.join(mounts, 'password')}:/run/fsbench-redis:ro`, `${path.join(mounts, 'users')}:/run/fsbench-redis-users:ro`],
      Tmpfs: { '/data': 'uid=999,gid=999' },
    },
  });
  await container.start();
  const info = await container.inspect();
  address = z.string().min(1).parse(info.NetworkSettings.Networks[network]?.IPAddress);
  await until('the pod to answer as the admin', async () => ((await attempt(await login('default', acl.adminPassword), ['PING'])) === 'ran' ? true : undefined), {
    ms: 60_000,
    everyMs: 250,
    retryErrors: true,
  });
}, 600_000);

afterAll(async () => {
  for (const r of clients) r.disconnect();
  await docker.getContainer(name).remove({ force: true }).catch(() => undefined);
  await docker.getNetwork(network).remove().catch(() => undefined);
  await acl.remove();
});

describe('the Redis of deploy/kubernetes/redis-acl, its script run as the pod runs it', () => {
  it("loaded every user of the users' Secret at start, the admin's password still the default user's", async () => {
    const admin = await login('default', acl.adminPassword);
    const users = z.array(z.string()).parse(await admin.call('ACL', 'USERS'));
    expect(users.sort()).toEqual(['default', 'fsbench-agent-node-a', 'fsbench-agent-node-b', 'fsbench-coordinator']);
  });

  it("opens a node's own queue to its agent, and refuses it the other node's queue, CONFIG and FLUSHALL with NOPERM", async () => {
    for (const [mine, other] of [NODES, [...NODES].reverse()]) {
      const agent = await login(`fsbench-agent-${mine}`, agentPassword(mine));
      const own = `${qualifiedQueueName('fsbench', mine)}:wait`;
      const theirs = `${qualifiedQueueName('fsbench', other)}:wait`;
      expect(await attempt(agent, ['LPUSH', own, 'a job id'])).toBe('ran');
      const refused = [
        ['LPUSH', theirs, 'a job id'],
        ['DEL', theirs],
        ['LRANGE', theirs, '0', '-1'],
        ['CONFIG', 'GET', 'maxmemory'],
        ['CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru'],
        ['FLUSHALL'],
        ['ACL', 'SETUSER', `fsbench-agent-${mine}`, '~*'],
      ];
      const answers = await Promise.all(refused.map((c) => attempt(agent, c)));
      expect(answers).toHaveLength(7);
      expect(answers.filter((a) => !a.startsWith('NOPERM'))).toEqual([]);
      // One node's password is not the other node's user's.
      expect(await attempt(agent, ['AUTH', `fsbench-agent-${other}`, agentPassword(mine)])).toMatch(/^WRONGPASS/);
    }
    // The refusals are the server's, with the user and the key: the admin reads them in ACL LOG.
    const log = z.array(z.array(z.unknown())).parse(await (await login('default', acl.adminPassword)).call('ACL', 'LOG'));
    expect(log.map((entry) => JSON.stringify(entry)).join('\n')).toContain(`"username","fsbench-agent-node-a"`);
  });

  it("lets the coordinator's user reach every queue but run no admin command", async () => {
    const coordinator = await login('fsbench-coordinator', (secretData(acl.objects, 'fsbench', 'fsbench-coordinator-redis').get('password') ?? '').trim());
    for (const n of NODES) expect(await attempt(coordinator, ['LLEN', `${qualifiedQueueName('fsbench', n)}:wait`])).toBe('ran');
    expect(await attempt(coordinator, ['CONFIG', 'GET', 'maxmemory-policy'])).toBe('ran');
    expect(await attempt(coordinator, ['CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru'])).toMatch(/^NOPERM/);
    expect(await attempt(coordinator, ['FLUSHALL'])).toMatch(/^NOPERM/);
  });
});
