/**
 * `docker compose up` as the user runs it: the one image built from docker/Dockerfile, Redis, the
 * coordinator and two agents with different labels; a matrix with placement `all` must come
 * back from both agents through the results endpoint, and sandbox-mode cells on `overlay` and
 * `tmpfs` must run in containers of their own. An agent on a "second machine" runs from
 * compose.agent.yaml alone, copied into an empty directory, against a stack with Redis's TLS
 * port; a recreated agent container stays the same machine. Each stack is torn down (`down -v`)
 * whatever happens, and the image built for these tests is removed after them. The three stacks
 * are projects of their own (networks, volumes, ports) that mostly wait on their containers: they
 * run at the same time (`describe.concurrent`), the tests of each in order (`concurrent: false`).
 * Works with `docker compose` (v2) or Debian's `docker-compose` 1.29.
 *
 * Needs a running Docker engine and the base images (scripts/base-images.sh creates them where
 * no registry is reachable; this test runs it, and it returns at once when they exist).
 */
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, copyFileSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { HistoryPageSchema } from '../contract/history.js';
import { freePort } from './fixtures/redis-server.js';
import { PACKAGE_ROOT } from '../host/native.js';
import { dockerClient, engineReachable } from '../sandbox/engine.js';
import { LABEL_RUN } from '../sandbox/runner.js';
import { until } from './helpers/http.js';
import { expectStoredOnce, sampleProgress, submit } from './helpers/failover.js';
import { CoordinatorClient } from '../cli/client.js';

const exec = promisify(execFile);

/** `docker compose` when the v2 plugin is there, else `docker-compose`, else null. */
function composeCommand(): string[] | null {
  if (spawnSync('docker', ['compose', 'version'], { stdio: 'ignore' }).status === 0) return ['docker', 'compose'];
  if (spawnSync('docker-compose', ['version'], { stdio: 'ignore' }).status === 0) return ['docker-compose'];
  return null;
}

const COMPOSE = composeCommand();
const docker = dockerClient();
// No skipping: without an engine these tests fail and say what to install (`npm test` does it first, in scripts/prepare-host.sh).
if (COMPOSE === null || !(await engineReachable(docker))) {
  throw new Error('the compose tests need a running Docker engine and docker compose (or docker-compose): `npm test` starts one (scripts/prepare-host.sh)');
}
const composeCmd: string[] = COMPOSE;


const VERSION = z.object({ version: z.string() }).parse(JSON.parse(readFileSync(path.join(PACKAGE_ROOT, 'package.json'), 'utf8'))).version;
/** The one image, as compose.yaml names it by default. */
const DEFAULT_IMAGE = `fsbench:${VERSION}`;
/**
 * The image these tests build and run (FSBENCH_IMAGE), a tag of their own: removed afterwards,
 * and never the user's own fsbench:<version>.
 */
const IMAGE = `fsbench-test:${VERSION}-${process.pid}`;
const REVISION = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: PACKAGE_ROOT, encoding: 'utf8' }).trim();

/** Only what compose needs from this process's environment: REDIS_URL and friends of other tests stay out. */
function baseEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const k of ['PATH', 'HOME', 'DOCKER_HOST', 'DOCKER_CONFIG', 'XDG_RUNTIME_DIR']) {
    const v = process.env[k];
    if (v !== undefined) env[k] = v;
  }
  return env;
}

/** This host's name as its /etc/hostname says (hostname(5): the first line that is not a comment). */
const HOST_NAME = readFileSync('/etc/hostname', 'utf8')
  .split('\n')
  .map((l) => l.trim())
  .find((l) => l !== '' && !l.startsWith('#'));

/** The file's services, parsed as much as these tests read them. */
const ServiceShape = z
  .object({
    image: z.string().optional(),
    build: z.unknown().optional(),
    user: z.string().optional(),
    privileged: z.boolean().optional(),
    cap_drop: z.array(z.string()).optional(),
    cap_add: z.array(z.string()).optional(),
    environment: z.record(z.string(), z.string().nullable()).optional(),
    ports: z.array(z.unknown()).optional(),
    volumes: z.array(z.unknown()).optional(),
  })
  .loose();
