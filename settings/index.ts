/**
 * Every process setting, in one table: its environment variable, its CLI flag, its default and
 * its documentation. `fsbench settings --md` prints this table for the README. A missing or
 * malformed setting stops the process at start with one line naming it.
 */
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { FsbenchError } from '../contract/errors.js';
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
  /** Its value is a secret: never shown in an error (nor a log), even when it is malformed. */
  readonly secret?: boolean;
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

export const SETTINGS = {
  redisUrl: {
    env: 'REDIS_URL',
    flag: '--redis-url <url>',
    schema: z.url({ protocol: /^rediss?$/ }).default('redis://127.0.0.1:6379'),
    default: 'redis://127.0.0.1:6379',
    // It may carry a password (redis://:secret@host): a malformed one is not shown.
    secret: true,
    doc:
      'Redis that carries the job queues (coordinator and agents): `redis://[USER:PASSWORD@]host:port`, or `rediss://` for TLS, ' +
      "whose certificate is always verified (FSBENCH_REDIS_CA). Never shown in logs with its password.",
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
    doc: 'Private key of FSBENCH_REDIS_CERT (PEM path or text).',
    secret: true,
  },
  redisPasswordFile: {
    env: 'FSBENCH_REDIS_PASSWORD_FILE',
    flag: '--redis-password-file <file>',
    schema: z.string().min(1).optional(),
    default: '(none)',
    doc: "File holding Redis's password, used when REDIS_URL carries none (compose.yaml shares a generated one this way).",
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
    doc: 'Bearer token required by mutating endpoints, and sent by the CLI.',
    secret: true,
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
    default: '(the hostname)',
    doc: "The machine's display name in results and comparisons.",
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
    schema: z.string().startsWith('/', 'must be an absolute path').default(path.join(os.tmpdir(), 'fsbench')),
    default: '$TMPDIR/fsbench (/tmp/fsbench)',
    doc: 'Where runs create their files, mounts and filesystem images (and, unless FSBENCH_JOURNAL_DIR says otherwise, the journal of host changes).',
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
    schema: z.string().regex(/^[A-Za-z0-9_-]{1,32}$/, 'must be 1-32 letters, digits, dashes or underscores').default('fsbench'),
    default: 'fsbench',
    doc: 'Prefix of every Redis key fsbench uses, so several installations (or tests) can share one Redis.',
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
    doc: 'How long a run whose agent died stays claimed before another agent retries it.',
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

/**
 * Reads the named settings: a CLI flag value wins over the environment, which wins over the
 * default. Throws CONFIG_INVALID naming the variable and the reason.
 */
export function loadSettings<K extends SettingName>(
  names: readonly K[],
  flags: Readonly<Record<string, unknown>> = {},
  env: NodeJS.ProcessEnv = process.env,
): SettingsOf<K> {
  const out: Record<string, unknown> = {};
  for (const name of names) {
    const s: Setting<z.ZodType> = SETTINGS[name];
    const fromFlag = flags[name];
    const raw = fromFlag ?? (env[s.env] === '' ? undefined : env[s.env]);
    const r = s.schema.safeParse(raw);
    if (!r.success) {
      const why = r.error.issues.map((i) => i.message).join('; ');
      const source = fromFlag !== undefined ? s.flag.split(' ')[0] : s.env;
      // A malformed secret is most often a real one mistyped: the message must not carry it.
      const value = s.secret === true ? '(value not shown: it is secret)' : JSON.stringify(raw);
      throw new FsbenchError('CONFIG_INVALID', `${source ?? s.env} ${value} is invalid: ${why}`);
    }
    out[name] = r.data;
  }
  return out as SettingsOf<K>;
}

/** The settings table as Markdown, for the README. */
export function settingsMarkdown(): string {
  const rows = Object.values(SETTINGS).map((s: Setting<z.ZodType>) => `| \`${s.env}\` | \`${s.flag}\` | ${s.default} | ${s.doc} |`);
  return ['| variable | flag | default | what it sets |', '|---|---|---|---|', ...rows].join('\n');
}
