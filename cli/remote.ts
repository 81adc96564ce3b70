/**
 * The distributed commands: `coordinator` and `agent` (long-running services), and `submit`,
 * `results`, `agents` (clients of the coordinator's REST API).
 */
import { Command, Option } from 'commander';
import { z } from 'zod';
import { factsLine } from '../compare/machine-facts.js';
import { FsbenchError } from '../contract/errors.js';
import { annotatedMatrixText } from '../contract/matrix-text.js';
import { runsProblem } from '../contract/result.js';
import { formatDuration, formatSize } from '../contract/units.js';
import { AgentStatus } from '../queue/registry.js';
import { AgentKeyView, AuditEntryView } from '../queue/enrollment.js';
import { readMatrixSource } from './matrix-file.js';
import { CLIENT_SETTINGS, clientFromSettings, withSettings, type CoordinatorClient } from './client.js';
import { registerAclCommand } from './redis-acl.js';
import { FORMAT_NAMES } from '../report/export/index.js';
import { formatReadableDuration } from '../report/format.js';
import { loadSettings, type SettingName } from '../settings/index.js';
import type { LogFields } from '../log/index.js';

/**
 * How long after SIGTERM a service may take to stop beyond an agent's grace period: its own
 * waits for Redis are bounded at 5 s (coordinator/server.ts, agent/agent.ts), so this is only
 * reached by something unforeseen.
 */
const STOP_BOUND_MS = 15_000;

/** The client commands' lines; the services log through their structured logger instead. */
const log = (line: string) => {
  process.stderr.write(`${new Date().toISOString()} ${line}\n`);
};

/**
 * A service's log: JSON lines for a log pipeline, readable ones on a terminal. The agent shares
 * it: the module loads pino and nothing else of the coordinator's.
 */
async function serviceLog(name: 'coordinator' | 'agent') {
  const { createLogger } = await import('../log/index.js');
  return createLogger({ name, pretty: process.stderr.isTTY });
}

const AGENT_SETTINGS = [
  'redisUrl', 'redisCa', 'redisCert', 'redisKey', 'redisPasswordFile', 'redisSentinels', 'redisMaster', 'redisSentinelUser', 'redisSentinelPassword', 'redisSentinelTls', 'redisCluster', 'queuePrefix', 'machine', 'labels', 'scratch', 'hostId', 'heartbeat',
  'stallTimeout', 'maxAttempts', 'stopGrace', 'jobKey', 'journalDir', 'allowedTargets', 'maxQueuedEvents', 'maxWatches', 'watchers', 'maxSteal', 'maxOutsideCpu', 'stateDir', 'enrollToken', 'enrollTokenCopy', 'keyMaxAge', 'machineFile',
  'healthFile',
] as const satisfies readonly SettingName[];

/**
 * Resolves once SIGTERM or SIGINT has stopped the service. Its stop waits for Redis only while
 * Redis answers; should anything else hold it (or keep the event loop alive afterwards), the
 * process still ends `boundMs` after the signal, with exit code 1 and a line saying so: a
 * service that ignores SIGTERM only ends with SIGKILL, which skips every clean-up.
 */
function untilSignalled(stop: () => Promise<void>, log: (line: string, fields?: LogFields) => void, boundMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const onSignal = (signal: NodeJS.Signals) => {
      log(`${signal}: stopping`);
      setTimeout(() => {
        log(`still not stopped ${boundMs / 1000} s after ${signal}: exiting anyway`, { event: 'service.stop-overdue', boundMs });
        process.exit(1);
      }, boundMs).unref();
      stop().then(resolve, reject);
    };
    process.once('SIGTERM', onSignal);
    process.once('SIGINT', onSignal);
  });
}

const Progress = z.object({
  state: z.enum(['queued', 'running', 'done', 'cancelled']),
  expectedRuns: z.number(),
  storedRuns: z.number(),
  failedRuns: z.number(),
  skippedRuns: z.number(),
});
type Progress = z.infer<typeof Progress>;

const Submitted = z.object({ id: z.string(), name: z.string(), cells: z.number(), runs: z.number(), estimatedDurationMs: z.number(), warnings: z.array(z.string()).optional() }).loose();

const clock = (ms: number) => {
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
};

