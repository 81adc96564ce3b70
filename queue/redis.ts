/**
 * Redis connections as BullMQ needs them, for the coordinator, the agents and the benchmark:
 * every one is built here, from REDIS_URL (which may carry a user and a password, and says
 * `rediss://` for TLS) and the TLS files, so no connection can skip the credentials or the
 * certificate check.
 */
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import type { ConnectionOptions } from 'node:tls';
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { z } from 'zod';
import { FsbenchError } from '../contract/errors.js';

/** Where Redis is and how to prove who talks to whom: the settings REDIS_URL and FSBENCH_REDIS_*. */
export interface RedisChannel {
  readonly redisUrl: string;
  /** FSBENCH_REDIS_CA: the CA that signed the server's certificate (PEM); without it, the system's CAs. */
  readonly redisCa?: string | undefined;
  /** FSBENCH_REDIS_CERT and FSBENCH_REDIS_KEY: a client certificate, for servers that ask for one. */
  readonly redisCert?: string | undefined;
  readonly redisKey?: string | undefined;
  /** FSBENCH_REDIS_PASSWORD_FILE: the password, when REDIS_URL carries none (a compose secret). */
  readonly redisPasswordFile?: string | undefined;
  /** FSBENCH_REDIS_SENTINELS: ask these sentinels where the primary is; REDIS_URL's host and port are then not used. */
  readonly redisSentinels?: readonly SentinelAddress[] | undefined;
  /** FSBENCH_REDIS_MASTER: the name the sentinels monitor the primary under. */
  readonly redisMaster?: string | undefined;
  /** FSBENCH_REDIS_SENTINEL_USER and _PASSWORD: the sentinels' own credentials. */
  readonly redisSentinelUser?: string | undefined;
  readonly redisSentinelPassword?: string | undefined;
  /** FSBENCH_REDIS_SENTINEL_TLS: the sentinels speak TLS, checked like the data nodes. */
  readonly redisSentinelTls?: boolean | undefined;
  /** FSBENCH_REDIS_CLUSTER: some nodes of a Redis Cluster; REDIS_URL's host and port are then not used. */
  readonly redisCluster?: readonly SentinelAddress[] | undefined;
  /** FSBENCH_QUEUE_PREFIX: under a Cluster it must be a hash tag, or BullMQ's scripts would touch keys of several slots. */
  readonly queuePrefix?: string | undefined;
}

/**
 * A connection as fsbench holds it: to one Redis (directly or through Sentinel), or to a
 * Cluster. Both take the same commands on fsbench's keys, all in one slot (the hash-tag prefix);
 * what concerns a server rather than a key (INFO, CONFIG) goes through `serverNodes`.
 */
export type RedisConnection = Redis | Cluster;

export interface SentinelAddress {
  readonly host: string;
  readonly port: number;
}

/** The master name when FSBENCH_REDIS_MASTER is not set: the one Redis's own sentinel.conf example uses. */
export const DEFAULT_MASTER_NAME = 'mymaster';

/** A Redis URL as it may be shown in a log or an error: its password, if any, replaced. */
export function shownUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== '') u.password = 'redacted';
    return u.toString();
  } catch {
    return '(the REDIS_URL given)';
  }
}

const channelOf = (c: RedisChannel | string): RedisChannel => (typeof c === 'string' ? { redisUrl: c } : c);

/** Where a channel leads, as a log or an error may show it: the URL without its password, and the sentinels if any. */
export function shownRedis(channel: RedisChannel | string): string {
  const c = channelOf(channel);
  const list = (nodes: readonly SentinelAddress[]) => nodes.map((a) => (isIP(a.host) === 6 ? `[${a.host}]:${a.port}` : `${a.host}:${a.port}`)).join(',');
  if (c.redisCluster !== undefined) return `the Redis Cluster of ${list(c.redisCluster)} (${shownUrl(c.redisUrl)})`;
  if (c.redisSentinels === undefined) return shownUrl(c.redisUrl);
  const sentinels = list(c.redisSentinels);
  return `the primary of ${c.redisMaster ?? DEFAULT_MASTER_NAME} (sentinels ${sentinels}${c.redisSentinelTls === true ? ', TLS' : ''}; ${shownUrl(c.redisUrl)})`;
}