const ComposeFile = z.object({ services: z.record(z.string(), ServiceShape) }).loose();
const fileOf = (name: string) => ComposeFile.parse(parseYaml(readFileSync(path.join(PACKAGE_ROOT, name), 'utf8'), { merge: true }));
/** `compose config` of `files`, as compose merges and interpolates them. */
function configOf(files: readonly string[], extra: Record<string, string> = {}, cwd = PACKAGE_ROOT) {
  const [cmd = 'docker-compose', ...args] = composeCmd;
  const text = execFileSync(cmd, [...args, ...files.flatMap((f) => ['-f', f]), 'config'], { cwd, env: { ...baseEnv(), ...extra }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  return ComposeFile.parse(parseYaml(text));
}

// The image every stack below runs, built once as `docker compose build` builds it, with the
// revision label; removed once the stacks are gone (docker rmi fails while a container uses it).
beforeAll(async () => {
  await exec('bash', ['scripts/base-images.sh'], { cwd: PACKAGE_ROOT, timeout: 600_000 });
  const [cmd = 'docker-compose', ...pre] = composeCmd;
  await exec(cmd, [...pre, '-p', `fsbench-build-${process.pid}`, '-f', 'compose.yaml', 'build'], {
    cwd: PACKAGE_ROOT,
    env: { ...baseEnv(), FSBENCH_IMAGE: IMAGE, FSBENCH_REVISION: REVISION },
    timeout: 1_200_000,
    maxBuffer: 64 * 1024 * 1024,
  });
}, 1_800_000);

afterAll(async () => {
  await exec('docker', ['image', 'rm', IMAGE], { timeout: 120_000 });
}, 180_000);

describe('the image', () => {
  const Inspect = z.object({ Config: z.object({ User: z.string(), Labels: z.record(z.string(), z.string()) }).loose() }).loose();

  it('is the CLI: `docker run IMAGE --version` says package.json\'s version', async () => {
    const { stdout } = await exec('docker', ['run', '--rm', IMAGE, '--version'], { timeout: 60_000 });
    expect(stdout.trim()).toBe(VERSION);
  }, 90_000);

  it('carries the OCI labels, the revision it was built from among them, and runs as uid 10001 unless told otherwise', async () => {
    const { Config } = Inspect.parse(await docker.getImage(IMAGE).inspect());
    expect(Config.Labels).toMatchObject({
      'org.opencontainers.image.title': 'fsbench',
      'org.opencontainers.image.version': VERSION,
      'org.opencontainers.image.revision': REVISION,
      'org.opencontainers.image.licenses': 'MIT',
    });
    expect(Config.Labels['org.opencontainers.image.source']).toBeDefined();
    expect(Config.Labels['org.opencontainers.image.description']).toMatch(/CLI, coordinator and agent/);
    expect(Config.User).toBe('10001:10001');
  });

  it('refuses to start an agent as anyone but root, saying how to start it', async () => {
    const refused = await exec('docker', ['run', '--rm', IMAGE, 'agent'], { timeout: 60_000 }).then(
      () => null,
      (err: unknown) => err,
    );
    expect(refused).toMatchObject({ code: 2 });
    expect(String(refused instanceof Error && 'stderr' in refused ? refused.stderr : refused)).toContain('fsbench: the agent runs as root');
  }, 90_000);

  it('is named fsbench:<package.json version> by every file that names it, and built with that version only', async () => {
    for (const f of ['compose.yaml', 'compose.agent.yaml']) {
      const { services } = fileOf(f);
      for (const name of ['coordinator', 'agent'].filter((n) => services[n] !== undefined)) {
        expect(services[name]?.image, `${f} ${name}`).toBe(`\${FSBENCH_IMAGE:-${DEFAULT_IMAGE}}`);
      }
    }
    expect(readFileSync(path.join(PACKAGE_ROOT, 'docker/Dockerfile'), 'utf8')).toMatch(new RegExp(`^ARG VERSION=${VERSION.replace(/\./g, '\\.')}$`, 'm'));
    // A label saying another version than the code would mislead: the build stops.
    const wrong = await exec('docker', ['build', '--force-rm', '-q', '-f', 'docker/Dockerfile', '--build-arg', 'VERSION=0.0.0-wrong', '.'], { cwd: PACKAGE_ROOT, timeout: 900_000, maxBuffer: 64 * 1024 * 1024 }).then(
      () => null,
      (err: unknown) => err,
    );
    expect(String(wrong instanceof Error && 'stderr' in wrong ? wrong.stderr : wrong)).toContain(`VERSION 0.0.0-wrong is not package.json version ${VERSION}`);
  }, 960_000);
});

const Agents = z.object({ hosts: z.number(), agents: z.array(z.object({ hostId: z.string(), labels: z.array(z.string()) }).loose()) }).loose();
const Submitted = z.object({ id: z.string() }).loose();
const Detail = z.object({ state: z.string() }).loose();
const Results = z
  .object({
    runs: z.array(
      z
        .object({
          target: z.string(),
          machine: z.string(),
          state: z.enum(['ok', 'failed', 'skipped']),
          params: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])),
          info: z.record(z.string(), z.unknown()).optional(),
          error: z.object({ code: z.string(), message: z.string() }).optional(),
        })
        .loose(),
    ),
  })
  .loose();