/** A progress bar on a terminal; a line per tenth elsewhere (CI logs). */
function progressBar(stream: NodeJS.WriteStream = process.stderr) {
  const start = Date.now();
  let lastTenth = -1;
  let lastLine = '';
  return (p: Progress, final = false) => {
    const fraction = p.expectedRuns === 0 ? 1 : Math.min(1, p.storedRuns / p.expectedRuns);
    const elapsed = Date.now() - start;
    const eta = p.storedRuns > 0 && fraction < 1 ? clock((elapsed / fraction) * (1 - fraction)) : '--:--';
    const width = 30;
    const filled = Math.round(fraction * width);
    const line =
      `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${(fraction * 100).toFixed(0).padStart(3)}% ` +
      `${p.storedRuns}/${p.expectedRuns} runs${p.failedRuns > 0 ? `, ${p.failedRuns} failed` : ''}  ${p.state}  elapsed ${clock(elapsed)}  ETA ${eta}`;
    const counts = line.replace(/ {2}elapsed.*/, '');
    if (stream.isTTY) {
      stream.write(`\r\x1b[2K${line}${final ? '\n' : ''}`);
    } else if ((Math.floor(fraction * 10) !== lastTenth || final) && counts !== lastLine) {
      lastTenth = Math.floor(fraction * 10);
      lastLine = counts;
      stream.write(`${line}\n`);
    }
  };
}

async function waitFor(client: CoordinatorClient, id: string): Promise<Progress> {
  const draw = progressBar();
  let last: Progress | undefined;
  for await (const e of client.events(id)) {
    const p = Progress.safeParse(JSON.parse(e.data));
    if (!p.success) continue;
    last = p.data;
    draw(last, e.event === 'end');
    if (e.event === 'end') return last;
  }
  // Most often the coordinator stopping: the matrix goes on when it is back.
  throw new FsbenchError('UNAVAILABLE', `the coordinator closed the event stream of matrix ${id} before it finished: see \`fsbench results ${id}\``);
}

function age(iso: string): string {
  return formatDuration(Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 100) * 100));
}

/** Prints rows of `table` padded to its columns' widths. */
function columns(table: readonly (readonly string[])[]): (row: readonly string[]) => string {
  const widths = table[0]?.map((_, i) => Math.max(...table.map((r) => (r[i] ?? '').length))) ?? [];
  return (r) => `${r.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ').trimEnd()}\n`;
}

/** `fsbench agents --history`: the audit of enrollment changes, newest first. */
async function printHistory(client: CoordinatorClient, json: boolean): Promise<void> {
  const body = await client.json('GET', '/v1/agents/history');
  if (json) {
    process.stdout.write(`${JSON.stringify(body, null, 2)}\n`);
    return;
  }
  const { changes } = z.object({ changes: z.array(AuditEntryView) }).parse(body);
  if (changes.length === 0) {
    log('no enrollment change recorded yet');
    return;
  }
  const table = [['WHEN', 'ACTION', 'KEY', 'MACHINE', 'HOST', 'WHO', 'DETAIL'], ...changes.map((c) => [c.at, c.action, c.key, c.machine, c.hostId, c.actor, c.detail])];
  for (const r of table) process.stdout.write(columns(table)(r));
}

