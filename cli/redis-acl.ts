/**
 * `fsbench agents acl`: a Redis ACL user for one agent host (or the coordinator, or the
 * sentinels), as queue/acl.ts defines it. Writes two files: `<user>.acl`, the rule line for
 * redis.conf or an ACL file, with the password only as its SHA-256; and `<user>.password`
 * (0600) for the one who connects as that user. An existing password file is kept, so running
 * the command again rewrites the rules without changing the password. With `--apply` it also
 * runs ACL SETUSER on Redis (every node of a Cluster, or each sentinel for their clients' user),
 * as the admin user of REDIS_URL (or of the sentinels). With `--kubernetes` it writes the users
 * of a fleet's nodes and coordinator as kustomizations (cli/acl-kubernetes.ts).
 */
import path from 'node:path';
import type { Command } from 'commander';
import { Redis } from 'ioredis';
import { z } from 'zod';
import { FsbenchError, messageOf } from '../contract/errors.js';
import { ensureSafeDir } from '../host/safe-dir.js';
import { AclUserName, aclSetUserArgs, agentAclRules, agentUserName, coordinatorAclRules, sentinelClientAclRules, sentinelDataAclRules } from '../queue/acl.js';
import { awaitRedis, connectRedis, redisOptions, refusal, shownRedis, type RedisChannel } from '../queue/redis.js';
import { loadSettings, type SettingName } from '../settings/index.js';
import { writeUserFiles } from './acl-files.js';
import { writeKubernetesUsers } from './acl-kubernetes.js';
import { withSettings } from './client.js';

const ACL_SETTINGS = [
  'redisUrl', 'redisCa', 'redisCert', 'redisKey', 'redisPasswordFile', 'redisSentinels', 'redisMaster', 'redisSentinelUser', 'redisSentinelPassword', 'redisSentinelTls', 'redisCluster', 'queuePrefix',
] as const satisfies readonly SettingName[];

type Role = 'agent' | 'coordinator' | 'sentinel' | 'sentinel-client';

const log = (line: string) => {
  process.stderr.write(`${line}\n`);
};

/** The nodes `CLUSTER NODES` lists (`<id> <ip:port@bus[,hostname]> <flags> ...`), but those without an address. */
function clusterNodes(text: string): { host: string; port: number }[] {
  const nodes: { host: string; port: number }[] = [];
  for (const line of text.split('\n')) {
    const [, address, flags] = line.split(' ');
    const m = /^(.*):(\d+)@/.exec(address ?? '');
    if (m === null || (flags ?? '').includes('noaddr')) continue;
    nodes.push({ host: (m[1] ?? '').replace(/^\[(.*)\]$/, '$1'), port: Number(m[2]) });
  }
  return nodes;
}

/** ACL SETUSER on each sentinel of FSBENCH_REDIS_SENTINELS, as FSBENCH_REDIS_SENTINEL_USER (their admin). */
async function applyOnSentinels(s: RedisChannel, args: readonly string[]): Promise<void> {
  const sentinels = s.redisSentinels;
  if (sentinels === undefined) throw new FsbenchError('CONFIG_INVALID', '--sentinel-client --apply sets the user on the sentinels: name them in FSBENCH_REDIS_SENTINELS, with their admin password in FSBENCH_REDIS_SENTINEL_PASSWORD(_FILE)');
  const options = redisOptions(s, 'fsbench-acl');
  for (const a of sentinels) {
    const sentinel = new Redis({
      host: a.host,
      port: a.port,
      lazyConnect: true,
      maxRetriesPerRequest: 1,
      retryStrategy: () => null,
      ...(options.sentinelUsername === undefined ? {} : { username: options.sentinelUsername }),
      ...(options.sentinelPassword === undefined ? {} : { password: options.sentinelPassword }),
      ...(options.sentinelTLS === undefined ? {} : { tls: options.sentinelTLS }),
    });
    sentinel.on('error', () => undefined);
    try {
      await sentinel.connect();
      await sentinel.call('ACL', 'SETUSER', ...args);
      log(`ACL SETUSER ${args[0] ?? ''} on the sentinel at ${a.host}:${a.port}`);
    } catch (err) {
      throw refusal(err, s) ?? new FsbenchError('UNAVAILABLE', `the sentinel at ${a.host}:${a.port} did not take the user: ${messageOf(err)}`);
    } finally {
      sentinel.disconnect();
    }
  }
}

