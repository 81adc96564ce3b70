/**
 * The Redis connection's rows of the settings table (table.ts puts them first): where Redis is,
 * its TLS files and password, and Sentinel or Cluster in front of it. queue/redis.ts builds every
 * connection from these values.
 */
import { z } from 'zod';
import { addressList, toggle, urlPassword, type Setting } from './kinds.js';

export const REDIS_SETTINGS = {
  redisUrl: {
    env: 'REDIS_URL',
    flag: '--redis-url <url>',
    schema: z.url({ protocol: /^rediss?$/ }).default('redis://127.0.0.1:6379'),
    default: 'redis://127.0.0.1:6379',
    // It may carry a password (redis://:secret@host): a malformed one is not shown.
    secret: true,
    revealedBy: (v) => (urlPassword(v) ? 'a password' : undefined),
    secretHint: 'or keep the password out of the URL, in FSBENCH_REDIS_PASSWORD_FILE',
    doc:
      'Redis that carries the job queues (coordinator and agents): `redis://[USER:PASSWORD@]host:port`, or `rediss://` for TLS, ' +
      "whose certificate is always verified (FSBENCH_REDIS_CA). USER: an ACL user of this process's own (`fsbench agents acl`: an agent's reaches only " +
      "its host's queue and what agents share), the default user when left out. Never shown in logs with its password; refused with a password as `--redis-url` " +
      '(a command line is readable by every user of the machine).',
  },
  redisCa: {
    env: 'FSBENCH_REDIS_CA',
    flag: '--redis-ca <file>',
    schema: z.string().min(1).optional(),
    default: "(the system's CAs)",
    doc: "The CA that signed Redis's TLS certificate (with a `rediss://` REDIS_URL), as a PEM file's path or the PEM text; Redis's certificate must also name the URL's host.",
  },
  redisCert: {
    env: 'FSBENCH_REDIS_CERT',
    flag: '--redis-cert <file>',
    schema: z.string().min(1).optional(),
    default: '(none)',
    doc: 'Client certificate (PEM path or text) for a Redis that verifies its clients (`tls-auth-clients yes`); with FSBENCH_REDIS_KEY.',
  },
  redisKey: {
    env: 'FSBENCH_REDIS_KEY',
    flag: '--redis-key <file>',
    schema: z.string().min(1).optional(),
    default: '(none)',
    doc: 'Private key of FSBENCH_REDIS_CERT (PEM path or text; as `--redis-key`, only a path).',
    secret: true,
    // A path is harmless on a command line; the key itself is not.
    revealedBy: (v) => (v.includes('-----BEGIN') ? 'a private key' : undefined),
    secretHint: 'or give --redis-key the path of the key file',
  },
  redisPasswordFile: {
    env: 'FSBENCH_REDIS_PASSWORD_FILE',
    flag: '--redis-password-file <file>',
    schema: z.string().min(1).optional(),
    default: '(none)',
    doc: "File holding Redis's password, used when REDIS_URL carries none (compose.yaml shares a generated one this way).",
  },
  // Sentinel as settings of their own rather than a `redis+sentinel://a,b/name` URL: a URL with
  // several hosts is not a WHATWG URL (new URL() refuses it, and shownUrl could not redact it),
  // and this way REDIS_URL keeps meaning the same thing (scheme, user, password, database of the
  // data nodes) with or without Sentinel, so turning Sentinel on is adding two variables.
  redisSentinels: {
    env: 'FSBENCH_REDIS_SENTINELS',
    flag: '--redis-sentinels <list>',
    schema: addressList(26379, 'sentinel'),
    default: '(none: REDIS_URL names Redis itself)',
    doc:
      'Redis Sentinel: `host:port,host:port,...` of the sentinels (port 26379 when left out), which name the primary of FSBENCH_REDIS_MASTER ' +
      "and are asked again after a failover. REDIS_URL then gives only the data nodes' scheme (`rediss://` for TLS), user, password and database; its host and port are not used.",
  },
  redisMaster: {
    env: 'FSBENCH_REDIS_MASTER',
    flag: '--redis-master <name>',
    schema: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, 'must be the master name of sentinel.conf (letters, digits, . _ -)').default('mymaster'),
    default: 'mymaster',
    doc: 'The name the sentinels monitor the primary under (`sentinel monitor NAME ...`); only with FSBENCH_REDIS_SENTINELS.',
  },
  redisSentinelUser: {
    env: 'FSBENCH_REDIS_SENTINEL_USER',
    flag: '--redis-sentinel-user <name>',
    schema: z.string().min(1).optional(),
    default: '(the default user)',
    doc: "ACL user to authenticate to the sentinels as (the sentinels' own, apart from REDIS_URL's user of the data nodes): their client user (`fsbench agents acl --sentinel-client`), which may ask where the primary is but not fail it over.",
  },
  redisSentinelPassword: {
    env: 'FSBENCH_REDIS_SENTINEL_PASSWORD',
    flag: '--redis-sentinel-password <password>',
    schema: z.string().min(1).optional(),
    default: '(none)',
    secret: true,
    secretHint: 'a file is the usual way (FSBENCH_REDIS_SENTINEL_PASSWORD_FILE, as compose.sentinel.yaml does)',
    doc: "Password of FSBENCH_REDIS_SENTINEL_USER on the sentinels (or of their default user, `requirepass` in sentinel.conf), apart from the data nodes'.",
  },
  redisSentinelTls: {
    env: 'FSBENCH_REDIS_SENTINEL_TLS',
    flag: '--redis-sentinel-tls',
    schema: toggle,
    default: 'off',
    doc: "The sentinels speak TLS: verified like the data nodes (FSBENCH_REDIS_CA, or the system's CAs; each sentinel's certificate must name the host given for it), with FSBENCH_REDIS_CERT/KEY when they ask for a client certificate.",
  },
  // A Cluster, like Sentinel, as a list of its own beside REDIS_URL (same reasons); the two
  // exclude each other (queue/redis.ts refuses both), as a Cluster fails over by itself.
  redisCluster: {
    env: 'FSBENCH_REDIS_CLUSTER',
    flag: '--redis-cluster <list>',
    schema: addressList(6379, 'node'),
    default: '(none: REDIS_URL names Redis itself)',
    doc:
      'Redis Cluster: `host:port,host:port,...` of some of its nodes (port 6379 when left out), from which the others and the slots are learned. ' +
      "FSBENCH_QUEUE_PREFIX must then be a hash tag (`{fsbench}`). REDIS_URL gives only the nodes' scheme (`rediss://` for TLS), user and password; its host and port are not used.",
  },
} as const satisfies Record<string, Setting<z.ZodType>>;