export function registerRemoteCommands(program: Command): void {
  withSettings(
    program.command('coordinator').description('Run the coordinator: REST API, queues, results database'),
    ['redisUrl', 'redisCa', 'redisCert', 'redisKey', 'redisPasswordFile', 'redisSentinels', 'redisMaster', 'redisSentinelUser', 'redisSentinelPassword', 'redisSentinelTls', 'redisCluster', 'queuePrefix', 'port', 'host', 'token', 'readAuth', 'allowedHosts', 'writeLimit', 'dataDir', 'maxAttempts', 'maxBody', 'maxRuns', 'maxDuration', 'maxQueued', 'hostTimeout', 'maxDownloads', 'maxStreams', 'maxReads', 'readQueue', 'readLimit', 'maxReadRuns', 'jobKeyCopy', 'jobTtl', 'enrollTokenCopy'],
  ).action(async (opts: Record<string, unknown>) => {
    const s = loadSettings(
      ['redisUrl', 'redisCa', 'redisCert', 'redisKey', 'redisPasswordFile', 'redisSentinels', 'redisMaster', 'redisSentinelUser', 'redisSentinelPassword', 'redisSentinelTls', 'redisCluster', 'queuePrefix', 'port', 'host', 'token', 'readAuth', 'allowedHosts', 'writeLimit', 'dataDir', 'maxAttempts', 'maxBody', 'maxRuns', 'maxDuration', 'maxQueued', 'hostTimeout', 'maxDownloads', 'maxStreams', 'maxReads', 'readQueue', 'readLimit', 'maxReadRuns', 'jobKeyCopy', 'jobTtl', 'enrollTokenCopy'],
      opts,
    );
    // Loaded here, not at the top: an agent or a CLI command never loads the coordinator's
    // modules (express, SQLite, metrics), nor a coordinator the agent's (Docker, runners).
    const { startCoordinator } = await import('../coordinator/server.js');
    const logger = await serviceLog('coordinator');
    const c = await startCoordinator(s, logger);
    await untilSignalled(
      () => c.stop(),
      (line, fields) => {
        logger.info(fields ?? {}, line);
      },
      STOP_BOUND_MS,
    );
  });

  withSettings(
    program
      .command('backup')
      .argument('<file>', 'the backup to write: a new file')
      .description("Copy the coordinator's results database to a new file, consistently, while the coordinator runs"),
    ['dataDir'],
  ).action(async (file: string, opts: Record<string, unknown>) => {
    const { dataDir } = loadSettings(['dataDir'], opts);
    const { backupDatabase } = await import('../coordinator/store/index.js');
    const s = await backupDatabase(dataDir, file);
    process.stdout.write(`backed up ${String(s.matrices)} matrices and ${String(s.runs)} runs (${formatSize(s.bytes)}) to ${file}\n`);
  });

  withSettings(
    program
      .command('restore')
      .argument('<file>', 'a backup made by `fsbench backup`')
      .description('Put a backup in place as the results database; the coordinator must be stopped, and the database it replaces is kept beside it'),
    ['dataDir'],
  ).action(async (file: string, opts: Record<string, unknown>) => {
    const { dataDir } = loadSettings(['dataDir'], opts);
    const { restoreDatabase } = await import('../coordinator/store/index.js');
    const s = await restoreDatabase(file, dataDir);
    const kept = s.replaced === null ? '' : `; the database it replaced is kept as ${s.replaced}`;
    process.stdout.write(`restored ${String(s.matrices)} matrices and ${String(s.runs)} runs from ${file} into ${dataDir}${kept}\n`);
  });

  withSettings(
    program.command('agent').description('Run an agent: take runs from the queues and run them on this host'),
    AGENT_SETTINGS,
  ).action(async (opts: Record<string, unknown>) => {
    const s = loadSettings(AGENT_SETTINGS, opts);
    const { startAgent } = await import('../agent/agent.js');
    const logger = await serviceLog('agent');
    const agentLog = (line: string, fields?: LogFields) => {
      logger.info(fields ?? {}, line);
    };
    const a = await startAgent(s, agentLog);
    // An enrollment that cannot succeed (this key bound to another host) stops the agent with its error, rather than idling.
    const failed = a.enrolled.then(
      () => new Promise<never>(() => undefined),
      async (err: unknown) => {
        await a.stop();
        // Stopped by a signal while waiting: that is untilSignalled's to answer.
        if (err instanceof FsbenchError && err.code === 'CANCELLED') return;
        throw err;
      },
    );
    // The run in progress gets its grace period to finish, then to undo what it changed.
    await Promise.race([untilSignalled(() => a.stop(), agentLog, s.stopGrace + STOP_BOUND_MS), failed]);
  });

  withSettings(program.command('submit').description('Submit a matrix file (YAML or JSON) to the coordinator'), CLIENT_SETTINGS)
    .argument('<matrix>', 'matrix file, or example:NAME for a shipped example (fsbench examples)')
    .option('--wait', 'follow the progress until the matrix is done; exits non-zero when runs failed')
    .option('--allow-failures', 'with --wait: exit 0 even when some runs failed; a matrix that measured nothing still fails')
    .option('--annotate <name=value...>', "add to the matrix's annotations (repeatable): commit=4f2a9c1")
    .action(async (file: string, opts: Record<string, unknown>) => {
      const client = clientFromSettings(opts);
      const { text } = await readMatrixSource(file);
      const pairs = z.array(z.string()).catch([]).parse(opts['annotate']);
      // YAML is a superset of JSON, so one content type serves both kinds of file.
      const res = await client.fetch('POST', '/v1/matrices', { body: annotatedMatrixText(text, file, pairs), contentType: 'application/yaml' });
      const m = Submitted.parse(await res.json());
      process.stdout.write(`${m.id}\n`);
      log(`submitted ${m.name} as ${m.id}: ${m.cells} cells, ${m.runs} runs, about ${formatReadableDuration(m.estimatedDurationMs)}`);
      for (const w of m.warnings ?? []) log(`warning: ${w}`);
      if (opts['wait'] !== true) return;
      const final = await waitFor(client, m.id);
      if (final.state === 'cancelled') throw new FsbenchError('CANCELLED', `matrix ${m.id} was cancelled after ${final.storedRuns} runs`);
      log(`done: ${final.storedRuns} runs, ${final.failedRuns} failed, ${final.skippedRuns} skipped; see \`fsbench results ${m.id}\``);
      const counts = { ok: final.storedRuns - final.failedRuns - final.skippedRuns, failed: final.failedRuns, skipped: final.skippedRuns };
      const problem = runsProblem(counts, { allowFailures: opts['allowFailures'] === true });
      if (problem) throw new FsbenchError(problem.code, `matrix ${m.id}: ${problem.message} (\`fsbench results ${m.id}\`)`);
    });

  withSettings(program.command('results').description("Print a matrix's runs and per-cell statistics"), CLIENT_SETTINGS)
    .argument('<id>', 'matrix id')
    .addOption(new Option('--format <format>', 'output format').choices(FORMAT_NAMES).default('md'))
    .addOption(new Option('--table <table>', 'with --format csv: aggregates or raw runs').choices(['cells', 'runs']).default('cells'))
    .action(async (id: string, opts: Record<string, unknown>) => {
      const client = clientFromSettings(opts);
      const q = new URLSearchParams({ format: String(opts['format']), table: String(opts['table']) });
      const text = await client.text(`/v1/matrices/${encodeURIComponent(id)}/results?${q.toString()}`);
      process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
    });

  const agents = withSettings(program.command('agents').description('List the live agents, and the agent keys enrolled, waiting for approval or revoked'), CLIENT_SETTINGS)
    .option('--json', 'print the JSON answer')
    .option('--history', 'list every change to who is enrolled instead (token used, approval, approval taken in, revocation, rotation, rename): when, who, what')
    .action(async (opts: Record<string, unknown>) => {
      if (opts['history'] === true) {
        await printHistory(clientFromSettings(opts), opts['json'] === true);
        return;
      }
      const body = await clientFromSettings(opts).json('GET', '/v1/agents');
      if (opts['json'] === true) {
        process.stdout.write(`${JSON.stringify(body, null, 2)}\n`);
        return;
      }
      const { agents: live, keys, version } = z.object({ version: z.string().optional(), agents: z.array(AgentStatus), keys: z.array(AgentKeyView) }).parse(body);
      const rows = live.map((a) => [
        a.machine,
        a.hostId.slice(0, 8),
        a.labels.join(',') || '-',
        a.fingerprint.fsbench,
        `${age(a.lastHeartbeat)} ago`,
        a.currentRun ? `${a.currentRun.matrixId} ${a.currentRun.cellId}#${a.currentRun.repetition}` : 'idle',
        String(a.runsDone),
      ]);
      const table = [['MACHINE', 'HOST', 'LABELS', 'VERSION', 'HEARTBEAT', 'RUN', 'DONE'], ...rows];
      const [heading] = table;
      if (heading) process.stdout.write(columns(table)(heading));
      // The machine's facts under its row: too long for a column, and what tells two agents' numbers apart.
      live.forEach((a, i) => {
        const r = rows[i];
        if (r) process.stdout.write(`${columns(table)(r)}  ${factsLine(a.fingerprint)}\n`);
      });
      if (live.length === 0) log('no live agent');
      const others = live.filter((a) => version !== undefined && a.fingerprint.fsbench !== version);
      if (others.length > 0) log(`warning: ${String(others.length)} agent(s) run another fsbench version than the coordinator's ${version ?? ''}: ${others.map((a) => `${a.machine} (${a.fingerprint.fsbench})`).join(', ')}`);
      if (keys.length > 0) {
        const state = (k: AgentKeyView) => (k.state === 'enrolled' ? `enrolled (${k.via ?? '?'})` : k.state === 'pending' ? 'PENDING' : 'revoked');
        const keyTable = [['KEY', 'STATE', 'MACHINE', 'HOST', 'SINCE'], ...keys.map((k) => [k.key, state(k), k.machine, k.hostId, k.revokedAt ?? k.enrolledAt ?? k.firstSeen])];
        process.stdout.write('\n');
        for (const r of keyTable) process.stdout.write(columns(keyTable)(r));
        const pending = keys.filter((k) => k.state === 'pending');
        if (pending.length > 0) log(`${pending.length} agent(s) wait for approval: fsbench agents approve <machine, host or key>`);
      }
    });

  withSettings(agents.command('approve').description("Enroll a waiting agent's key, binding it to its host: its signed reports count from then on"), CLIENT_SETTINGS)
    .argument('<agent>', 'the machine name, host id or key fingerprint `fsbench agents` shows for it')
    .action(async (agent: string, _opts: unknown, cmd: Command) => {
      // optsWithGlobals: `agents` has the same options, and commander gives them to it wherever they stand.
      const key = AgentKeyView.parse(await clientFromSettings(cmd.optsWithGlobals()).json('POST', '/v1/agents/approve', { agent }));
      log(`enrolled ${key.key} of ${key.machine} (host ${key.hostId})`);
    });

  withSettings(agents.command('revoke').description('Revoke an agent key for good: its agent stops taking jobs, its reports are dropped, and nothing enrolls that key again'), CLIENT_SETTINGS)
    .argument('<agent>', 'the key fingerprint `fsbench agents` shows, or the machine name or host id of exactly one key')
    .action(async (agent: string, _opts: unknown, cmd: Command) => {
      const key = AgentKeyView.parse(await clientFromSettings(cmd.optsWithGlobals()).json('POST', '/v1/agents/revoke', { agent }));
      log(`revoked ${key.key} of ${key.machine} (host ${key.hostId}): the host enrolls a new key to work again`);
    });

  withSettings(agents.command('rename').description("Rename an enrolled agent's machine: its stored runs and history series move to the new name, and its agent reports under it"), CLIENT_SETTINGS)
    .argument('<agent>', 'the key fingerprint `fsbench agents` shows, or the machine name or host id of exactly one enrolled key')
    .argument('<machine>', 'the new machine name: letters, digits, dots, dashes or underscores, not bound to another enrolled key')
    .action(async (agent: string, machine: string, _opts: unknown, cmd: Command) => {
      const key = AgentKeyView.parse(await clientFromSettings(cmd.optsWithGlobals()).json('POST', '/v1/agents/rename', { agent, machine }));
      log(`${agent} is now machine ${key.machine} (key ${key.key}, host ${key.hostId}): its runs and history are ${key.machine}'s, and its agent reports under that name`);
    });

  withSettings(agents.command('rotate').description('Ask an enrolled agent to rotate its key: it makes a new one when idle, signed over by the old one, which is revoked once the new one is enrolled'), CLIENT_SETTINGS)
    .argument('<agent>', 'the key fingerprint `fsbench agents` shows, or the machine name or host id of exactly one enrolled key')
    .action(async (agent: string, _opts: unknown, cmd: Command) => {
      const key = AgentKeyView.parse(await clientFromSettings(cmd.optsWithGlobals()).json('POST', '/v1/agents/rotate', { agent }));
      log(`asked ${key.key} of ${key.machine} (host ${key.hostId}) to rotate: its agent makes a new key between runs, and \`fsbench agents --history\` lists the rotation`);
    });

  withSettings(agents.command('token').description('Make one-time enrollment tokens: an agent started with one (FSBENCH_ENROLL_TOKEN) enrolls itself'), CLIENT_SETTINGS)
    .option('--count <n>', 'how many (one per agent host)', '1')
    .option('--ttl <duration>', 'how long they stay valid (1m to 30d)', '1h')
    .option('--machine <name>', 'enroll only a key announcing this machine name')
    .option('--host <id>', 'enroll only a key announcing this host id')
    .option('--replace', "enroll a key for a host that has a live one, revoking that one (a reinstalled host); without it such a use is refused")
    .action(async (_opts: unknown, cmd: Command) => {
      const opts: Record<string, unknown> = cmd.optsWithGlobals();
      const count = Number(opts['count']);
      if (!Number.isInteger(count) || count < 1) throw new FsbenchError('CONFIG_INVALID', `--count ${String(opts['count'])} must be a whole number of tokens, at least 1`);
      const bound = z.object({ machine: z.string().optional(), host: z.string().optional(), replace: z.boolean().default(false) }).parse({ machine: opts['machine'], host: opts['host'], replace: opts['replace'] === true });
      const answer = z
        .object({ tokens: z.array(z.string()), expiresAt: z.string() })
        .parse(await clientFromSettings(opts).json('POST', '/v1/agents/tokens', { count, ttl: String(opts['ttl']), ...bound }));
      // The tokens on stdout, one per line, for scripts; what they are on stderr.
      for (const t of answer.tokens) process.stdout.write(`${t}\n`);
      log(`${answer.tokens.length} one-time token(s), valid until ${answer.expiresAt}: give each agent host one as FSBENCH_ENROLL_TOKEN (or FSBENCH_ENROLL_TOKEN_FILE)`);
    });

  registerAclCommand(agents);
}
