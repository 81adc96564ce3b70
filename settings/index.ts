/**
 * Every process setting, in one table: its environment variable, its CLI flag, its default and
 * its documentation. `fsbench settings --md` prints this table for docs/reference.md. A missing or
 * malformed setting stops the process at start with one line naming it.
 */
import { closeSync, openSync, readSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { FsbenchError, errnoOf as contractErrnoOf } from '../contract/errors.js';
import { Label } from '../contract/fingerprint.js';
import { INTERFERENCE_SETTINGS } from '../contract/interference.js';
import { formatDuration, formatSize, parseDuration, parseSize } from '../contract/units.js';

interface Setting<T extends z.ZodType> {
  readonly env: string;
  readonly flag: string;
  readonly schema: T;
  /** Shown in docs; the schema's own default is what applies. */
  readonly default: string;
  readonly doc: string;
  /**
   * Its value is a secret: never shown in an error (nor a log), even when it is malformed. It can
   * also come from a file (`<ENV>_FILE`, `--<flag>-file`), and its flag, which every user of the
   * machine can read in /proc/<pid>/cmdline, is refused when it would carry the secret.
   */
  readonly secret?: boolean;
  /**
   * For a secret setting whose flag may also hold something harmless (a path, a URL without a
   * password): what a flag value reveals (`a password`), or undefined when it reveals nothing.
   * Without it every value of a secret setting's flag is the secret.
   */
  readonly revealedBy?: (flagValue: string) => string | undefined;
  /** Said after the file alternatives when the flag is refused. */
  readonly secretHint?: string;
}

const port = z.coerce.number().int().min(0).max(65535);

/** A duration as people write it (`250ms`, `2s`, or bare milliseconds), in milliseconds. */
function duration(min: number, max: number) {
  return z
    .union([z.number(), z.string()])
    .transform((raw, ctx) => {
      const r = parseDuration(/^\d+$/.test(String(raw)) ? Number(raw) : raw);
      if (!r.ok) {
        ctx.addIssue({ code: 'custom', message: r.reason });
        return z.NEVER;
      }
      return r.value;
    })
    .pipe(z.number().min(min, `must be at least ${formatDuration(min)}`).max(max, `must be at most ${formatDuration(max)}`));
}

/** A size as people write it (`1MiB`, or bare bytes), in bytes. */
function size(min: number, max: number) {
  return z
    .union([z.number(), z.string()])
    .transform((raw, ctx) => {
      const r = parseSize(/^\d+$/.test(String(raw)) ? Number(raw) : raw);
      if (!r.ok) {
        ctx.addIssue({ code: 'custom', message: r.reason });
        return z.NEVER;
      }
      return r.value;
    })
    .pipe(z.number().min(min, `must be at least ${formatSize(min)}`).max(max, `must be at most ${formatSize(max)}`));
}
const url = z.url({ protocol: /^https?$/ });

/** Whether a URL carries a password; one that does not parse is judged by its shape, to be safe. */
function urlPassword(text: string): boolean {
  try {
    return new URL(text).password !== '';
  } catch {
    return /^[a-z][a-z0-9+.-]*:\/\/[^/@]*:[^/@]*@/i.test(text);
  }
}

/** `a,b , c` as a list, without empty entries. */
const commaList = (s: string) => s.split(',').map((x) => x.trim()).filter((x) => x !== '');

/** A DNS name as a Host header carries it: labels of letters, digits and dashes. */
const HOST_NAME = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/;

/** A switch from the environment (`1`, `true`, `yes`; `0`, `false`, `no`) or a flag without a value. */
/** `host:port,...` (IPv6 in brackets, `defaultPort` when left out), as the Sentinel and Cluster settings take their nodes. */
function addressList(defaultPort: number, what: string) {
  return z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined) return undefined;
      const out: { host: string; port: number }[] = [];
      for (const entry of commaList(v)) {
        const m = /^(?:\[([0-9a-f:.]+)\]|([^:[\]\s]+))(?::(\d{1,5}))?$/i.exec(entry);
        const host = m?.[1] ?? m?.[2];
        const p = Number(m?.[3] ?? defaultPort);
        if (host === undefined || p < 1 || p > 65535) {
          ctx.addIssue({ code: 'custom', message: `${JSON.stringify(entry)} is not host:port (an IPv6 address in brackets)` });
          return z.NEVER;
        }
        out.push({ host, port: p });
      }
      if (out.length === 0) {
        ctx.addIssue({ code: 'custom', message: `names no ${what}` });
        return z.NEVER;
      }
      return out;
    });
}