const RedisUrl = z.object({
  protocol: z.enum(['redis:', 'rediss:'], { error: 'must start with redis:// or rediss:// (TLS)' }),
  hostname: z.string().min(1, 'has no host'),
  port: z.union([z.literal(''), z.coerce.number().int().min(1).max(65535)]),
  username: z.string(),
  password: z.string(),
  pathname: z.union([z.literal(''), z.literal('/'), z.string().regex(/^\/\d{1,2}$/, 'may name only a database number (/0 ... /15)')]),
});

const isPem = (value: string): boolean => value.trimStart().startsWith('-----BEGIN');

/** How a PEM setting is named in a message: its path, never the text of a key. */
const pemShown = (value: string): string => (isPem(value) ? 'PEM text' : value);

function readPem(setting: string, file: string, what: string): string {
  // TLS settings take the PEM itself too, so an agent container needs no file mounted for them.
  if (isPem(file)) return file;
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    const why = err instanceof Error && 'code' in err ? String(err.code) : 'unreadable';
    throw new FsbenchError('CONFIG_INVALID', `${setting} ${file}: cannot read ${what} (${why}); give a file's path or the PEM text itself`);
  }
}

/**
 * The ioredis options for a channel. `maxRetriesPerRequest: null` makes commands wait for a
 * reconnect instead of failing, which BullMQ workers require and which lets everything ride
 * out a Redis restart. With `rediss://` the server's certificate is always verified (against
 * FSBENCH_REDIS_CA, or the system's CAs) and its name checked against the URL's host.
 */
