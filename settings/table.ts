/**
 * Every process setting, in one table: its environment variable, its CLI flag, its default and
 * its documentation. `fsbench settings --md` prints this table for docs/reference.md. Code handed
 * no value for a setting reads its default here (defaultOf) rather than writing it again.
 */
import path from 'node:path';
import { z } from 'zod';
import { Label } from '../contract/fingerprint.js';
import { INTERFERENCE_SETTINGS } from '../contract/interference.js';
import { commaList, defaultScratch, duration, HOST_NAME, port, size, toggle, url, type Setting } from './kinds.js';
import { REDIS_SETTINGS } from './redis.js';

export const SETTINGS = {
  ...REDIS_SETTINGS,
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
  watchers: {
    env: 'FSBENCH_WATCHERS',
    flag: '--watchers <file>',
    schema: z
      .string()
      .startsWith('/', 'must be an absolute path')
      .refine((p) => path.normalize(p) === p, 'must be a normalised path')
      .optional(),
    default: '(none: no watcher of your own may run)',
    doc:
      "A JSON file listing this host's own watcher programs by name (`{\"watchers\": [{\"name\", \"argv\", \"uid\", \"gid\"}]}`; `{root}` in argv is the watched root): " +
      "a semantics cell names one with `backend: user` and `watcher: NAME`; a job never carries a command line, and a run needing a name not listed is refused with WATCHER_NOT_LISTED before anything starts. Read at start: the file, its " +
      'directories and each program must be root\'s and writable by nobody else, or the agent (or `fsbench run`) does not start; each runs as its uid and gid (65534, nobody, by default; never root).',
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
      'Overrides the host identity of an agent: for tests and simulations, and for a host with a stable name of its own and one agent ' +
      "(deploy/kubernetes/redis-acl sets it to the node's name, which the node's Redis user names and a reboot keeps). " +
      'Agents with different ids on one kernel may measure at the same time, which the boot id exists to prevent.',
  },
  heartbeat: {
    env: 'FSBENCH_HEARTBEAT',
    flag: '--heartbeat <duration>',
    schema: duration(100, 60_000).default(2000),
    default: '2s',
    doc: "How often an agent reports itself; it counts as gone, and its host lock lapses, after 5 missed beats.",
  },
  keyMaxAge: {
    env: 'FSBENCH_KEY_MAX_AGE',
    flag: '--key-max-age <duration>',
    schema: duration(0, 3650 * 86_400_000).default(90 * 86_400_000),
    default: '90d',
    doc:
      "How old an agent's key may grow: an enrolled agent whose key file is older rotates by itself, between runs, as `fsbench agents rotate` asks it to " +
      '(a new key signed over by the old one, which is then revoked). 0: never.',
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
  maxReads: {
    env: 'FSBENCH_MAX_READS',
    flag: '--max-reads <n>',
    schema: z.coerce.number().int().min(1).max(64).default(2),
    default: '2',
    doc:
      'Most comparisons, gates and history reads (`GET /v1/compare`, `/v1/gate`, `/v1/history`) computed at once, each on a worker thread of its own, ' +
      'off the thread that answers `/livez` and stores results; more wait in line (FSBENCH_READ_QUEUE).',
  },
  readQueue: {
    env: 'FSBENCH_READ_QUEUE',
    flag: '--read-queue <n>',
    schema: z.coerce.number().int().min(0).max(10_000).default(32),
    default: '32',
    doc: 'Most comparisons, gates and history reads waiting for their turn beyond FSBENCH_MAX_READS; more are refused with 429 `READS_BUSY` and `Retry-After`.',
  },
  readLimit: {
    env: 'FSBENCH_READ_LIMIT',
    flag: '--read-limit <n>',
    schema: z.coerce.number().int().min(0).max(1_000_000).default(120),
    default: '120',
    doc:
      'Most comparisons, gates and history reads one client address may ask for per minute, counted together; more are refused with 429 `RATE_LIMITED` ' +
      "and `Retry-After`. 0 turns the limit off. Behind a reverse proxy every client shares the proxy's address.",
  },
  maxReadRuns: {
    env: 'FSBENCH_MAX_READ_RUNS',
    flag: '--max-read-runs <n>',
    schema: z.coerce.number().int().min(1).max(100_000_000).default(200_000),
    default: '200000',
    doc:
      'Most stored runs one comparison or gate reads, both sides together (a `history:NAME` baseline counts the runs of its matrices); more is refused ' +
      'with 422 `READ_TOO_LARGE` before the runs are read. The default covers two matrices of the most runs FSBENCH_MAX_RUNS allows by default; a comparison takes about 2 KiB of memory and 20 us per run it reads.',
  },
} as const satisfies Record<string, Setting<z.ZodType>>;

type Settings = typeof SETTINGS;
export type SettingName = keyof Settings;
export type SettingsOf<K extends SettingName> = { [P in K]: z.output<Settings[P]['schema']> };

/**
 * A setting's default, as applies when neither its flag nor its variable is given: for code
 * handed no value (a coordinator embedded by a test, a router built alone), so that the default
 * stays written once, in the table.
 */
export function defaultOf<K extends SettingName>(name: K): SettingsOf<K>[K] {
  const s: Setting<z.ZodType> = SETTINGS[name];
  return s.schema.parse(undefined) as SettingsOf<K>[K];
}