describe('compose.yaml', () => {
  it('is a valid compose file', () => {
    const [cmd = 'docker-compose', ...args] = composeCmd;
    execFileSync(cmd, [...args, 'config', '-q'], { cwd: PACKAGE_ROOT, env: baseEnv(), stdio: ['ignore', 'ignore', 'inherit'] });
  });

  it('runs the agent as root with named capabilities, never privileged, and the coordinator as uid 10001 without any', () => {
    const { services } = fileOf('compose.yaml');
    expect(services['agent']?.privileged).toBeUndefined();
    expect(services['agent']?.user).toBe('root');
    expect(services['agent']?.cap_drop).toEqual(['ALL']);
    expect(services['agent']?.cap_add).toEqual(['SYS_ADMIN', 'MKNOD', 'SYS_NICE']);
    expect(services['coordinator']?.user).toBe('10001:10001');
    expect(services['coordinator']?.cap_drop).toEqual(['ALL']);
    expect(services['coordinator']?.cap_add).toBeUndefined();
    // One image, built by either service when it is missing (so neither is ever pulled).
    expect(services['agent']?.build).toEqual(services['coordinator']?.build);
    expect(services['agent']?.image).toBe(services['coordinator']?.image);
  });

  it("gives compose.agent.yaml's agent what compose.yaml's has, and nothing of a checkout", () => {
    const main = fileOf('compose.yaml').services['agent'];
    const { services } = fileOf('compose.agent.yaml');
    expect(Object.keys(services)).toEqual(['agent']);
    const alone = services['agent'];
    for (const k of ['image', 'user', 'command', 'cap_drop', 'cap_add', 'security_opt', 'devices', 'device_cgroup_rules', 'stop_grace_period', 'mem_limit', 'healthcheck', 'restart']) {
      expect(alone?.[k], k).toBeDefined();
      expect(alone?.[k], k).toEqual(main?.[k]);
    }
    expect(main?.command).toEqual(['agent']);
    expect(fileOf('compose.yaml').services['coordinator']?.command).toEqual(['coordinator']);
    // Nothing to build and no path of the checkout (`./docker/...`): the image and the host's hostname file only.
    expect(alone?.build).toBeUndefined();
    expect(JSON.stringify(alone)).not.toMatch(/"\.\.?\//);
  });

  it("names the agents by the host's hostname file, mounted read-only, unless FSBENCH_MACHINE says otherwise", () => {
    for (const f of ['compose.yaml', 'compose.agent.yaml']) {
      const agent = configOf([f], { REDIS_URL: 'rediss://:p@example.invalid:6380', FSBENCH_JOB_KEY: 'pem' }).services['agent'];
      expect(agent?.environment?.['FSBENCH_MACHINE_FILE'], f).toBe('/run/fsbench-host/hostname');
      expect(agent?.volumes, f).toContainEqual(expect.objectContaining({ type: 'bind', source: '/etc/hostname', target: '/run/fsbench-host/hostname', read_only: true }));
      const other = configOf([f], { REDIS_URL: 'rediss://:p@example.invalid:6380', FSBENCH_JOB_KEY: 'pem', FSBENCH_HOSTNAME_FILE: '/etc/machine-name' }).services['agent'];
      expect(other?.volumes, f).toContainEqual(expect.objectContaining({ type: 'bind', source: '/etc/machine-name', target: '/run/fsbench-host/hostname', read_only: true }));
    }
  });

  it('publishes no Redis port on the host, unless compose.redis-publish.yaml asks (on loopback)', () => {
    expect(configOf(['compose.yaml']).services['redis']?.ports).toBeUndefined();
    const published = configOf(['compose.yaml', 'compose.redis-publish.yaml']).services['redis'];
    expect(JSON.stringify(published?.ports)).toMatch(/127\.0\.0\.1.*6379/);
    expect(published?.environment?.['FSBENCH_REDIS_PUBLISH']).toBe('127.0.0.1:6379');
  });

  it('gives the write token to the coordinator only: agents and Redis never see it', () => {
    const [cmd = 'docker-compose', ...args] = composeCmd;
    const Env = z.object({ environment: z.record(z.string(), z.string().nullable()).optional() }).loose();
    const Config = z.object({ services: z.object({ agent: Env, coordinator: Env, redis: Env }).loose() }).loose();
    const env = { ...baseEnv(), FSBENCH_TOKEN: 'a-token-for-the-config-0123' };
    const { services } = Config.parse(parseYaml(execFileSync(cmd, [...args, 'config'], { cwd: PACKAGE_ROOT, env, encoding: 'utf8' })));
    expect(services.coordinator.environment?.['FSBENCH_TOKEN']).toBe(env.FSBENCH_TOKEN);
    for (const s of [services.agent, services.redis]) expect(JSON.stringify(s)).not.toContain(env.FSBENCH_TOKEN);
    expect(services.agent.environment?.['FSBENCH_HEALTH_FILE']).toMatch(/^\//);
  });

  it('refuses to start Redis with its plain port published beyond loopback, password or not, saying to use TLS', async () => {
    // Its own project: nothing but this one container, which never gets as far as listening.
    const [cmd = 'docker-compose', ...pre] = composeCmd;
    const project = ['-p', `fsbench-publish-${process.pid}`, '-f', 'compose.yaml', '-f', 'compose.redis-publish.yaml'];
    const refusal = async (extra: Record<string, string>) => {
      const refused = await exec(cmd, [...pre, ...project, 'run', '--rm', '-T', '--no-deps', 'redis'], {
        cwd: PACKAGE_ROOT,
        env: { ...baseEnv(), FSBENCH_REDIS_PUBLISH: '0.0.0.0:6379', ...extra },
        timeout: 120_000,
      }).then(
        () => null,
        (err: unknown) => err,
      );
      return String(refused instanceof Error && 'stderr' in refused ? refused.stderr : refused);
    };
    try {
      for (const extra of [{}, { REDIS_PASSWORD: randomBytes(16).toString('hex') }] as Record<string, string>[]) {
        const said = await refusal(extra);
        expect(said).toContain("Redis's plain port would be published on 0.0.0.0:6379, beyond this machine");
        expect(said).toContain('compose.redis-tls.yaml');
      }
    } finally {
      await exec(cmd, [...pre, ...project, 'down', '-v', '--remove-orphans'], { cwd: PACKAGE_ROOT, env: baseEnv(), timeout: 120_000 });
    }
  }, 240_000);

  it('gives the agent the Docker socket only with compose.sandbox.yaml', () => {
    const [cmd = 'docker-compose', ...args] = composeCmd;
    const merged = (files: string[]) => execFileSync(cmd, [...args, ...files.flatMap((f) => ['-f', f]), 'config'], { cwd: PACKAGE_ROOT, env: baseEnv(), encoding: 'utf8' });
    expect(merged(['compose.yaml'])).not.toContain('docker.sock');
    expect(merged(['compose.yaml', 'compose.sandbox.yaml'])).toContain('/var/run/docker.sock');
  });

  it('with compose.sentinel.yaml adds a replica and three sentinels, and points coordinator and agents at the sentinels', () => {
    const [cmd = 'docker-compose', ...args] = composeCmd;
    const text = execFileSync(cmd, [...args, '-f', 'compose.yaml', '-f', 'compose.sentinel.yaml', 'config'], { cwd: PACKAGE_ROOT, env: baseEnv(), encoding: 'utf8' });
    const Service = z.object({ environment: z.record(z.string(), z.string().nullable()).optional() }).loose();
    const config = z.object({ services: z.record(z.string(), Service) }).loose().parse(parseYaml(text));
    expect(Object.keys(config.services).sort()).toEqual(['agent', 'coordinator', 'redis', 'redis-replica', 'sentinel-1', 'sentinel-2', 'sentinel-3']);
    for (const name of ['coordinator', 'agent']) {
      const env = config.services[name]?.environment ?? {};
      expect(env['FSBENCH_REDIS_SENTINELS']).toBe('sentinel-1:26379,sentinel-2:26379,sentinel-3:26379');
      expect(env['FSBENCH_REDIS_MASTER']).toBe('fsbench');
      // The sentinels' own client user, its password from a file of its own, never written into the file.
      expect(env['FSBENCH_REDIS_SENTINEL_USER']).toBe('fsbench-client');
      expect(env['FSBENCH_REDIS_SENTINEL_PASSWORD_FILE']).toMatch(/^\/run\/fsbench-redis\/sentinel-client\./);
      expect(env['FSBENCH_REDIS_SENTINEL_PASSWORD_FILE']).not.toBe(env['FSBENCH_REDIS_PASSWORD_FILE']);
    }
  });
});

/**
 * A compose project of `files` as the user brings it up, with a token and ports of its own:
 * `start` sets the environment up, `compose` runs compose on the project, `api` calls the
 * coordinator, `teardown` removes the stack with its volumes.
 */
function composeStack(name: string, files: readonly string[]) {
  const project = `fsbench-${name}-${process.pid}`;
  const token = randomBytes(16).toString('hex');
  let base = '';
  let env: Record<string, string> = {};

  const compose = async (args: readonly string[], extra: Record<string, string> = {}, timeout = 600_000) => {
    const [cmd = 'docker-compose', ...pre] = composeCmd;
    return exec(cmd, [...pre, '-p', project, ...files.flatMap((f) => ['-f', f]), ...args], { cwd: PACKAGE_ROOT, env: { ...env, ...extra }, timeout, maxBuffer: 64 * 1024 * 1024 });
  };

  /** `body`: a matrix as YAML, or `{ json }` for the routes that take JSON. */
  const api = async (method: string, route: string, body?: string | { readonly json: unknown }): Promise<unknown> => {
    const sent = body === undefined ? undefined : typeof body === 'string' ? { type: 'application/yaml', text: body } : { type: 'application/json', text: JSON.stringify(body.json) };
    const res = await fetch(`${base}${route}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(sent === undefined ? {} : { 'content-type': sent.type }) },
      ...(sent === undefined ? {} : { body: sent.text }),
    });
    const json: unknown = await res.json();
    if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };

  return {
    project,
    compose,
    api,
    /** A client of the coordinator, as the CLI makes one (once started). */
    client: () => new CoordinatorClient(base, token),
    /** A free port for the API; `extraEnv`, the stack's own settings. */
    start: async (extraEnv: Record<string, string> = {}): Promise<void> => {
      const ports = { api: await freePort() };
      base = `http://127.0.0.1:${ports.api}`;
      env = { ...baseEnv(), FSBENCH_TOKEN: token, FSBENCH_PUBLISH: `127.0.0.1:${ports.api}`, FSBENCH_IMAGE: IMAGE, ...extraEnv };
    },
    /** Submits a matrix and waits until it is done; returns its stored runs. */
    runMatrix: async (yaml: string) => {
      const { id } = Submitted.parse(await api('POST', '/v1/matrices', yaml));
      await until(`matrix ${id}`, async () => (Detail.parse(await api('GET', `/v1/matrices/${id}`)).state === 'done' ? true : undefined), { ms: 180_000, everyMs: 500, retryErrors: true });
      return Results.parse(await api('GET', `/v1/matrices/${id}/results?format=json`)).runs;
    },
    teardown: async (): Promise<void> => {
      const logs = await compose(['logs', '--no-color', '--tail', '40']).catch(() => null);
      if (logs && process.env['FSBENCH_E2E_LOGS'] === '1') process.stderr.write(logs.stdout);
      await compose(['down', '-v', '--remove-orphans', '--timeout', '20'], {}, 180_000);
    },
    /** The project's containers still there. */
    left: () => docker.listContainers({ all: true, filters: { label: [`com.docker.compose.project=${project}`] } }),
  };
}

describe.concurrent('the stack from compose.yaml, end to end', () => {
  // The sandbox cells below need the opt-in Docker socket.
  const stack = composeStack('e2e', ['compose.yaml', 'compose.sandbox.yaml']);
  const { project, compose, api, runMatrix, teardown } = stack;

  beforeAll(async () => {
    try {
      // The killed replica's run is retried once its claim lapses: after 5 s rather than the
      // default 30 s (compose passes FSBENCH_STALL_TIMEOUT to the agents).
      await stack.start({ FSBENCH_STALL_TIMEOUT: '5s' });
      // Two agents, one scaled service: the second `up` adds a replica with other settings and
      // leaves the first alone. Different host ids let both take part in `placement: all`, and
      // different machine names tell their runs apart (by default both would be this host's name).
      await compose(['up', '-d', '--scale', 'agent=1'], { FSBENCH_LABELS: 'e2e-alpha', FSBENCH_HOST_ID: 'e2e-alpha', FSBENCH_MACHINE: 'e2e-alpha' });
      await compose(['up', '-d', '--scale', 'agent=2', '--no-recreate'], { FSBENCH_LABELS: 'e2e-beta', FSBENCH_HOST_ID: 'e2e-beta', FSBENCH_MACHINE: 'e2e-beta' });
      await until('two live agents', async () => {
        const a = Agents.parse(await api('GET', '/v1/agents'));
        return a.hosts === 2 ? a : undefined;
      }, { ms: 120_000, everyMs: 500, retryErrors: true });
    } catch (err) {
      await teardown().catch(() => undefined);
      throw err;
    }
  }, 1_200_000);

  afterAll(async () => {
    await teardown();
    expect(await stack.left()).toEqual([]);
  }, 240_000);

  it("hands each reader of Redis's password its own copy, mode 0600, and keeps the agents healthy without a token", { concurrent: false, timeout: 180_000 }, async () => {
    const { stdout } = await compose(['exec', '-T', 'redis', 'stat', '-c', '%n %a %u', '/run/fsbench-redis/password', '/run/fsbench-redis/coordinator.password']);
    expect(stdout.trim().split('\n')).toEqual(['/run/fsbench-redis/password 600 0', '/run/fsbench-redis/coordinator.password 600 10001']);
    // The readers are who the copies are for: one image, the coordinator unprivileged, the agents root.
    expect((await compose(['exec', '-T', 'coordinator', 'id', '-u'])).stdout.trim()).toBe('10001');
    expect((await compose(['exec', '-T', '--index=1', 'agent', 'id', '-u'])).stdout.trim()).toBe('0');
    const agents = await docker.listContainers({ filters: { label: [`com.docker.compose.project=${project}`, 'com.docker.compose.service=agent'] } });
    expect(agents.length).toBeGreaterThanOrEqual(2);
    for (const a of agents) {
      const Inspect = z.object({ Config: z.object({ Env: z.array(z.string()) }).loose(), State: z.object({ Health: z.object({ Status: z.string() }).loose() }).loose() }).loose();
      const container = docker.getContainer(a.Id);
      expect(Inspect.parse(await container.inspect()).Config.Env.filter((e) => e.startsWith('FSBENCH_TOKEN'))).toEqual([]);
      // Healthy through the health file alone (the first check runs at the interval, 10 s).
      await until(`agent ${a.Id.slice(0, 12)} healthy`, async () => (Inspect.parse(await container.inspect()).State.Health.Status === 'healthy' ? true : undefined), { ms: 90_000, everyMs: 1000 });
    }
  });

  it('brings up two agents with their labels', { concurrent: false }, async () => {
    const a = Agents.parse(await api('GET', '/v1/agents'));
    expect(a.agents.map((x) => x.labels).sort()).toEqual([['e2e-alpha'], ['e2e-beta']]);
  });

  it('runs a placement-all matrix on both agents and serves every result', { concurrent: false, timeout: 240_000 }, async () => {
    const runs = await runMatrix('name: e2e-all\nworkload: noop\nwarmup: 0\nrepetitions: 2\nparams:\n  value: [1, 2]\nplacement: all\n');
    expect(runs).toHaveLength(8);
    expect(runs.every((r) => r.state === 'ok')).toBe(true);
    expect(new Set(runs.map((r) => r.target))).toEqual(new Set(['e2e-alpha', 'e2e-beta']));
    expect(new Set(runs.map((r) => r.machine)).size).toBe(2);
    // Each simulated host enrolled its own key itself, with the token the coordinator keeps in the enroll volume (rewritten after each use).
    const { keys } = z.object({ keys: z.array(z.object({ hostId: z.string(), state: z.string(), via: z.string().nullable() }).loose()) }).loose().parse(await api('GET', '/v1/agents'));
    expect(keys.map((k) => `${k.hostId} ${k.state} ${k.via ?? ''}`).sort()).toEqual(['e2e-alpha enrolled token', 'e2e-beta enrolled token']);
  });

  it('runs sandbox-mode cells on overlay and tmpfs in containers of their own, and removes them', { concurrent: false, timeout: 240_000 }, async () => {
    const runs = await runMatrix(
      [
        'name: e2e-sandbox',
        'workload: inotify',
        'warmup: 0',
        'repetitions: 1',
        'params:',
        '  container.storage: [overlay, tmpfs]',
        '  duration: 300ms',
        '  files: 16',
        '  writers: 2',
        'placement: { labels: [e2e-alpha] }',
        '',
      ].join('\n'),
    );
    const failures = runs.filter((r) => r.state !== 'ok').map((r) => `${String(r.params['container.storage'])}: ${r.error?.code ?? r.state} ${r.error?.message ?? ''}`);
    expect(failures).toEqual([]);
    expect(runs.map((r) => r.params['container.storage']).sort()).toEqual(['overlay', 'tmpfs']);
    for (const r of runs) expect(r.info?.['sandboxImage']).toMatch(/^[0-9a-f]{12}$/);
    expect(await docker.listContainers({ all: true, filters: { label: [LABEL_RUN] } })).toEqual([]);
  });

  it('undoes the kernel limit of a replica killed mid-run and removed, through the shared journal, before its host runs again', { concurrent: false, timeout: 300_000 }, async () => {
    // A second replica of host e2e-beta, as `--scale` makes it: its own scratch, the one journal volume.
    await compose(['up', '-d', '--scale', 'agent=3', '--no-recreate'], { FSBENCH_LABELS: 'e2e-beta', FSBENCH_HOST_ID: 'e2e-beta', FSBENCH_MACHINE: 'e2e-beta' });
    const Live = z.object({
      agents: z.array(z.object({ hostId: z.string() }).loose()),
    });
    const onBeta = async () => Live.parse(await api('GET', '/v1/agents')).agents.filter((a) => a.hostId === 'e2e-beta');
    await until('two agents on host e2e-beta', async () => ((await onBeta()).length === 2 ? true : undefined), { ms: 120_000, everyMs: 500, retryErrors: true });

    // The agents share this kernel: the limit they change is the one this test reads.
    const SYSCTL = '/proc/sys/fs/inotify/max_queued_events';
    const limit = () => readFileSync(SYSCTL, 'utf8').trim();
    const original = limit();
    const asked = String(Number(original) + 1234);
    const matrix = `name: e2e-kill\nworkload: inotify\nwarmup: 0\nrepetitions: 1\nparams:\n  maxQueuedEvents: ${asked}\n  duration: 8s\n  files: 4\n  writers: 1\nplacement: { labels: [e2e-beta] }\n`;
    const { id } = Submitted.parse(await api('POST', '/v1/matrices', matrix));
    // The replica measuring is the one whose container runs the native probe (heartbeats, which
    // publish an agent's current run, come only every 2 s).
    const agentContainers = () => docker.listContainers({ filters: { label: [`com.docker.compose.project=${project}`, 'com.docker.compose.service=agent'] } });
    // What each look found, a repeated finding once with its count.
    const seen: { at: number; what: string; times: number }[] = [];
    const look = (at: number, what: string) => {
      const last = seen.at(-1);
      if (last?.what === what) last.times += 1;
      else seen.push({ at, what, times: 1 });
    };
    const victim = await until('the run to start on host e2e-beta', async () => {
      // A run that ended before it could be caught says why, with what each look found.
      if (Detail.parse(await api('GET', `/v1/matrices/${id}`)).state === 'done') {
        const { runs } = Results.parse(await api('GET', `/v1/matrices/${id}/results?format=json`));
        throw new Error(`the run ended before it was killed (${runs.map((r) => `${r.state} on ${r.machine} from ${String(r.startedAt)}`).join(', ')}); looks: ${seen.map((x) => `${new Date(x.at).toISOString()} ${x.what} (x${x.times})`).join(' | ')}`);
      }
      const t0 = Date.now();
      const l = limit();
      if (l !== asked) {
        look(t0, `limit ${l}`);
        return undefined;
      }
      const found: string[] = [];
      for (const c of await agentContainers()) {
        const top = z.object({ Processes: z.array(z.array(z.string())).nullish() }).loose().parse(await docker.getContainer(c.Id).top());
        const procs = top.Processes ?? [];
        if (procs.some((p) => p.join(' ').includes('/probe '))) return c;
        found.push(`${c.Id.slice(0, 12)}: ${procs.map((p) => (p.at(-1) ?? '').slice(0, 40)).join('; ')}`);
      }
      look(t0, `no probe in ${found.join(' / ')}`);
      return undefined;
    }, { ms: 60_000, everyMs: 100 });
    const container = docker.getContainer(victim.Id);
    // Killed mid-run: the limit is still the one asked for as the kill goes out.
    expect(limit()).toBe(asked);
    const killedAt = Date.now();
    await container.kill({ signal: 'SIGKILL' });
    await container.remove({ force: true });

    // Undone through the journal by whichever agent sharing it takes its host's lock first once the
    // victim's owner lock is free, which is at its death: the survivor once the dead replica's host
    // lock lapses (5 heartbeats), or e2e-alpha's agent (this kernel, this journal volume) at its
    // next idle look, maybe before the removal above returns. The run itself comes back only after
    // the stall timeout (5 s here), on the survivor.
    await until('the limit restored', () => Promise.resolve(limit() === original ? true : undefined), { ms: 60_000, everyMs: 100 });
    const restoredMs = Date.now() - killedAt;
    const undone = `restored what a dead run left: undid ${SYSCTL} = ${original}`;
    const undoneBy = await until('an agent saying it undid the change', async () => {
      const sayers: string[] = [];
      for (const c of await agentContainers()) {
        const logs = String(await docker.getContainer(c.Id).logs({ stdout: true, stderr: true }));
        if (!logs.includes(undone)) continue;
        const { Config } = z.object({ Config: z.object({ Env: z.array(z.string()) }).loose() }).loose().parse(await docker.getContainer(c.Id).inspect());
        sayers.push(`${c.Id.slice(0, 12)} (${Config.Env.find((e) => e.startsWith('FSBENCH_HOST_ID=')) ?? 'no host id'})`);
      }
      return sayers.length > 0 ? sayers : undefined;
    }, { ms: 10_000, everyMs: 500 });
    expect(undoneBy).not.toEqual([]);
    console.log(`limit restored ${restoredMs} ms after the kill (looked at every 100 ms), undone by ${undoneBy.join(', ')}`);
    expect(Detail.extend({ progress: z.object({ stored: z.number() }).loose() }).parse(await api('GET', `/v1/matrices/${id}`)).progress.stored).toBe(0);

    await until(`matrix ${id}`, async () => (Detail.parse(await api('GET', `/v1/matrices/${id}`)).state === 'done' ? true : undefined), { ms: 180_000, everyMs: 500, retryErrors: true });
    const { runs } = Results.parse(await api('GET', `/v1/matrices/${id}/results?format=json`));
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({ state: 'ok', attempts: 2 });
    // Redone by the other replica of the host, the same machine (named by FSBENCH_MACHINE, never by a container's id).
    expect(runs[0]?.machine).toBe('e2e-beta');
    expect(limit()).toBe(original);
  });
});

/** A CA and a certificate for Redis naming `redis`, the name the second machine's agent reaches it by; in a directory the Redis container's user can read. */
function redisTls(): { dir: string; ca: string } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'fsbench-compose-tls-'));
  const f = (n: string) => path.join(dir, n);
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  execFileSync('openssl', ['req', '-x509', ...ec, '-keyout', f('ca.key'), '-out', f('ca.crt'), '-days', '2', '-subj', '/CN=fsbench compose test CA'], { stdio: 'ignore' });
  execFileSync('openssl', ['req', ...ec, '-keyout', f('redis.key'), '-out', f('redis.csr'), '-subj', '/CN=redis'], { stdio: 'ignore' });
  writeFileSync(f('san.ext'), 'subjectAltName=DNS:redis\n');
  execFileSync('openssl', ['x509', '-req', '-in', f('redis.csr'), '-CA', f('ca.crt'), '-CAkey', f('ca.key'), '-CAcreateserial', '-out', f('redis.crt'), '-days', '2', '-extfile', f('san.ext')], { stdio: 'ignore' });
  // The CA's key is of no use to anyone once the certificate is made.
  rmSync(f('ca.key'));
  chmodSync(dir, 0o755);
  for (const n of readdirSync(dir)) chmodSync(f(n), 0o644);
  return { dir, ca: readFileSync(f('ca.crt'), 'utf8') };
}