export function redisOptions(channel: RedisChannel | string, name: string): RedisOptions {
  const c = channelOf(channel);
  const shown = shownUrl(c.redisUrl);
  let parsed: URL;
  try {
    parsed = new URL(c.redisUrl);
  } catch {
    throw new FsbenchError('CONFIG_INVALID', 'REDIS_URL is not a URL (value not shown: it may carry a password)');
  }
  const r = RedisUrl.safeParse(parsed);
  if (!r.success) throw new FsbenchError('CONFIG_INVALID', `REDIS_URL ${shown} ${r.error.issues.map((i) => i.message).join('; ')}`);
  const u = r.data;
  const tls = u.protocol === 'rediss:';
  const tlsFiles = [
    ['FSBENCH_REDIS_CA', c.redisCa],
    ['FSBENCH_REDIS_CERT', c.redisCert],
    ['FSBENCH_REDIS_KEY', c.redisKey],
  ] as const;
  const given = tlsFiles.filter(([, v]) => v !== undefined).map(([k]) => k);
  const sentinels = c.redisSentinels;
  const sentinelTls = sentinels !== undefined && c.redisSentinelTls === true;
  const sentinelOnly = [
    ['FSBENCH_REDIS_SENTINEL_USER', c.redisSentinelUser],
    ['FSBENCH_REDIS_SENTINEL_PASSWORD', c.redisSentinelPassword],
    ['FSBENCH_REDIS_SENTINEL_TLS', c.redisSentinelTls === true ? 'on' : undefined],
  ] as const;
  const stray = sentinelOnly.filter(([, v]) => v !== undefined).map(([k]) => k);
  const cluster = c.redisCluster;
  // A Cluster elects its own replacements: sentinels beside it would name a primary of their own.
  if (cluster !== undefined && sentinels !== undefined) {
    throw new FsbenchError('CONFIG_INVALID', 'FSBENCH_REDIS_CLUSTER and FSBENCH_REDIS_SENTINELS both set: a Redis Cluster fails over by itself; name its nodes, or the sentinels, not both');
  }
  if (cluster !== undefined && !/^\{[^{}]+\}$/.test(c.queuePrefix ?? '')) {
    throw new FsbenchError(
      'CONFIG_INVALID',
      `FSBENCH_REDIS_CLUSTER set, but FSBENCH_QUEUE_PREFIX ${c.queuePrefix ?? '(default fsbench)'} is not a hash tag: write it in braces ({${(c.queuePrefix ?? 'fsbench').replace(/[{}]/g, '')}}), ` +
        'so that every key of the installation is in one slot, as BullMQ\'s multi-key scripts require on a Cluster',
    );
  }
  if (cluster !== undefined && u.pathname.length > 1 && u.pathname !== '/0') {
    throw new FsbenchError('CONFIG_INVALID', `REDIS_URL ${shown} names database ${u.pathname.slice(1)}, but a Redis Cluster has only database 0: leave the path out`);
  }
  // Sentinel credentials without sentinels would be silently ignored, and Redis reached directly.
  if (sentinels === undefined && stray.length > 0) {
    throw new FsbenchError('CONFIG_INVALID', `${stray.join(', ')} set, but FSBENCH_REDIS_SENTINELS is not: name the sentinels, or unset ${stray.length > 1 ? 'them' : 'it'}`);
  }
  // A CA given for a plain connection would protect nothing while looking as if it did.
  if (!tls && !sentinelTls && given.length > 0) {
    throw new FsbenchError('CONFIG_INVALID', `${given.join(', ')} set, but REDIS_URL ${shown} is not TLS: write it as rediss://`);
  }
  if ((c.redisCert === undefined) !== (c.redisKey === undefined)) {
    throw new FsbenchError('CONFIG_INVALID', 'FSBENCH_REDIS_CERT and FSBENCH_REDIS_KEY go together: set both or neither');
  }
  let password = decodeURIComponent(u.password);
  if (password === '' && c.redisPasswordFile !== undefined) {
    try {
      password = readFileSync(c.redisPasswordFile, 'utf8').replace(/\r?\n$/, '');
    } catch (err) {
      const why = err instanceof Error && 'code' in err ? String(err.code) : 'unreadable';
      throw new FsbenchError('CONFIG_INVALID', `FSBENCH_REDIS_PASSWORD_FILE ${c.redisPasswordFile}: cannot read the Redis password (${why}); or put the password in REDIS_URL`);
    }
    if (password === '') throw new FsbenchError('CONFIG_INVALID', `FSBENCH_REDIS_PASSWORD_FILE ${c.redisPasswordFile} is empty`);
  }
  const host = u.hostname.replace(/^\[(.*)\]$/, '$1');
  let tlsOptions: ConnectionOptions | undefined;
  // Without servername, Node checks each certificate against the address connected to: what we
  // want for sentinels (one option object serves them all) and for the primary they name.
  const trust = (): ConnectionOptions => ({
    // Node verifies by default; said here so that no option merged in can turn it off.
    rejectUnauthorized: true,
    ...(c.redisCa === undefined ? {} : { ca: readPem('FSBENCH_REDIS_CA', c.redisCa, 'the CA certificate') }),
    ...(c.redisCert === undefined ? {} : { cert: readPem('FSBENCH_REDIS_CERT', c.redisCert, 'the client certificate') }),
    ...(c.redisKey === undefined ? {} : { key: readPem('FSBENCH_REDIS_KEY', c.redisKey, 'the client key') }),
  });
  if (tls) {
    // With sentinels the URL's host is not where the connection goes: no name to check it against.
    // Nor with a Cluster: each node is reached at the address the Cluster announces for it.
    tlsOptions = { ...trust(), ...(isIP(host) === 0 && sentinels === undefined && cluster === undefined ? { servername: host } : {}) };
  }
  if (sentinels !== undefined) {
    return {
      sentinels: sentinels.map((a) => ({ host: a.host, port: a.port })),
      name: c.redisMaster ?? DEFAULT_MASTER_NAME,
      role: 'master',
      ...(c.redisSentinelUser === undefined ? {} : { sentinelUsername: c.redisSentinelUser }),
      ...(c.redisSentinelPassword === undefined ? {} : { sentinelPassword: c.redisSentinelPassword }),
      ...(sentinelTls ? { sentinelTLS: trust() } : {}),
      // ioredis speaks TLS to the primary in Sentinel mode only when told so twice.
      ...(tlsOptions === undefined ? {} : { tls: tlsOptions, enableTLSForSentinelMode: true }),
      ...(u.username === '' ? {} : { username: decodeURIComponent(u.username) }),
      ...(password === '' ? {} : { password }),
      db: u.pathname.length > 1 ? Number(u.pathname.slice(1)) : 0,
      maxRetriesPerRequest: null,
      retryStrategy: reconnectDelay,
      // All sentinels unreachable: the same spread-out backoff as the data connection's.
      sentinelRetryStrategy: reconnectDelay,
      // A primary demoted by a switch-over (SENTINEL FAILOVER) keeps its clients connected but
      // refuses writes (READONLY) and wakes blocked ones (UNBLOCKED, BullMQ's BZPOPMIN): reconnect,
      // which asks the sentinels again, and resend the command, which the old primary did not run.
      // ioredis's failoverDetector would notice sooner but holds a subscription to every sentinel
      // per connection, and BullMQ makes several connections per worker.
      reconnectOnError: (err) => (/^(READONLY|UNBLOCKED)\b/.test(err.message) ? 2 : false),
      connectionName: name,
      enableReadyCheck: true,
    };
  }
  if (cluster !== undefined) {
    // Each node's options (the Cluster's redisOptions): no host, port or database; never
    // keyPrefix, which BullMQ's scripts would not see.
    return {
      ...(u.username === '' ? {} : { username: decodeURIComponent(u.username) }),
      ...(password === '' ? {} : { password }),
      ...(tlsOptions === undefined ? {} : { tls: tlsOptions }),
      maxRetriesPerRequest: null,
      retryStrategy: reconnectDelay,
      connectionName: name,
      enableReadyCheck: true,
    };
  }
  return {
    host,
    port: u.port === '' ? 6379 : u.port,
    ...(u.username === '' ? {} : { username: decodeURIComponent(u.username) }),
    ...(password === '' ? {} : { password }),
    db: u.pathname.length > 1 ? Number(u.pathname.slice(1)) : 0,
    ...(tlsOptions === undefined ? {} : { tls: tlsOptions }),
    maxRetriesPerRequest: null,
    retryStrategy: reconnectDelay,
    connectionName: name,
    enableReadyCheck: true,
  };
}