const toggle = z
  .union([z.boolean(), z.enum(['1', '0', 'true', 'false', 'yes', 'no'])])
  .default(false)
  .transform((v) => v === true || v === '1' || v === 'true' || v === 'yes');

/**
 * The default scratch directory: one that only the user fsbench runs as can change, never a
 * shared path such as /tmp/fsbench that another local user could create first (and then steer
 * what root writes and removes there; see host/safe-dir.ts).
 */
function defaultScratch(): string {
  if (process.geteuid?.() === 0) return '/var/lib/fsbench';
  const state = process.env['XDG_STATE_HOME'];
  return path.join(state !== undefined && path.isAbsolute(state) ? state : path.join(os.homedir(), '.local', 'state'), 'fsbench');
}

export const SETTINGS = {
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
      "whose certificate is always verified (FSBENCH_REDIS_CA). Never shown in logs with its password; refused with a password as `--redis-url` " +
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
    doc: "ACL user to authenticate to the sentinels as (the sentinels' own, apart from REDIS_URL's user of the data nodes).",
  },
  redisSentinelPassword: {
    env: 'FSBENCH_REDIS_SENTINEL_PASSWORD',
    flag: '--redis-sentinel-password <password>',
    schema: z.string().min(1).optional(),
    default: '(none)',
    secret: true,
    secretHint: 'a file is the usual way (FSBENCH_REDIS_SENTINEL_PASSWORD_FILE, as compose.sentinel.yaml does)',
    doc: "Password of the sentinels (`requirepass` in sentinel.conf), which may differ from the data nodes'.",
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
  port: {
    env: 'FSBENCH_PORT',
    flag: '--port <n>',
    schema: port.default(8080),
    default: '8080',
    doc: 'Port the coordinator listens on; 0 picks a free one (the log says which).',
  },
  host: {
    env: 'FSBENCH_HOST',
    flag: '--host <addr>',
    schema: z.string().min(1).default('127.0.0.1'),
    default: '127.0.0.1',
    doc: 'Address the coordinator binds to (0.0.0.0 inside a container).',
  },
  token: {
    env: 'FSBENCH_TOKEN',
    flag: '--token <token>',
    // It travels as `Authorization: Bearer <token>`: a space or a non-ASCII character could never match.
    schema: z
      .string()
      .min(16, 'must be at least 16 characters')
      .regex(/^[\x21-\x7e]+$/, 'must be printable ASCII without spaces (it is sent in an HTTP header)')
      .optional(),
    default: '(none: writes only from loopback)',
    doc:
      'Bearer token required by mutating endpoints, and sent by the CLI. Give it in the variable or a file: `--token` itself is refused, since every ' +
      'user of the machine can read a command line.',
    secret: true,
  },
  insecureToken: {
    env: 'FSBENCH_INSECURE_TOKEN',
    flag: '--insecure-token',
    schema: toggle,
    default: '(off)',
    doc:
      'Lets the CLI send FSBENCH_TOKEN over plain `http://` to a coordinator that is not on loopback, where anyone on the network path can read it. ' +
      'Without it the CLI refuses: use `https://` (a TLS proxy in front of the coordinator) or an SSH tunnel to a loopback port.',
  },
  allowedHosts: {
    env: 'FSBENCH_ALLOWED_HOSTS',
    flag: '--allowed-hosts <names>',
    schema: z
      .string()
      .default('')
      .transform((s) => commaList(s).map((h) => h.toLowerCase()))
      .pipe(z.array(z.string().regex(HOST_NAME, 'each must be a host name (letters, digits, dashes and dots), without a port')).max(64)),
    default: '(none: localhost and IP addresses only)',
    doc:
      'Comma-separated host names, besides `localhost` and IP addresses, that a read may name in its Host header: the names clients reach the coordinator by ' +
      '(compose.yaml adds `coordinator`). A read naming another host is refused with 403, so that a web page cannot read the API through a DNS name it ' +
      'points at this machine (DNS rebinding). Not checked with FSBENCH_READ_AUTH=token, nor for requests that carry the token.',
  },
  dataDir: {
    env: 'FSBENCH_DATA_DIR',
    flag: '--data-dir <dir>',
    schema: z.string().min(1).default(path.resolve('data')),
    default: './data',
    doc: "The coordinator's SQLite database directory.",
  },
  jobKey: {
    env: 'FSBENCH_JOB_KEY',
    flag: '--job-key <pem-or-file>',
    schema: z.string().min(1).optional(),
    default: '(none: the agent refuses to start)',
    doc:
      "An agent's copy of the coordinator's public job key: the PEM text itself or the path of a file holding it (the coordinator writes it to " +
      '`job-key.pub.pem` in FSBENCH_DATA_DIR). Agents run only jobs signed with the matching private key and refuse the rest (JOB_UNSIGNED).',
  },
  jobKeyCopy: {
    env: 'FSBENCH_JOB_KEY_COPY',
    flag: '--job-key-copy <file>',
    schema: z.string().startsWith('/', 'must be an absolute path').optional(),
    default: '(none)',
    doc: "A second file the coordinator writes its public job key to at start, for agents to read as FSBENCH_JOB_KEY (compose.yaml: the read-only `job-key` volume).",
  },
  jobTtl: {
    env: 'FSBENCH_JOB_TTL',
    flag: '--job-ttl <duration>',
    schema: duration(60_000, 90 * 86_400_000).default(7 * 86_400_000),
    default: '7d',
    doc:
      'How long a queued run stays valid: its expiry is signed into the job, and an agent refuses to start it later (JOB_EXPIRED; the run is stored as ' +
      'failed with that code). Bounds how long a job copied out of Redis could be replayed.',
  },
  healthFile: {
    env: 'FSBENCH_HEALTH_FILE',
    flag: '--health-file <file>',
    schema: z.string().startsWith('/', 'must be an absolute path').optional(),
    default: '(none)',
    doc:
      'A file the agent rewrites every few seconds while it reaches Redis, and removes when it stops: a container healthcheck reads its age and needs no ' +
      "credential (compose.yaml's agents get no FSBENCH_TOKEN).",
  },
  stateDir: {
    env: 'FSBENCH_STATE_DIR',
    flag: '--state-dir <dir>',
    schema: z.string().startsWith('/', 'must be an absolute path').optional(),
    default: '(FSBENCH_SCRATCH/agent)',
    doc:
      "An agent's own state: its Ed25519 key (`agent-key.pem`, made on first start, mode 0600), which signs its reports and is enrolled once, and what " +
      'jobs it has run (so none runs twice). Agents of one host share it (compose.yaml: the `agent-state` volume); checked like the scratch directory.',
  },
  enrollToken: {
    env: 'FSBENCH_ENROLL_TOKEN',
    flag: '--enroll-token <token>',
    schema: z.string().regex(/^[a-z0-9]{10}\.[A-Za-z0-9_-]{43}$/, 'must be a token as `fsbench agents token` prints it').optional(),
    default: '(none: wait for `fsbench agents approve`)',
    doc:
      'A one-time enrollment token (`fsbench agents token`) the agent presents with its key, enrolling it without an approval. Without one, the agent ' +
      'waits, and says how to approve it.',
    secret: true,
  },
  enrollTokenCopy: {
    env: 'FSBENCH_ENROLL_TOKEN_COPY',
    flag: '--enroll-token-copy <file>',
    schema: z.string().startsWith('/', 'must be an absolute path').optional(),
    default: '(none)',
    doc:
      "On a coordinator: a file it keeps one unused enrollment token in (a new one once it is used), mode 0640, readable by its user and group. On an " +
      'agent: a file it looks for a token in while it waits to be enrolled, if and when the file exists, before FSBENCH_ENROLL_TOKEN. compose.yaml gives ' +
      'both `/enroll/token` on the `enroll` volume (and the agents the coordinator\'s group), so this machine\'s agents enroll themselves.',
  },
  url: {
    env: 'FSBENCH_URL',
    flag: '--url <url>',
    schema: url.default('http://127.0.0.1:8080'),
    default: 'http://127.0.0.1:8080',
    doc: 'Where the CLI finds the coordinator.',
  },
  machine: {
    env: 'FSBENCH_MACHINE',
    flag: '--machine <name>',
    schema: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'must be 1-64 letters, digits, dots, dashes or underscores').optional(),
    default: '(FSBENCH_MACHINE_FILE, else the hostname)',
    doc: "The machine's display name in results and comparisons.",
  },
  machineFile: {
    env: 'FSBENCH_MACHINE_FILE',
    flag: '--machine-file <file>',
    schema: z.string().startsWith('/', 'must be an absolute path').optional(),
    default: '(none: the hostname)',
    doc:
      "For an agent without FSBENCH_MACHINE: a file naming the machine as /etc/hostname does (its first line that is not a comment), such as the host's " +
      "/etc/hostname mounted read-only into the agent's container, so the name outlives the container (whose own hostname is its id). " +
      'compose.yaml and compose.agent.yaml give the host\'s file (FSBENCH_HOSTNAME_FILE on the host, /etc/hostname) as `/run/fsbench-host/hostname`. ' +
      "A file that is missing, empty or names no valid machine (FSBENCH_MACHINE's rules), or that is the container's own hostname, stops the agent.",
  },
  labels: {
    env: 'FSBENCH_LABELS',
    flag: '--labels <a,b>',
    schema: z
      .string()
      .default('')
      .transform((s) => s.split(',').map((l) => l.trim()).filter((l) => l !== ''))
      .pipe(z.array(Label).max(32)),
    default: '(none)',
    doc: "Comma-separated labels a matrix's placement can select.",
  },
  scratch: {
    env: 'FSBENCH_SCRATCH',
    flag: '--scratch <dir>',
    schema: z.string().startsWith('/', 'must be an absolute path').default(defaultScratch),
    default: '/var/lib/fsbench as root, else $XDG_STATE_HOME/fsbench ($HOME/.local/state/fsbench)',
    doc:
      'Where runs create their files, mounts and filesystem images (and, unless FSBENCH_JOURNAL_DIR says otherwise, the journal of host changes). ' +
      'A missing directory is made with mode 0700. `fsbench run` and agents refuse to start (DIRECTORY_UNSAFE) when it or the journal directory, or any ' +
      'directory on their paths, is a symlink, is not owned by root or the user fsbench runs as, or is writable by group or others; the one exception is ' +
      "an ancestor owned by root with the sticky bit, such as /tmp, whose other users cannot rename or remove what they do not own. The directory itself must be the user's own.",
  },
  journalDir: {
    env: 'FSBENCH_JOURNAL_DIR',
    flag: '--journal-dir <dir>',
    schema: z
      .string()
      .startsWith('/', 'must be an absolute path')
      .refine((p) => path.normalize(p) === p && !p.split('/').includes('..'), 'must be a normalised path without ..')
      .optional(),
    default: '(FSBENCH_SCRATCH/journal)',
    doc:
      'The journal of host changes (kernel limits, mounts, run directories), undone after a crash by the next run or agent. ' +
      'Every agent of one host must share it, even when each has its own scratch directory (compose.yaml: the `agent-journal` volume).',
  },
  allowedTargets: {
    env: 'FSBENCH_ALLOWED_TARGETS',
    flag: '--allowed-targets <dirs>',
    schema: z
      .string()
      .default('')
      .transform((s) => s.split(',').map((d) => d.trim()).filter((d) => d !== ''))
      .pipe(
        z
          .array(
            z
              .string()
              .startsWith('/', 'each must be an absolute path')
              .refine((p) => p !== '/' && path.normalize(p) === p && !p.split('/').includes('..'), 'each must be a normalised directory other than / without ..'),
          )
          .max(32),
      ),
    default: '(the scratch directory)',
    doc: "Comma-separated directories a cell's `target` path may lie in (inotify `target`, metadata `target` with `fs: none`); any other is refused with TARGET_NOT_ALLOWED. The scratch directory is always allowed.",
  },
  maxQueuedEvents: {
    env: 'FSBENCH_MAX_QUEUED_EVENTS',
    flag: '--max-queued-events <n>',
    schema: z.coerce.number().int().min(16).max(2 ** 31 - 1).default(1_048_576),
    default: '1048576',
    doc: "Largest `maxQueuedEvents` a run may write to the host-wide /proc/sys/fs/inotify/max_queued_events (each queued event is kernel memory); a cell asking for more is refused with LIMIT_NOT_ALLOWED.",
  },
  maxWatches: {
    env: 'FSBENCH_MAX_WATCHES',
    flag: '--max-watches <n>',
    schema: z.coerce.number().int().min(1).max(2 ** 31 - 1).default(131_072),
    default: '131072',
    doc: 'Most inotify watches one run may add (about 1 KiB of kernel memory each); a cell needing more is refused with LIMIT_NOT_ALLOWED.',
  },
  maxSteal: {
    env: INTERFERENCE_SETTINGS.maxSteal.env,
    flag: '--max-steal <fraction>',
    schema: INTERFERENCE_SETTINGS.maxSteal.schema,
    default: '0.02',
    doc:
      "Share of all CPUs' time the hypervisor may steal during a run (/proc/stat `steal`) before the run is flagged as disturbed (`interference.flagged`) " +
      'and its cell says so in its notes. Set where the run is measured (`fsbench run`, agents), and stored with the run.',
  },
  maxOutsideCpu: {
    env: INTERFERENCE_SETTINGS.maxOutsideCpu.env,
    flag: '--max-outside-cpu <cpus>',
    schema: INTERFERENCE_SETTINGS.maxOutsideCpu.schema,
    default: '0.10',
    doc:
      "CPU other processes of the host may use during a run, in CPUs (0.10 = a tenth of one CPU), before the run is flagged as disturbed (`interference.flagged`). " +
      'Set where the run is measured, and stored with the run.',
  },
  queuePrefix: {
    env: 'FSBENCH_QUEUE_PREFIX',
    flag: '--queue-prefix <prefix>',
    // Braces make the prefix a hash tag: every key of the installation (BullMQ's and fsbench's)
    // then hashes to one slot, which a sharded Redis needs for multi-key commands and scripts.
    // Never ioredis's keyPrefix, which BullMQ's scripts do not see.
    schema: z
      .string()
      .regex(/^(?:[A-Za-z0-9_-]{1,32}|\{[A-Za-z0-9_-]{1,30}\})$/, 'must be 1-32 letters, digits, dashes or underscores, or such a name in braces ({fsbench})')
      .default('fsbench'),
    default: 'fsbench',
    doc:
      'Prefix of every Redis key fsbench uses, so several installations (or tests) can share one Redis. In braces (`{fsbench}`) it is a hash tag: ' +
      'every key of the installation, BullMQ\'s included, hashes to one slot, as a sharded Redis (a Redis Cluster, or a proxy in front of shards) requires for multi-key commands and scripts.',
  },
  hostId: {
    env: 'FSBENCH_HOST_ID',
    flag: '--host-id <id>',
    schema: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, 'must be 1-64 letters, digits, dots, dashes or underscores').optional(),
    default: "(the kernel's boot id)",
    doc:
      'Overrides the host identity of an agent. Only for tests and simulations: agents with different ids on one kernel ' +
      'may measure at the same time, which the boot id exists to prevent.',
  },
  heartbeat: {
    env: 'FSBENCH_HEARTBEAT',
    flag: '--heartbeat <duration>',
    schema: duration(100, 60_000).default(2000),
    default: '2s',
    doc: "How often an agent reports itself; it counts as gone, and its host lock lapses, after 5 missed beats.",
  },
  stallTimeout: {
    env: 'FSBENCH_STALL_TIMEOUT',
    flag: '--stall-timeout <duration>',
    schema: duration(500, 3_600_000).default(30_000),
    default: '30s',
    doc: 'How long a run whose agent died stays claimed before another agent retries it. Twice it (at least 10 s) is how long an idle agent lets runs wait untaken, or Redis stay silent on its open connections, before its watchdog recreates its workers and connections.',
  },
  hostTimeout: {
    env: 'FSBENCH_HOST_TIMEOUT',
    flag: '--host-timeout <duration>',
    schema: duration(1000, 30 * 86_400_000).default(600_000),
    default: '10m',
    doc: 'How long the coordinator waits for a host with no live agent before giving up the runs placed on it (stored as failed), so the matrix finishes.',
  },
  maxAttempts: {
    env: 'FSBENCH_MAX_ATTEMPTS',
    flag: '--max-attempts <n>',
    schema: z.coerce.number().int().min(1).max(20).default(3),
    default: '3',
    doc: 'Attempts at a run whose agent dies or gives it up; then it is stored as failed. A run that fails in the workload is never retried.',
  },
  stopGrace: {
    env: 'FSBENCH_STOP_GRACE',
    flag: '--stop-grace <duration>',
    schema: duration(0, 600_000).default(5000),
    default: '5s',
    doc: "On SIGTERM an agent lets the current run finish for this long, then abandons it (cleaned up, retried elsewhere).",
  },
  readAuth: {
    env: 'FSBENCH_READ_AUTH',
    flag: '--read-auth <mode>',
    schema: z.enum(['open', 'token']).default('open'),
    default: 'open',
    doc: '`open`: anyone who reaches the coordinator may read; `token`: reads need the bearer token too.',
  },
  writeLimit: {
    env: 'FSBENCH_WRITE_LIMIT',
    flag: '--write-limit <n>',
    schema: z.coerce.number().int().min(0).max(1_000_000).default(60),
    default: '60',
    doc:
      'Most writes (submissions, cancellations, uploads) one client address may send the coordinator per minute; more are refused with 429 ' +
      "and `Retry-After`. 0 turns the limit off. Behind a reverse proxy every client shares the proxy's address.",
  },
  maxBody: {
    env: 'FSBENCH_MAX_BODY',
    flag: '--max-body <size>',
    schema: size(1024, 64 * 1024 ** 2).default(1024 ** 2),
    default: '1MiB',
    doc: 'Largest request body the coordinator accepts (413 above).',
  },
  maxRuns: {
    env: 'FSBENCH_MAX_RUNS',
    flag: '--max-runs <n>',
    schema: z.coerce.number().int().min(1).max(10_000_000).default(100_000),
    default: '100000',
    doc: 'Most runs one submitted matrix may ask for, counting every host it fans out to.',
  },
  maxDuration: {
    env: 'FSBENCH_MAX_DURATION',
    flag: '--max-duration <duration>',
    schema: duration(1000, 30 * 86_400_000).default(86_400_000),
    default: '24h',
    doc: "Longest estimated duration of one submitted matrix.",
  },
  maxQueued: {
    env: 'FSBENCH_MAX_QUEUED',
    flag: '--max-queued <n>',
    schema: z.coerce.number().int().min(1).max(100_000_000).default(200_000),
    default: '200000',
    doc: "Most runs waiting in the queues; a submission that would exceed it is refused with 503. Also sizes the queues' event streams, which carry the runs' reports (10 events per run).",
  },
  maxDownloads: {
    env: 'FSBENCH_MAX_DOWNLOADS',
    flag: '--max-downloads <n>',
    schema: z.coerce.number().int().min(1).max(1000).default(8),
    default: '8',
    doc: 'Most downloads answered at once: results requests (`GET /v1/matrices/:id/results`, any format, one page each) and HTML reports (`GET /v1/matrices/:id/report.html`) together; more are refused with 503 and `Retry-After`.',
  },
  maxStreams: {
    env: 'FSBENCH_MAX_STREAMS',
    flag: '--max-streams <n>',
    schema: z.coerce.number().int().min(1).max(100_000).default(256),
    default: '256',
    doc: 'Most progress event streams (`GET /v1/matrices/:id/events`) open at once; more are refused with 503 and `Retry-After`.',
  },
} as const satisfies Record<string, Setting<z.ZodType>>;

