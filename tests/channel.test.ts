/**
 * The channel between coordinator, agents and Redis when it leaves the machine: a password on
 * Redis, TLS with the server's certificate verified against a CA the operator gives. Real
 * redis-server processes (Debian's build speaks TLS), certificates made with openssl, and the
 * compiled CLI (`node dist/cli/fsbench.js coordinator|agent`) as an operator starts it.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { redisOptions } from '../queue/redis.js';
import { freePort, makeTestCertificates, startRedis, uniquePrefix, type TestCertificates, type TestRedis } from './fixtures/redis-server.js';
import { until } from './helpers/http.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const CLI = path.join(ROOT, 'dist', 'cli', 'fsbench.js');
const PASSWORD = `pw-${Math.random().toString(36).slice(2)}-secret`;
const run = promisify(execFile);
/**
 * Agents refuse to start without a coordinator's public job key (FSBENCH_JOB_KEY). Agents that
 * must stop at Redis get one of no coordinator; the one that runs jobs gets its coordinator's.
 */
const SOME_JOB_KEY = generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }).toString();

interface Proc {
  readonly child: ChildProcess;
  output(): string;
  exited(): Promise<number | null>;
}

const procs: ChildProcess[] = [];
const dirs: string[] = [];

/** The CLI as an operator starts it, with only the environment given here. */
function fsbench(args: readonly string[], env: Record<string, string>): Proc {
  const child = spawn(process.execPath, [CLI, ...args], { env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  procs.push(child);
  let out = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (out += b.toString()));
  const done = new Promise<number | null>((resolve) => child.once('exit', (code) => {
    resolve(code);
  }));
  return { child, output: () => out, exited: () => done };
}

async function tempDir(name: string): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), `fsbench-channel-${name}-`));
  dirs.push(d);
  return d;
}

const Results = z.object({ runs: z.array(z.object({ state: z.string(), target: z.string(), params: z.record(z.string(), z.unknown()) }).loose()) }).loose();

/**
 * A coordinator and an agent as the CLI starts them, on the channel `env` describes, and a noop
 * matrix of 3 cells x 2 repetitions through them; its stored runs and both processes' output.
 */