/** The longest wait between two attempts to reconnect: also how late a process may notice Redis is back. */
export const RECONNECT_MAX_MS = 5_000;

/**
 * Reconnects 100 ms after a loss, then twice as late each time up to RECONNECT_MAX_MS, each
 * delay +-20% so that a fleet's agents do not all reconnect in the same millisecond when Redis
 * returns. ioredis's default (50 ms more per attempt, at most 2 s) never spreads them.
 */
export function reconnectDelay(attempt: number): number {
  const base = Math.min(RECONNECT_MAX_MS, 100 * 2 ** Math.min(Math.max(0, attempt - 1), 16));
  return Math.round(base * (0.8 + Math.random() * 0.4));
}

/**
 * The ioredis Cluster options for a channel with FSBENCH_REDIS_CLUSTER: its seed nodes, each
 * node's options from redisOptions, and the same spread-out backoff when no node answers.
 */
export function clusterOptions(channel: RedisChannel, name: string): { readonly nodes: { host: string; port: number }[]; readonly options: ClusterOptions } {
  const nodeOptions = redisOptions(channel, name);
  const seeds = channel.redisCluster;
  if (seeds === undefined) throw new FsbenchError('INTERNAL', 'clusterOptions called without FSBENCH_REDIS_CLUSTER');
  return {
    nodes: seeds.map((a) => ({ host: a.host, port: a.port })),
    options: {
      redisOptions: nodeOptions,
      clusterRetryStrategy: reconnectDelay,
      enableReadyCheck: true,
      // Commands wait while a slot has no primary (a failover under way): the replica is
      // promoted within about two node timeouts, and a run's report must not fail meanwhile.
      retryDelayOnClusterDown: 200,
      retryDelayOnFailover: 200,
    },
  };
}