type Settings = typeof SETTINGS;
export type SettingName = keyof Settings;
export type SettingsOf<K extends SettingName> = { [P in K]: z.output<Settings[P]['schema']> };

/** Most bytes a secret file may hold: a token, a URL or a PEM key, never a whole disk (`/dev/zero`). */
const MAX_SECRET_FILE_BYTES = 64 * 1024;

/** The flag's name without its argument: `--token`. */
const flagName = (s: Setting<z.ZodType>) => s.flag.split(' ')[0] ?? s.flag;

/** `--token-file`: where a secret setting's flag takes a file instead. */
export const fileFlagOf = (s: Setting<z.ZodType>) => `${flagName(s)}-file`;

/**
 * A secret setting's file, read whole: without its one trailing newline (`echo secret > file`),
 * an error naming the file and why, never what it holds. Any file works (a Docker or Kubernetes
 * secret, `<(pass show ...)`), up to MAX_SECRET_FILE_BYTES.
 */
function readSecretFile(file: string, source: string): string {
  const refuse = (why: string) => new FsbenchError('CONFIG_INVALID', `${source} names ${JSON.stringify(file)}, which ${why}`);
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch (err) {
    throw refuse(`cannot be read (${errnoOf(err)})`);
  }
  const buf = Buffer.alloc(MAX_SECRET_FILE_BYTES + 1);
  let n = 0;
  try {
    let got = -1;
    while (got !== 0 && n < buf.length) {
      got = readSync(fd, buf, n, buf.length - n, null);
      n += got;
    }
  } catch (err) {
    throw refuse(`cannot be read (${errnoOf(err)})`);
  } finally {
    closeSync(fd);
  }
  if (n > MAX_SECRET_FILE_BYTES) throw refuse(`holds more than ${MAX_SECRET_FILE_BYTES / 1024} KiB: not a secret of fsbench's`);
  const text = buf.subarray(0, n).toString('utf8').replace(/\r?\n$/, '');
  if (text === '') throw refuse('is empty');
  return text;
}