async function noopMatrixThrough(env: Record<string, string>): Promise<{ runs: z.output<typeof Results>['runs']; logs: string }> {
  const port = await freePort();
  const dataDir = await tempDir('coord');
  const coordinator = fsbench(['coordinator'], { ...env, FSBENCH_PORT: String(port), FSBENCH_DATA_DIR: dataDir });
  const base = `http://127.0.0.1:${port}`;
  await until('the coordinator ready', async () => ((await fetch(`${base}/readyz`)).ok ? true : undefined), { ms: 30_000, everyMs: 100, retryErrors: true });
  const jobKey = path.join(dataDir, 'job-key.pub.pem');
  // Enrolled with a one-time token over the same channel, as an agent on another machine would be.
  const minted = await fetch(`${base}/v1/agents/tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  const [token = ''] = z.object({ tokens: z.array(z.string()) }).loose().parse(await minted.json()).tokens;
  const agent = fsbench(['agent'], {
    ...env,
    FSBENCH_ENROLL_TOKEN: token,
    FSBENCH_HOST_ID: 'channel-host',
    FSBENCH_SCRATCH: await tempDir('agent'),
    FSBENCH_JOB_KEY: existsSync(jobKey) ? jobKey : SOME_JOB_KEY,
  });
  const Agents = z.object({ agents: z.array(z.object({ hostId: z.string() }).loose()) }).loose();
  await until('the agent listed by the coordinator', async () => {
    const a = Agents.parse(await (await fetch(`${base}/v1/agents`)).json());
    return a.agents.some((x) => x.hostId === 'channel-host') ? true : undefined;
  }, { ms: 30_000, everyMs: 100, retryErrors: true });
  const submitted = await fetch(`${base}/v1/matrices`, {
    method: 'POST',
    headers: { 'content-type': 'application/yaml' },
    body: 'name: channel\nworkload: noop\nwarmup: 0\nrepetitions: 2\nparams:\n  value: [1, 2, 3]\n',
  });
  expect(submitted.ok).toBe(true);
  const { id } = z.object({ id: z.string() }).loose().parse(await submitted.json());
  const Detail = z.object({ state: z.string() }).loose();
  await until(`matrix ${id} done`, async () => {
    const d = Detail.parse(await (await fetch(`${base}/v1/matrices/${id}`)).json());
    return d.state === 'done' ? true : undefined;
  }, { ms: 40_000, everyMs: 100, retryErrors: true });
  const { runs } = Results.parse(await (await fetch(`${base}/v1/matrices/${id}/results?format=json`)).json());
  // Both still running: nothing on the channel broke them.
  expect(coordinator.child.exitCode).toBeNull();
  expect(agent.child.exitCode).toBeNull();
  return { runs, logs: coordinator.output() + agent.output() };
}

afterEach(async () => {
  for (const c of procs.splice(0)) {
    if (c.exitCode === null && c.signalCode === null) {
      c.kill('SIGKILL');
      await new Promise((r) => c.once('exit', r));
    }
  }
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

describe('a Redis with a password', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis({ password: PASSWORD });
  });
  afterAll(async () => {
    await redis.stop();
  });

  it('refuses a client that gives no password (NOAUTH), and answers one that does', async () => {
    const bare = await run('redis-cli', ['-h', '127.0.0.1', '-p', String(redis.port), 'ping'], { env: { PATH: process.env['PATH'] ?? '' } });
    expect(bare.stdout).toContain('NOAUTH');
    const authed = await run('redis-cli', ['-h', '127.0.0.1', '-p', String(redis.port), 'ping'], { env: { PATH: process.env['PATH'] ?? '', REDISCLI_AUTH: PASSWORD } });
    expect(authed.stdout.trim()).toBe('PONG');
  });

  it('stops an agent without the password at once, saying REDIS_URL needs it', async () => {
    const agent = fsbench(['agent'], { REDIS_URL: `redis://127.0.0.1:${redis.port}`, FSBENCH_HOST_ID: 'no-password', FSBENCH_JOB_KEY: SOME_JOB_KEY, FSBENCH_SCRATCH: await tempDir('nopw') });
    expect(await agent.exited()).toBe(2);
    expect(agent.output()).toContain('requires a password: put it in REDIS_URL');
    expect(agent.output()).toContain('[REDIS_REFUSED]');
  }, 20_000);

  it('stops a coordinator given a wrong password with a message that shows neither password', async () => {
    const wrong = 'not-the-password-42';
    const coordinator = fsbench(['coordinator'], {
      REDIS_URL: `redis://:${wrong}@127.0.0.1:${redis.port}`,
      FSBENCH_PORT: '0',
      FSBENCH_DATA_DIR: await tempDir('wrongpw'),
    });
    expect(await coordinator.exited()).toBe(2);
    expect(coordinator.output()).toContain('refused the user and password given');
    expect(coordinator.output()).toContain('redis://:redacted@127.0.0.1');
    expect(coordinator.output()).not.toContain(wrong);
    expect(coordinator.output()).not.toContain(PASSWORD);
  }, 20_000);
});