/** A URL alone names one Redis (the benchmarks connect so): never a Cluster. */
export function connectRedis(channel: string, name: string): Redis;
export function connectRedis(channel: RedisChannel | string, name: string): RedisConnection;
export function connectRedis(channel: RedisChannel | string, name: string): RedisConnection {
  const c = channelOf(channel);
  let redis: RedisConnection;
  if (c.redisCluster === undefined) {
    redis = new Redis(redisOptions(c, name));
  } else {
    const { nodes, options } = clusterOptions(c, name);
    redis = new Cluster(nodes, options);
  }
  // Connection errors are RedisHealth's to report, once per outage (queue/redis-health.ts);
  // without a listener ioredis would print every reconnect attempt while Redis is away.
  redis.on('error', () => undefined);
  return redis;
}

/**
 * The servers behind a connection, for what concerns a server rather than a key (CONFIG GET,
 * INFO): the one Redis, or every node a Cluster knows, replicas included, since any of them may
 * become the primary of fsbench's slot. A Cluster would send such a command to a node of its
 * choosing, which says nothing of the others. `node` names a Cluster's node (host:port).
 */
export function serverNodes(redis: RedisConnection): { readonly redis: Redis; readonly node?: string }[] {
  if (!(redis instanceof Cluster)) return [{ redis }];
  return redis.nodes('all').map((n) => ({ redis: n, node: `${n.options.host ?? ''}:${String(n.options.port ?? '')}` }));
}

const RunId = /^run_id:([0-9a-f]+)/m;

/** The node a Cluster sends `key` to now (the primary of its slot), or undefined while it does not know one. */
async function slotPrimary(cluster: Cluster, key: string): Promise<Redis | undefined> {
  const slot = z.number().int().parse(await cluster.call('CLUSTER', 'KEYSLOT', key));
  const owner = cluster.slots[slot]?.[0];
  return cluster.nodes('master').find((n) => `${n.options.host ?? ''}:${String(n.options.port ?? '')}` === owner);
}

/**
 * Calls `changed` each time `redis` is ready on a different Redis server than before (its
 * `run_id` differs): a Sentinel failover, or a Redis restarted. Either may have lost writes it
 * had acknowledged (replication and the append-only file's fsync are both asynchronous), so
 * whoever relies on what is in Redis must look again. Returns the function that stops watching.
 *
 * On a Cluster the server that matters is the primary of `key`'s slot (all of fsbench's keys
 * are in it: the hash-tag prefix); another shard failing over loses nothing of fsbench's. A
 * Cluster emits no 'ready' when one slot changes hands, so it is looked at after each refresh
 * of the slot table too (every 5 s, and whenever a node fails or a command is MOVED).
 */
export function onServerChange(redis: RedisConnection, key: string, changed: (from: string, to: string) => void): () => void {
  let known: string | undefined;
  const check = () => {
    const server = redis instanceof Cluster ? slotPrimary(redis, key) : Promise.resolve(redis);
    server
      .then((node) => node?.info('server'))
      .then(
        (info) => {
          const id = info === undefined ? undefined : RunId.exec(info)?.[1];
          if (id === undefined) return;
          if (known !== undefined && id !== known) changed(known, id);
          known = id;
        },
        // Gone again before answering: the next 'ready' (or refresh) checks.
        () => undefined,
      );
  };
  redis.on('ready', check);
  if (redis instanceof Cluster) redis.on('refresh', check);
  if (redis.status === 'ready') check();
  return () => {
    redis.off('ready', check);
    redis.off('refresh', check);
  };
}