/** The code of a failed system call (ENOENT, EACCES, EISDIR): its message would be fine too, but the code is all that helps. */
function errnoOf(err: unknown): string {
  return contractErrnoOf(err) ?? String(err);
}

const unset = (v: string | undefined) => (v === '' ? undefined : v);

/**
 * Where a setting's raw value comes from, first found wins: its flag, its file flag, its
 * environment variable, its `_FILE` variable. A secret given twice at one level (flag and file
 * flag, or variable and `_FILE`) is refused rather than one silently winning; a secret's flag
 * that would show the secret on the command line is refused, naming the alternatives.
 */
function rawSetting(name: string, s: Setting<z.ZodType>, flags: Readonly<Record<string, unknown>>, env: NodeJS.ProcessEnv): { raw: unknown; source: string } {
  const flag = flagName(s);
  const fromFlag = flags[name];
  if (s.secret !== true) {
    return fromFlag !== undefined ? { raw: fromFlag, source: flag } : { raw: unset(env[s.env]), source: s.env };
  }
  const fileFlag = fileFlagOf(s);
  const fileEnv = `${s.env}_FILE`;
  const fromFileFlag = flags[`${name}File`];
  if (fromFlag !== undefined && fromFileFlag !== undefined) throw new FsbenchError('CONFIG_INVALID', `${flag} and ${fileFlag} are both given: use one`);
  if (typeof fromFlag === 'string') {
    const revealed = s.revealedBy ? s.revealedBy(fromFlag) : 'the secret';
    if (revealed !== undefined) {
      throw new FsbenchError(
        'CONFIG_INVALID',
        `${flag} would put ${revealed} on the command line, where every user of this machine can read it (ps, /proc/<pid>/cmdline): ` +
          `use ${fileFlag} <path>, ${fileEnv}=<path> or ${s.env}${s.secretHint === undefined ? '' : `, ${s.secretHint}`}`,
      );
    }
  }
  if (fromFlag !== undefined) return { raw: fromFlag, source: flag };
  if (typeof fromFileFlag === 'string') return { raw: readSecretFile(fromFileFlag, fileFlag), source: `${fileFlag} ${JSON.stringify(fromFileFlag)}` };
  const fromEnv = unset(env[s.env]);
  const fromFileEnv = unset(env[fileEnv]);
  if (fromEnv !== undefined && fromFileEnv !== undefined) throw new FsbenchError('CONFIG_INVALID', `${s.env} and ${fileEnv} are both set: unset one`);
  if (fromFileEnv !== undefined) return { raw: readSecretFile(fromFileEnv, fileEnv), source: `${fileEnv} ${JSON.stringify(fromFileEnv)}` };
  return { raw: fromEnv, source: s.env };
}