describe('an ACL user limited to the installation prefix', () => {
  const prefix = uniquePrefix('acl');
  const userPassword = `acl-${Math.random().toString(36).slice(2)}-secret`;
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis({
      password: PASSWORD,
      users: [['fsbench', 'on', `>${userPassword}`, `~${prefix}:*`, '+@all', '-@admin', '-flushall', '-flushdb', '-keys']],
    });
  });
  afterAll(async () => {
    await redis.stop();
  });

  it('runs a matrix with the user in REDIS_URL, and that user cannot touch other keys', async () => {
    const url = `redis://fsbench:${userPassword}@127.0.0.1:${redis.port}`;
    const { runs, logs } = await noopMatrixThrough({ REDIS_URL: url, FSBENCH_QUEUE_PREFIX: prefix });
    expect(runs).toHaveLength(6);
    expect(runs.every((r) => r.state === 'ok')).toBe(true);
    expect(logs).not.toContain(userPassword);
    const outside = await run('redis-cli', ['-h', '127.0.0.1', '-p', String(redis.port), '--user', 'fsbench', 'set', 'elsewhere', '1'], {
      env: { PATH: process.env['PATH'] ?? '', REDISCLI_AUTH: userPassword },
    });
    expect(outside.stdout).toContain('NOPERM');
  }, 60_000);
});

describe('TLS with the CA verified', () => {
  let certs: TestCertificates;
  let otherCa: TestCertificates;
  let redis: TestRedis;
  beforeAll(async () => {
    certs = await makeTestCertificates();
    otherCa = await makeTestCertificates('some other CA');
    redis = await startRedis({ password: PASSWORD, tls: certs });
  }, 30_000);
  afterAll(async () => {
    await redis.stop();
    await rm(certs.dir, { recursive: true, force: true });
    await rm(otherCa.dir, { recursive: true, force: true });
  });

  it('runs a matrix through a coordinator and an agent that reach Redis only by rediss://', async () => {
    expect(redis.url).toMatch(/^rediss:\/\/:.+@localhost:\d+$/);
    const { runs, logs } = await noopMatrixThrough({ REDIS_URL: redis.url, FSBENCH_REDIS_CA: certs.caFile, FSBENCH_QUEUE_PREFIX: uniquePrefix('tls') });
    expect(runs).toHaveLength(6);
    expect(runs.every((r) => r.state === 'ok')).toBe(true);
    expect(runs.map((r) => r.params['value']).sort()).toEqual([1, 1, 2, 2, 3, 3]);
    expect(logs).not.toContain(PASSWORD);
  }, 60_000);

  it('stops an agent given the wrong CA at once, naming FSBENCH_REDIS_CA, without the password or a stack', async () => {
    const agent = fsbench(['agent'], { REDIS_URL: redis.url, FSBENCH_REDIS_CA: otherCa.caFile, FSBENCH_HOST_ID: 'wrong-ca', FSBENCH_JOB_KEY: SOME_JOB_KEY, FSBENCH_SCRATCH: await tempDir('wrongca') });
    expect(await agent.exited()).toBe(2);
    const out = agent.output();
    expect(out).toContain(`is not trusted by the CA in FSBENCH_REDIS_CA (${otherCa.caFile})`);
    expect(out).toContain('[REDIS_REFUSED]');
    expect(out).not.toContain(PASSWORD);
    expect(out).not.toMatch(/\n\s+at /);
  }, 20_000);

  it("stops an agent that trusts only the system's CAs, saying FSBENCH_REDIS_CA is not set", async () => {
    const agent = fsbench(['agent'], { REDIS_URL: redis.url, FSBENCH_HOST_ID: 'no-ca', FSBENCH_JOB_KEY: SOME_JOB_KEY, FSBENCH_SCRATCH: await tempDir('noca') });
    expect(await agent.exited()).toBe(2);
    expect(agent.output()).toContain("is not trusted by the system's CAs (FSBENCH_REDIS_CA is not set)");
    expect(agent.output()).not.toContain(PASSWORD);
  }, 20_000);

  it('refuses a CA given for a plain redis:// URL instead of silently connecting without TLS', () => {
    expect(() => redisOptions({ redisUrl: `redis://:${PASSWORD}@localhost:${redis.port}`, redisCa: certs.caFile }, 'test')).toThrow(
      /FSBENCH_REDIS_CA set, but REDIS_URL redis:\/\/:redacted@localhost:\d+ is not TLS: write it as rediss:\/\//,
    );
  });
});