const LiveAgents = z.object({
  agents: z.array(z.object({ agentId: z.string(), hostId: z.string(), machine: z.string() }).loose()),
  keys: z.array(z.object({ hostId: z.string(), machine: z.string(), state: z.string(), via: z.string().nullable() }).loose()),
});

describe.concurrent('a second machine from compose.agent.yaml alone, and a machine named across recreated containers', () => {
  // Machine A: the stack with Redis's TLS port, on loopback here (other machines would reach it on
  // the network). Its own agent runs without FSBENCH_MACHINE.
  const stack = composeStack('second', ['compose.yaml', 'compose.redis-tls.yaml']);
  const { compose, api, runMatrix } = stack;
  const password = randomBytes(24).toString('hex');
  const tls = redisTls();
  /** Machine B: an empty directory holding a copy of compose.agent.yaml, and its own project. */
  const second = { dir: mkdtempSync(path.join(os.tmpdir(), 'fsbench-second-machine-')), project: `fsbench-second-agent-${process.pid}` };
  let secondEnv: Record<string, string> = {};
  const onSecond = async (args: readonly string[], timeout = 300_000) => {
    const [cmd = 'docker-compose', ...pre] = composeCmd;
    return exec(cmd, [...pre, '-p', second.project, '-f', 'compose.agent.yaml', ...args], { cwd: second.dir, env: secondEnv, timeout, maxBuffer: 64 * 1024 * 1024 });
  };
  const agentsNow = async () => LiveAgents.parse(await api('GET', '/v1/agents'));

  beforeAll(async () => {
    try {
      await stack.start({ REDIS_PASSWORD: password, FSBENCH_REDIS_TLS_DIR: tls.dir, FSBENCH_REDIS_TLS_PUBLISH: `127.0.0.1:${await freePort()}` });
      await compose(['up', '-d']);
      await until('a live agent', async () => ((await agentsNow()).agents.length === 1 ? true : undefined), { ms: 120_000, everyMs: 500, retryErrors: true });
    } catch (err) {
      await stack.teardown().catch(() => undefined);
      throw err;
    }
  }, 900_000);

  afterAll(async () => {
    if (Object.keys(secondEnv).length > 0) await onSecond(['down', '-v', '--remove-orphans', '--timeout', '20'], 180_000);
    rmSync(second.dir, { recursive: true, force: true });
    rmSync(tls.dir, { recursive: true, force: true });
    await stack.teardown();
    expect(await stack.left()).toEqual([]);
    expect(await docker.listContainers({ all: true, filters: { label: [`com.docker.compose.project=${second.project}`] } })).toEqual([]);
  }, 300_000);

  it("names this machine's agent by the host's /etc/hostname, and keeps the name, its history and its key when the container is recreated", { concurrent: false, timeout: 600_000 }, async () => {
    expect(HOST_NAME).toBeDefined();
    const matrix = 'name: e2e-naming\nworkload: noop\nwarmup: 0\nrepetitions: 3\nparams:\n  value: [1, 2]\n';
    const before = await agentsNow();
    expect(before.agents.map((a) => a.machine)).toEqual([HOST_NAME]);
    const [container] = await docker.listContainers({ filters: { label: [`com.docker.compose.project=${stack.project}`, 'com.docker.compose.service=agent'] } });
    if (container === undefined) throw new Error('no agent container in the project');
    const firstRuns = await runMatrix(matrix);

    await compose(['up', '-d', '--no-deps', '--force-recreate', 'agent']);
    const [recreated] = await docker.listContainers({ filters: { label: [`com.docker.compose.project=${stack.project}`, 'com.docker.compose.service=agent'] } });
    expect(recreated?.Id).toBeDefined();
    expect(recreated?.Id).not.toBe(container.Id);
    const oldAgent = before.agents[0]?.agentId;
    const after = await until('the recreated agent, alone', async () => {
      const a = await agentsNow();
      return a.agents.length === 1 && a.agents[0]?.agentId !== oldAgent ? a : undefined;
    }, { ms: 120_000, everyMs: 500, retryErrors: true });
    const laterRuns = await runMatrix(matrix);

    // One machine: the live agent, the one key (kept in the agent-state volume, enrolled once), every run.
    expect(after.agents.map((a) => a.machine)).toEqual([HOST_NAME]);
    expect(after.keys.map((k) => `${k.machine} ${k.state}`)).toEqual([`${HOST_NAME ?? ''} enrolled`]);
    expect(firstRuns).toHaveLength(6);
    expect(laterRuns).toHaveLength(6);
    expect(new Set([...firstRuns, ...laterRuns].map((r) => `${r.machine} ${r.state}`))).toEqual(new Set([`${HOST_NAME ?? ''} ok`]));
    // One history: a series per cell and metric, on this machine, with a point from each matrix.
    const history = HistoryPageSchema.parse(await api('GET', '/v1/history?name=e2e-naming'));
    expect(history.series.length).toBeGreaterThan(0);
    expect(new Set(history.series.map((x) => x.machine))).toEqual(new Set([HOST_NAME]));
    expect(new Set(history.series.map((x) => x.label))).toEqual(new Set(['value=1', 'value=2']));
    const keys = history.series.map((x) => `${x.metric} ${x.label}`);
    expect(new Set(keys).size).toBe(keys.length);
    for (const x of history.series) expect(x.points, `${x.metric} ${x.label}`).toHaveLength(2);
  });

  it('runs an agent from a copy of compose.agent.yaml in an empty directory, with the image and settings only, under the name it was given', { concurrent: false, timeout: 600_000 }, async () => {
    copyFileSync(path.join(PACKAGE_ROOT, 'compose.agent.yaml'), path.join(second.dir, 'compose.agent.yaml'));
    const { stdout: jobKey } = await compose(['exec', '-T', 'coordinator', 'cat', '/data/job-key.pub.pem']);
    const { tokens } = z.object({ tokens: z.array(z.string()).length(1) }).loose().parse(await api('POST', '/v1/agents/tokens', { json: { count: 1 } }));
    secondEnv = {
      ...baseEnv(),
      FSBENCH_IMAGE: IMAGE,
      // Redis's TLS port with its password, checked against the CA given as PEM text, as on another machine.
      REDIS_URL: `rediss://:${password}@redis:6380`,
      FSBENCH_REDIS_CA: tls.ca,
      FSBENCH_JOB_KEY: jobKey,
      FSBENCH_ENROLL_TOKEN: tokens[0] ?? '',
      FSBENCH_MACHINE: 'e2e-second',
      FSBENCH_LABELS: 'e2e-second',
      // Another host as far as placement goes, though it shares this kernel.
      FSBENCH_HOST_ID: 'e2e-second',
    };
    const config = configOf(['compose.agent.yaml'], secondEnv, second.dir);
    expect(Object.keys(config.services)).toEqual(['agent']);
    expect(config.services['agent']?.build).toBeUndefined();

    // Created, then put on machine A's network (the only way between the two projects here), then started.
    await onSecond(['up', '--no-start']);
    const [created] = await docker.listContainers({ all: true, filters: { label: [`com.docker.compose.project=${second.project}`, 'com.docker.compose.service=agent'] } });
    if (created === undefined) throw new Error('compose.agent.yaml created no agent container');
    const Mounts = z.object({ Mounts: z.array(z.object({ Type: z.string(), Source: z.string(), Destination: z.string() }).loose()) }).loose();
    const binds = Mounts.parse(await docker.getContainer(created.Id).inspect()).Mounts.filter((m) => m.Type === 'bind');
    // Nothing of a checkout: the host's hostname file only.
    expect(binds.map((m) => `${m.Source} ${m.Destination}`)).toEqual(['/etc/hostname /run/fsbench-host/hostname']);
    await docker.getNetwork(`${stack.project}_default`).connect({ Container: created.Id });
    await onSecond(['start']);

    const enrolled = await until('the second machine enrolled and live', async () => {
      const a = await agentsNow();
      const mine = a.agents.find((x) => x.hostId === 'e2e-second');
      return mine !== undefined && a.keys.some((k) => k.hostId === 'e2e-second' && k.state === 'enrolled') ? a : undefined;
    }, { ms: 120_000, everyMs: 500, retryErrors: true });
    expect(enrolled.keys.filter((k) => k.hostId === 'e2e-second').map((k) => `${k.machine} ${k.state} ${k.via ?? ''}`)).toEqual(['e2e-second enrolled token']);

    const runs = await runMatrix('name: e2e-second\nworkload: noop\nwarmup: 0\nrepetitions: 2\nparams:\n  value: [1, 2]\nplacement: all\n');
    expect(runs.every((r) => r.state === 'ok')).toBe(true);
    expect(runs.filter((r) => r.machine === 'e2e-second')).toHaveLength(4);
    expect(runs.filter((r) => r.machine === HOST_NAME)).toHaveLength(4);
    expect(runs).toHaveLength(8);
  });
});

