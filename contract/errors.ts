/**
 * The one catalog of error codes. Every error fsbench reports, from the CLI, the REST API, an
 * agent or a stored run, carries one of these codes (for scripts, dashboards and the HTTP layer)
 * and a message that tells the user what to change. The catalog gives each code the HTTP status
 * the API answers with and the exit code the CLI ends with, so the three never disagree. Codes
 * and exit codes never change meaning once released: scripts branch on them.
 */

/** What each exit code of the CLI means; scripts may retry on 75 and stop on the others. */
export const EXIT_CODES = {
  0: 'done',
  1: 'a problem on this machine, on the coordinator or in fsbench itself: the message says what',
  2: 'bad input: the command line, a matrix, a file or a request (the message names the field)',
  3: 'cancelled or abandoned: the matrix was cancelled while `fsbench submit --wait` followed it, or a run was given up',
  4: 'refused: the bearer token is missing or wrong (FSBENCH_TOKEN)',
  5: 'not found: no such matrix',
  6: '`fsbench gate` found a regression: the verdict names each cell and metric',
  7: '`fsbench gate` could not judge a cell-metric it gates on (too few runs, too noisy for its limit, or a cell missing from the candidate): nothing regressed that it could see, but it cannot say the rest did not; `--allow-inconclusive` accepts that',
  8: 'some runs failed (`fsbench run`, `fsbench submit --wait`): the others were measured and written; `--allow-failures` accepts that',
  9: 'no run was measured: every run failed or was skipped (`fsbench run`, `fsbench submit --wait`)',
  75: 'temporarily unavailable, try again: queue full, Redis away, coordinator unreachable, no matching agent yet',
  130: 'interrupted by SIGINT or SIGTERM (`fsbench run` keeps and summarises the finished runs)',
} as const;
export type ExitCode = keyof typeof EXIT_CODES;

interface ErrorSpec {
  /** The HTTP status of an API answer with this code. */
  readonly status: number;
  readonly exit: Exclude<ExitCode, 0>;
  /** One line for docs/reference.md's table: what happened, and where to look. */
  readonly doc: string;
}