/**
 * Reads the named settings: a CLI flag value wins over the environment, which wins over the
 * default; a secret may also come from a file (rawSetting). Throws CONFIG_INVALID naming the
 * variable (or flag, or file) and the reason.
 */
export function loadSettings<K extends SettingName>(
  names: readonly K[],
  flags: Readonly<Record<string, unknown>> = {},
  env: NodeJS.ProcessEnv = process.env,
): SettingsOf<K> {
  const out: Record<string, unknown> = {};
  for (const name of names) {
    const s: Setting<z.ZodType> = SETTINGS[name];
    const { raw, source } = rawSetting(name, s, flags, env);
    const r = s.schema.safeParse(raw);
    if (!r.success) {
      const why = r.error.issues.map((i) => i.message).join('; ');
      // A malformed secret is most often a real one mistyped: the message must not carry it.
      const value = s.secret === true ? '(value not shown: it is secret)' : JSON.stringify(raw);
      throw new FsbenchError('CONFIG_INVALID', `${source} ${value} is invalid: ${why}`);
    }
    out[name] = r.data;
  }
  return out as SettingsOf<K>;
}

/**
 * The command-line options of a setting, for commander: its flag, and for a secret its file
 * flag (`--token-file <path>`), which loadSettings reads as `<name>File`.
 */
export function settingOptions(name: SettingName): { readonly flags: string; readonly description: string }[] {
  const s: Setting<z.ZodType> = SETTINGS[name];
  const main = { flags: s.flag, description: `${s.doc} [${s.env}; default ${s.default}]` };
  if (s.secret !== true) return [main];
  return [main, { flags: `${fileFlagOf(s)} <path>`, description: `a file holding ${s.env}'s value [${s.env}_FILE]` }];
}

/** The settings table as Markdown, for docs/reference.md. */
export function settingsMarkdown(): string {
  const rows = Object.values(SETTINGS).map((s: Setting<z.ZodType>) =>
    s.secret === true
      ? `| \`${s.env}\`, \`${s.env}_FILE\` | \`${s.flag}\`, \`${fileFlagOf(s)} <path>\` | ${s.default} | ${s.doc} |`
      : `| \`${s.env}\` | \`${s.flag}\` | ${s.default} | ${s.doc} |`,
  );
  return ['| variable | flag | default | what it sets |', '|---|---|---|---|', ...rows].join('\n');
}