/** Node's codes for a server certificate that does not verify. */
const CERT_ERRORS = new Set([
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_SIGNATURE_FAILURE',
  'CERT_UNTRUSTED',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/**
 * What an error from Redis means when retrying cannot help (credentials, certificates), as one
 * line naming the setting to change; undefined for errors that a wait may cure (Redis starting).
 */
export function refusal(err: unknown, c: RedisChannel): FsbenchError | undefined {
  if (!(err instanceof Error)) return undefined;
  const url = shownRedis(c);
  const code = 'code' in err && typeof err.code === 'string' ? err.code : '';
  // ioredis reports a sentinel's refusal inside its own message ("failed to connect to sentinel ...").
  if (c.redisSentinels !== undefined && /sentinel/i.test(err.message) && /NOAUTH|WRONGPASS|NOPERM/.test(err.message)) {
    return new FsbenchError(
      'REDIS_REFUSED',
      `the sentinels of ${url} refused fsbench (${/WRONGPASS|NOPERM/.exec(err.message)?.[0] ?? 'NOAUTH'}): check FSBENCH_REDIS_SENTINEL_PASSWORD (or its _FILE) and FSBENCH_REDIS_SENTINEL_USER against sentinel.conf`,
    );
  }
  if (CERT_ERRORS.has(code)) {
    const trust = c.redisCa === undefined ? "the system's CAs (FSBENCH_REDIS_CA is not set)" : `the CA in FSBENCH_REDIS_CA (${pemShown(c.redisCa)})`;
    return new FsbenchError(
      'REDIS_REFUSED',
      `the TLS certificate of Redis at ${url} is not trusted by ${trust}: ${err.message}. Set FSBENCH_REDIS_CA to the CA that signed Redis's certificate, and use the host name its certificate names`,
    );
  }
  if (code === 'ERR_SSL_WRONG_VERSION_NUMBER' || /wrong version number|packet length too long/i.test(err.message)) {
    return new FsbenchError('REDIS_REFUSED', `Redis at ${url} does not speak TLS on that port: use redis://, or the port Redis serves TLS on`);
  }
  if (err.message.includes('NOAUTH')) {
    return new FsbenchError(
      'REDIS_REFUSED',
      `Redis at ${url} requires a password: put it in REDIS_URL (redis://:PASSWORD@host:port, or redis://USER:PASSWORD@...) or in the file FSBENCH_REDIS_PASSWORD_FILE names`,
    );
  }
  if (err.message.includes('WRONGPASS')) {
    return new FsbenchError('REDIS_REFUSED', `Redis at ${url} refused the user and password given (REDIS_URL or FSBENCH_REDIS_PASSWORD_FILE): check them against the server's`);
  }
  if (err.message.includes('NOPERM')) {
    return new FsbenchError('REDIS_REFUSED', `Redis at ${url} lets this user in but refuses it a command or key fsbench needs (${err.message.replace(/\s+/g, ' ').slice(0, 200)}): give the user ~<FSBENCH_QUEUE_PREFIX>:* and the commands BullMQ runs`);
  }
  return undefined;
}

const REDIS_START_WAIT_MS = 30_000;

/**
 * Waits for Redis at start (it may be starting alongside, as in a compose file), saying so in
 * the log, and stops the process with one line if it never answers, or at once when it
 * refuses the credentials or its certificate does not verify.
 */
export async function awaitRedis(redis: RedisConnection, channel: RedisChannel | string, log: (line: string) => void): Promise<void> {
  const c = channelOf(channel);
  const url = shownRedis(c);
  const told = setTimeout(() => {
    log(`Redis at ${url} does not answer yet; waiting up to ${REDIS_START_WAIT_MS / 1000} s`);
  }, 2000);
  let timer: NodeJS.Timeout | undefined;
  let onError: ((err: unknown) => void) | undefined;
  try {
    await Promise.race([
      redis.ping(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          reject(new FsbenchError('UNAVAILABLE', `cannot reach Redis at ${url} within ${REDIS_START_WAIT_MS / 1000} s: start it, or point REDIS_URL (--redis-url) at it`));
        }, REDIS_START_WAIT_MS);
      }),
      new Promise<never>((_, reject) => {
        onError = (err: unknown) => {
          const refused = refusal(err, c);
          if (refused) reject(refused);
        };
        redis.on('error', onError);
      }),
    ]);
  } catch (err) {
    redis.disconnect();
    // A refused AUTH also fails the PING that waited for the connection.
    throw refusal(err, c) ?? err;
  } finally {
    clearTimeout(told);
    clearTimeout(timer);
    if (onError) redis.off('error', onError);
  }
}