export const ERRORS = {
  // Bad input: what the user asked for is wrong.
  MATRIX_INVALID: { status: 400, exit: 2, doc: 'the matrix does not follow the schema, or a value is out of range; `issues` name each field' },
  MATRIX_TOO_LARGE: { status: 400, exit: 2, doc: 'the matrix expands to more cells or runs than allowed (FSBENCH_MAX_RUNS on a coordinator)' },
  MATRIX_TOO_LONG: { status: 422, exit: 2, doc: 'the matrix would take longer than FSBENCH_MAX_DURATION: split it or shorten its runs' },
  READ_TOO_LARGE: { status: 422, exit: 2, doc: 'a comparison or gate would read more stored runs than FSBENCH_MAX_READ_RUNS (both sides together): compare smaller matrices or fewer machines, or raise the setting' },
  MATRIX_FILE_UNREADABLE: { status: 400, exit: 2, doc: 'the matrix file cannot be read' },
  CONFIG_INVALID: { status: 400, exit: 2, doc: 'a flag, a setting or an input file is invalid' },
  REDIS_EVICTS: { status: 500, exit: 2, doc: "Redis's maxmemory-policy lets it delete keys when full (anything but noeviction), which would lose queued runs silently: the coordinator does not start until it is noeviction" },
  REDIS_REFUSED: { status: 500, exit: 2, doc: 'Redis refused this process: a missing or wrong password or user (REDIS_URL, FSBENCH_REDIS_PASSWORD_FILE), or a TLS certificate that FSBENCH_REDIS_CA does not verify' },
  BODY_INVALID: { status: 400, exit: 2, doc: 'the request body or query is invalid; `issues` name each field' },
  PAYLOAD_TOO_LARGE: { status: 413, exit: 2, doc: 'the request body is larger than the coordinator accepts (FSBENCH_MAX_BODY)' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, exit: 2, doc: 'the request body has a content type or encoding the endpoint does not take' },
  CONFLICT: { status: 409, exit: 2, doc: 'the matrix is already done or cancelled' },
  // Refused, or not there.
  UNAUTHORIZED: { status: 401, exit: 4, doc: 'the coordinator needs a bearer token and none was sent (FSBENCH_TOKEN)' },
  FORBIDDEN: { status: 403, exit: 4, doc: 'the bearer token is wrong, or a coordinator without a token was written to from elsewhere than loopback' },
  NOT_FOUND: { status: 404, exit: 5, doc: 'no such matrix, or no such route' },
  // Temporarily unavailable: the same request may succeed later.
  NO_MATCHING_AGENTS: { status: 409, exit: 75, doc: 'no live agent matches the placement: start one, or place the matrix on `any`' },
  QUEUE_FULL: { status: 503, exit: 75, doc: 'FSBENCH_MAX_QUEUED runs are waiting already; `Retry-After` says when to try again' },
  UNAVAILABLE: { status: 503, exit: 75, doc: 'Redis or the coordinator does not answer; try again' },
  TOO_DISTURBED: { status: 503, exit: 75, doc: 'every run of a side was flagged for interference and left out (--exclude-flagged, excludeFlagged): nothing to judge; run again when the machine is quieter' },
  RATE_LIMITED: { status: 429, exit: 75, doc: 'this client sent more writes than FSBENCH_WRITE_LIMIT, or more comparisons, gates and history reads than FSBENCH_READ_LIMIT, allows per minute; `Retry-After` says when to try again' },
  READS_BUSY: { status: 429, exit: 75, doc: 'FSBENCH_MAX_READS comparisons, gates and history reads are being computed and FSBENCH_READ_QUEUE more wait for their turn already; `Retry-After` says when to try again' },
  // Runs that did not finish.
  CANCELLED: { status: 499, exit: 3, doc: 'the run or the matrix was cancelled' },
  ABANDONED: { status: 500, exit: 3, doc: 'the run was given up: its agents died or abandoned it FSBENCH_MAX_ATTEMPTS times, or its host had no live agent for FSBENCH_HOST_TIMEOUT' },
  // This machine cannot do what the cell asks for. Reported as failed runs.
  PRIVILEGE_MISSING: { status: 500, exit: 1, doc: 'the run needs root or a capability (writable /proc/sys, CAP_SYS_ADMIN, CAP_SYS_NICE)' },
  MOUNT_FAILED: { status: 500, exit: 1, doc: 'mounting the filesystem under test failed; the message quotes the kernel' },
  TARGET_UNUSABLE: { status: 500, exit: 1, doc: 'the target directory cannot be used, or a program the cell needs is not installed' },
  LIMIT_WRITE_FAILED: { status: 500, exit: 1, doc: 'a kernel limit (fs.inotify.*) could not be set to the value the cell asks for' },
  LIMIT_REACHED: { status: 500, exit: 1, doc: 'a limit of the machine (open files, inotify watches) is too small for the cell' },
  NATIVE_PROBE_MISSING: { status: 500, exit: 1, doc: 'a native program is not built: run `npm install` or `npm run build`' },
  PROBE_FAILED: { status: 500, exit: 1, doc: 'the native probe failed while measuring' },
  PROBE_OUTPUT_INVALID: { status: 500, exit: 1, doc: 'the native probe printed something fsbench does not understand' },
  BACKEND_FAILED: { status: 500, exit: 1, doc: 'the watcher backend under test failed' },
  FS_REFUSED: { status: 500, exit: 1, doc: 'mkfs or the scratch filesystem refused the filesystem the cell asks for' },
  NO_SPACE: { status: 500, exit: 1, doc: 'the scratch directory or the filesystem under test ran out of space' },
  LOOP_UNAVAILABLE: { status: 500, exit: 1, doc: 'no loop device is free, or losetup is missing' },
  WORKLOAD_FAILED: { status: 500, exit: 1, doc: 'the workload failed in a way it has no more precise code for' },
  SANDBOX_UNAVAILABLE: { status: 500, exit: 1, doc: 'no Docker engine answers, so `container.*` cells cannot run' },
  SANDBOX_FAILED: { status: 500, exit: 1, doc: 'the run container failed' },
  TIMEOUT: { status: 504, exit: 1, doc: 'a run took longer than allowed and was stopped' },
  // The agent's host protection (FSBENCH_ALLOWED_TARGETS, FSBENCH_MAX_QUEUED_EVENTS, FSBENCH_MAX_WATCHES): refused before anything ran.
  HOST_TOO_SMALL: { status: 500, exit: 1, doc: 'the cell needs more memory or scratch space than this host has free (tmpfs files against MemAvailable, filesystem images against the scratch filesystem): shrink the cell' },
  TARGET_NOT_ALLOWED: { status: 500, exit: 1, doc: "the cell's `target` directory is outside the roots this host allows (FSBENCH_ALLOWED_TARGETS; by default the scratch directory)" },
  LIMIT_NOT_ALLOWED: { status: 500, exit: 1, doc: 'the cell asks for more inotify queued events or watches than this host allows (FSBENCH_MAX_QUEUED_EVENTS, FSBENCH_MAX_WATCHES)' },
  DIRECTORY_UNSAFE: { status: 500, exit: 1, doc: 'the scratch or journal directory, or a directory on its path, is not owned by root (or this user), is writable by others, or is a symlink, so another local user could steer what fsbench writes and removes: the message names the directory and how to fix it' },
  WATCHER_NOT_LISTED: { status: 500, exit: 1, doc: "the cell names a watcher of the host's operator that this host's list (FSBENCH_WATCHERS) does not hold: nothing was started; its operator adds it there" },
  // Agents.
  HOST_ID_UNREADABLE: { status: 500, exit: 1, doc: 'the agent cannot read the kernel boot id that identifies its host: mount /proc, or set FSBENCH_HOST_ID' },
  JOB_INVALID: { status: 500, exit: 1, doc: 'an agent took a job that is not a run job it understands: run agents and coordinator of one fsbench version' },
  JOB_UNSIGNED: { status: 500, exit: 1, doc: "an agent refused a job without a valid signature of its coordinator's key, running nothing: someone else wrote it to Redis, or FSBENCH_JOB_KEY is not that coordinator's public key" },
  JOB_MISROUTED: { status: 500, exit: 1, doc: "an agent refused a signed job that is not where its coordinator put it (another id, another queue, another host's run), running nothing: a copy written to Redis by someone else" },
  JOB_EXPIRED: { status: 500, exit: 1, doc: 'an agent refused a job past the expiry its coordinator signed into it (FSBENCH_JOB_TTL), running nothing: queued too long, or a saved job replayed' },
  JOB_REPLAYED: { status: 500, exit: 1, doc: 'an agent refused a job that ran on its host already, or that carries repeat or delay options its coordinator never sets, running nothing' },
  JOB_CANCELLED: { status: 500, exit: 1, doc: 'an agent refused a job of a cancelled matrix, running nothing' },
  REGRESSION: { status: 422, exit: 6, doc: 'the gate found a regression: a cell-metric moved its bad way by more than --max-regression, significantly; the output names each' },
  INCONCLUSIVE: { status: 422, exit: 7, doc: 'the gate found no regression but could not judge every cell-metric it gates on: too few runs to reach alpha, runs too noisy to see a change of the limit, or a cell the candidate lacks; the output names each and why (more repetitions, `repetitions: auto`, or --allow-inconclusive)' },
  RUNS_FAILED: { status: 500, exit: 8, doc: 'some runs of the matrix failed (their codes are counted in the message); the others were measured: --allow-failures accepts that' },
  NO_RUN_MEASURED: { status: 500, exit: 9, doc: 'no run of the matrix was measured: every run failed (their codes are counted in the message) or was skipped' },
  DATABASE_IN_USE: { status: 409, exit: 2, doc: 'the results database is open in a running coordinator: stop it before restoring a backup over it' },
  BACKUP_INVALID: { status: 400, exit: 2, doc: "the file is not a sound fsbench results database (not SQLite, failed SQLite's integrity check, or has no fsbench tables): nothing was restored" },
  INTERNAL: { status: 500, exit: 1, doc: "a bug in fsbench, or an answer it does not understand; the coordinator's log has the details" },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERRORS;

/** Every code, for `z.enum`. */
export const ERROR_CODE_LIST = Object.keys(ERRORS) as [ErrorCode, ...ErrorCode[]];

export function isErrorCode(code: unknown): code is ErrorCode {
  // Own keys only: `in` would take `constructor` for a code.
  return typeof code === 'string' && Object.hasOwn(ERRORS, code);
}

export interface Issue {
  readonly path: string;
  readonly message: string;
}

export class FsbenchError extends Error {
  override readonly name = 'FsbenchError';
  constructor(
    readonly code: ErrorCode,
    message: string,
    /** Where in the input the problem is, e.g. `params.bufferBytes[2]`, for HTTP 400 bodies. */
    readonly issues: readonly Issue[] = [],
    /** Headers of the HTTP answer, such as Retry-After or WWW-Authenticate. */
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
  }

  get httpStatus(): number {
    return ERRORS[this.code].status;
  }

  get exitCode(): ExitCode {
    return ERRORS[this.code].exit;
  }
}

/**
 * How the CLI and the agents print an error: the message's first line ends with the code, which
 * scripts grep for; the lines after it (the issues of a matrix, say) follow as they are.
 */
export function errorLine(code: ErrorCode, message: string): string {
  const end = message.indexOf('\n');
  return end < 0 ? `${message} [${code}]` : `${message.slice(0, end)} [${code}]${message.slice(end)}`;
}

/** What was thrown, as a line to log or wrap: an Error's message, anything else as a string. */
export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The code of a failed system call (`ENOENT`, `EEXIST`, `ELOOP`), or undefined for anything else thrown. */
export function errnoOf(err: unknown): string | undefined {
  return err instanceof Error && 'code' in err && typeof err.code === 'string' ? err.code : undefined;
}

/** Turns anything thrown into an FsbenchError, keeping the message of unexpected errors. */
export function toFsbenchError(err: unknown, fallback: ErrorCode = 'INTERNAL'): FsbenchError {
  if (err instanceof FsbenchError) return err;
  return new FsbenchError(fallback, messageOf(err));
}

/** docs/reference.md's table of error codes, generated so that it cannot drift from the catalog. */
export function errorCodesMarkdown(): string {
  const rows = Object.entries(ERRORS).map(([code, e]) => `| \`${code}\` | ${e.status} | ${e.exit} | ${e.doc} |`);
  return ['| code | HTTP status | exit code | meaning |', '|---|---|---|---|', ...rows].join('\n');
}

/** docs/reference.md's table of exit codes. */
export function exitCodesMarkdown(): string {
  const rows = Object.entries(EXIT_CODES).map(([exit, meaning]) => `| ${exit} | ${meaning} |`);
  return ['| exit code | meaning |', '|---|---|', ...rows].join('\n');
}