describe.concurrent('the stack with compose.sentinel.yaml, its primary killed mid-matrix', () => {
  const stack = composeStack('sentinel', ['compose.yaml', 'compose.sentinel.yaml']);
  const { compose, api } = stack;
  const RUNS = 200;

  beforeAll(async () => {
    try {
      await stack.start();
      await compose(['up', '-d']);
      await until('a live agent', async () => (Agents.parse(await api('GET', '/v1/agents')).hosts === 1 ? true : undefined), { ms: 120_000, everyMs: 500, retryErrors: true });
    } catch (err) {
      await stack.teardown().catch(() => undefined);
      throw err;
    }
  }, 900_000);

  afterAll(async () => {
    await stack.teardown();
    expect(await stack.left()).toEqual([]);
  }, 240_000);

  /** Where the sentinels say the primary is: a service name. */
  const primary = async () => {
    const { stdout } = await compose(['exec', '-T', 'sentinel-1', 'sh', '-c', 'REDISCLI_AUTH="$(cat /run/fsbench-redis/sentinel.password)" redis-cli -p 26379 sentinel get-master-addr-by-name fsbench']);
    return stdout.split('\n')[0]?.trim() ?? '';
  };

  it('has the sentinels promote the replica, and coordinator and agent carry on: every run stored once', { concurrent: false, timeout: 300_000 }, async () => {
    expect(await primary()).toBe('redis');
    const client = stack.client();
    const id = await submit(client, { name: 'e2e-sentinel', workload: 'noop', repetitions: 1, warmup: 0, params: { value: Array.from({ length: RUNS }, (_, i) => i), sleep: '50ms' } });
    const progress = sampleProgress(client, id, 180_000);
    await until('a fifth of the runs stored', () => Promise.resolve((progress.samples.at(-1)?.stored ?? 0) >= RUNS / 5 ? true : undefined), { ms: 60_000, everyMs: 50 });
    const storedAtKill = progress.samples.at(-1)?.stored ?? 0;
    const [redis] = await docker.listContainers({ filters: { label: [`com.docker.compose.project=${stack.project}`, 'com.docker.compose.service=redis'] } });
    if (redis === undefined) throw new Error('no redis container in the project');
    const killedAt = Date.now();
    await docker.getContainer(redis.Id).kill({ signal: 'SIGKILL' });

    await progress.done;
    expect(progress.state()).toBe('done');
    const { duplicates } = await expectStoredOnce(client, id, RUNS);
    expect(await primary()).toBe('redis-replica');
    // Nothing is stored while no primary answers (for at least down-after, 5 s): what was stored
    // in the second after the kill was on its way before it, and the first sample past that is
    // the recovery.
    const plateau = Math.max(storedAtKill, ...progress.samples.filter((x) => x.t >= killedAt && x.t <= killedAt + 1000).map((x) => x.stored));
    expect(plateau).toBeLessThan(RUNS);
    const resumed = progress.samples.find((x) => x.t > killedAt + 1000 && x.stored > plateau);
    expect(resumed).toBeDefined();
    const { stdout: logs } = await compose(['logs', '--no-color', 'coordinator']);
    expect(logs).toContain('"event":"redis.server-changed"');
    console.log(
      JSON.stringify({
        figure: 'compose-sentinel-failover',
        runs: RUNS,
        storedAtKill,
        storedJustAfterKill: plateau,
        storedAgainAfterMs: (resumed?.t ?? Number.NaN) - killedAt,
        doneAfterMs: (progress.samples.at(-1)?.t ?? Number.NaN) - killedAt,
        duplicates,
        downAfterMs: 5000,
      }),
    );
  });
});