export function registerAclCommand(agents: Command): void {
  withSettings(
    agents
      .command('acl')
      .description("Make a Redis ACL user that reaches only what one agent host needs (or the coordinator's, or the sentinels'): its rule line and its password file"),
    ACL_SETTINGS,
  )
    .argument('[host...]', "the agent's host id (its boot id, /proc/sys/kernel/random/boot_id on that host, or its FSBENCH_HOST_ID); with --kubernetes, the names of the nodes to measure")
    .option('--coordinator', "the coordinator's user instead: every key of the installation, no admin command")
    .option('--sentinel', 'the user the sentinels log in to the data nodes as (`sentinel auth-user`): no key at all')
    .option('--sentinel-client', 'the user to set on each sentinel for coordinator and agents (FSBENCH_REDIS_SENTINEL_USER): asks where the primary is, changes nothing')
    .option('--user <name>', 'the user name (default: fsbench-agent-<host>, fsbench-coordinator, fsbench-sentinel, fsbench-client)')
    .option('--out <dir>', 'where to write <user>.acl and <user>.password', '.')
    .option('--apply', 'also run ACL SETUSER on the Redis of REDIS_URL (each node of a Cluster), which must let REDIS_URL\'s user do that')
    .option('--kubernetes <overlay>', "the users of a Kubernetes fleet instead: each node's agent user, DaemonSet and Secret, and the coordinator's, written into <overlay>/users (deploy/kubernetes/redis-acl)")
    .action(async (hosts: string[], _opts: unknown, cmd: Command) => {
      const opts: Record<string, unknown> = cmd.optsWithGlobals();
      if (typeof opts['kubernetes'] === 'string') {
        if (['coordinator', 'sentinel', 'sentinelClient', 'apply', 'user'].some((o) => opts[o] !== undefined)) {
          throw new FsbenchError('CONFIG_INVALID', '--kubernetes makes every user of the fleet itself and applies nothing: give it the node names only');
        }
        const s = loadSettings(['queuePrefix'], opts);
        for (const line of await writeKubernetesUsers(opts['kubernetes'], hosts, s.queuePrefix)) log(line);
        return;
      }
      if (hosts.length > 1) throw new FsbenchError('CONFIG_INVALID', 'one host id at a time (several nodes: --kubernetes)');
      const host = hosts[0];
      const roles = (['coordinator', 'sentinel', 'sentinelClient'] as const).filter((r) => opts[r] === true);
      if (roles.length > 1 || (roles.length === 1 && host !== undefined)) throw new FsbenchError('CONFIG_INVALID', 'give one of: a host id, --coordinator, --sentinel, --sentinel-client');
      if (roles.length === 0 && host === undefined) throw new FsbenchError('CONFIG_INVALID', 'name the agent host (its host id), or give --coordinator, --sentinel or --sentinel-client');
      const role: Role = roles[0] === undefined ? 'agent' : roles[0] === 'sentinelClient' ? 'sentinel-client' : roles[0];
      const s = loadSettings(ACL_SETTINGS, opts);
      const rules =
        role === 'agent' ? agentAclRules(s.queuePrefix, host ?? '') : role === 'coordinator' ? coordinatorAclRules(s.queuePrefix) : role === 'sentinel' ? sentinelDataAclRules() : sentinelClientAclRules();
      const defaultName = role === 'agent' ? agentUserName(host ?? '') : role === 'coordinator' ? 'fsbench-coordinator' : role === 'sentinel' ? 'fsbench-sentinel' : 'fsbench-client';
      const user = AclUserName.parse(typeof opts['user'] === 'string' ? opts['user'] : defaultName);
      const dir = await ensureSafeDir(path.resolve(typeof opts['out'] === 'string' ? opts['out'] : '.'), { what: 'the directory of ACL files', setting: '--out' });
      const { password, created, line } = await writeUserFiles(dir, user, rules);
      // The rule line on stdout for scripts (it holds the password's hash only); what was done on stderr.
      process.stdout.write(`${line}\n`);
      log(`${path.join(dir, `${user}.acl`)}: the rules of ${user}; ${path.join(dir, `${user}.password`)}: its password (${created ? 'new' : 'kept'}), for FSBENCH_REDIS_${role.startsWith('sentinel-') ? 'SENTINEL_' : ''}PASSWORD_FILE`);
      if (opts['apply'] !== true) return;
      if (role === 'sentinel-client') {
        await applyOnSentinels(s, aclSetUserArgs(user, password, rules));
        return;
      }
      const redis = connectRedis(s, 'fsbench-acl');
      try {
        await awaitRedis(redis, s, log);
        const args = aclSetUserArgs(user, password, rules);
        if (s.redisCluster === undefined) {
          await redis.call('ACL', 'SETUSER', ...args);
        } else {
          // Every node, replicas included: any of them may become a primary, and ACLs are not replicated.
          const nodes = clusterNodes(z.string().parse(await redis.call('CLUSTER', 'NODES')));
          for (const n of nodes) {
            const node = new Redis({ ...redisOptions(s, 'fsbench-acl'), host: n.host, port: n.port, lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
            node.on('error', () => undefined);
            try {
              await node.connect();
              await node.call('ACL', 'SETUSER', ...args);
            } catch (err) {
              throw refusal(err, s) ?? new FsbenchError('UNAVAILABLE', `the Cluster node at ${n.host}:${n.port} did not take the user: ${messageOf(err)}`);
            } finally {
              node.disconnect();
            }
          }
          log(`ACL SETUSER ${user} on all ${nodes.length} nodes of the Cluster`);
        }
        log(`ACL SETUSER ${user} on ${shownRedis(s)}: persist it with ACL SAVE (an ACL file) or CONFIG REWRITE, or put the line in each server's configuration`);
      } finally {
        redis.disconnect();
      }
    });
}
