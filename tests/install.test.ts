/**
 * fsbench as a user gets it without a checkout: the tarball `npm pack` makes, installed with
 * `npm install -g` into an empty prefix (its dependencies from the npm registry, or npm's cache;
 * the native probes compiled at install), then used from an empty directory:
 * `--version`, the shipped examples by name, a local run, and the installed coordinator serving
 * the API, the dashboard and the CLI's remote commands to an agent of another version, which it
 * names in its log, `/metrics` and `fsbench agents`.
 *
 * The tarball is packed from this checkout's dist/ as `npm test` built it (`--ignore-scripts`:
 * `npm pack` alone runs `prepare`, which compiles the same again).
 *
 * better-sqlite3 installs the way it does for a user online: its install script downloads a
 * prebuilt binary. This machine reaches no GitHub, so the test serves that download itself, as a
 * binary-host mirror (`npm_config_better_sqlite3_binary_host`), made of the binary `npm ci` built
 * for this checkout; the path without a download, compiling from source, is the one `npm ci` took.
 * That saves the two to five minutes of compiling SQLite again, and the test checks the mirror was
 * asked, so it never passes by compiling after all.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createRequire } from 'node:module';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { PACKAGE_ROOT } from '../host/native.js';
import { FSBENCH_VERSION } from '../host/version.js';
import { JOB_KEY_FILE } from '../queue/signing.js';
import { freePort, uniquePrefix } from './fixtures/redis-server.js';
import { useCluster } from './helpers/cluster.js';
import { until } from './helpers/http.js';
import { freshCli, tempDir } from './helpers/local.js';

const exec = promisify(execFile);
const cluster = useCluster('install');
const root = tempDir('fsbench-install-');
const prefix = path.join(root.dir, 'prefix');
const installed = path.join(prefix, 'lib', 'node_modules', 'fsbench');
const empty = path.join(root.dir, 'empty');
/** PATH as a user's shell has it after `npm install -g --prefix`: the prefix's bin first. */
const env = { PATH: `${path.join(prefix, 'bin')}:${process.env['PATH'] ?? ''}`, HOME: root.dir };
let tarball = '';
/** The requests the better-sqlite3 mirror answered, by path. */
const mirrored: string[] = [];
let mirror: Server | undefined;

/**
 * Serves better-sqlite3's prebuilt binary where its installer looks for it on a mirror:
 * `<host>/v<version>/better-sqlite3-v<version>-node-v<abi>-<platform>-<arch>.tar.gz`, the tarball
 * holding `build/Release/better_sqlite3.node`. Returns the host to name in the environment.
 */
async function serveSqlitePrebuild(): Promise<string> {
  const pkgFile = createRequire(import.meta.url).resolve('better-sqlite3/package.json');
  const version = z.object({ version: z.string() }).parse(JSON.parse(readFileSync(pkgFile, 'utf8'))).version;
  const name = `better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;
  const file = path.join(root.dir, name);
  await exec('tar', ['-czf', file, '-C', path.dirname(pkgFile), 'build/Release/better_sqlite3.node']);
  const body = readFileSync(file);
  const port = await freePort();
  mirror = createServer((req, res) => {
    mirrored.push(req.url ?? '');
    if (req.url === `/v${version}/${name}`) res.writeHead(200, { 'content-type': 'application/gzip' }).end(body);
    else res.writeHead(404).end();
  });
  const server = mirror;
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return `http://127.0.0.1:${String(port)}`;
}

/** The installed `fsbench` from the empty directory, as a user types it. */
async function fsbench(args: string[], extra: Record<string, string> = {}) {
  return exec('fsbench', args, { cwd: empty, env: { ...env, ...extra }, maxBuffer: 16 * 1024 * 1024 }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (err: unknown) => {
      const e = z.object({ code: z.number().nullable(), stdout: z.string(), stderr: z.string() }).parse(err);
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    },
  );
}

beforeAll(async () => {
  await freshCli();
  mkdirSync(empty);
  const packed = await exec('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', root.dir], { cwd: PACKAGE_ROOT, maxBuffer: 16 * 1024 * 1024 });
  const [info] = z.array(z.object({ filename: z.string(), files: z.array(z.object({ path: z.string() })) })).parse(JSON.parse(packed.stdout));
  if (!info) throw new Error('npm pack made no tarball');
  tarball = path.join(root.dir, info.filename);
  writeFileSync(path.join(root.dir, 'files.json'), JSON.stringify(info.files.map((f) => f.path)));
  const sqliteHost = await serveSqlitePrebuild();
  // npm's cache is the machine's own, as it is for a user; HOME is the empty one only for fsbench.
  const cache = (await exec('npm', ['config', 'get', 'cache'])).stdout.trim();
  // As the getting-started page says; --prefer-offline takes what npm's cache has.
  await exec('npm', ['install', '-g', '--prefix', prefix, tarball, '--prefer-offline', '--no-audit', '--no-fund', '--allow-scripts=fsbench,better-sqlite3,@parcel/watcher'], {
    cwd: root.dir,
    env: { ...process.env, ...env, npm_config_cache: cache, npm_config_better_sqlite3_binary_host: sqliteHost },
    maxBuffer: 16 * 1024 * 1024,
  });
}, 600_000);

afterAll(() => {
  mirror?.close();
  root.remove();
});

describe('the package from npm pack, installed with npm install -g', () => {
  it('ships the compiled CLI, the native sources, the examples and the docs, and neither tests, benchmarks nor TypeScript', () => {
    const files = z.array(z.string()).parse(JSON.parse(readFileSync(path.join(root.dir, 'files.json'), 'utf8')));
    for (const f of ['dist/cli/fsbench.js', 'dist/dashboard/app.js', 'native/build.mjs', 'native/probe.c', 'examples/inotify-quick.yaml', 'README.md', 'package.json']) expect(files).toContain(f);
    expect(files.filter((f) => /^(tests|bench|dist\/tests|dist\/bench)\//.test(f) || f.endsWith('.ts') || f.endsWith('.map'))).toEqual([]);
    // The native programs were compiled at install, one per source.
    const sources = files.filter((f) => /^native\/[^/]+\.c$/.test(f)).map((f) => path.basename(f, '.c'));
    expect(sources.length).toBeGreaterThan(0);
    expect(readdirSync(path.join(installed, 'native', 'build')).sort()).toEqual(sources.sort());
  });

  it('installs better-sqlite3 from its prebuilt binary, as the mirror served it, without compiling', () => {
    expect(mirrored).toHaveLength(1);
    expect(mirrored[0]).toMatch(/^\/v[\d.]+\/better-sqlite3-v[\d.]+-node-v\d+-linux-\w+\.tar\.gz$/);
    // node-gyp's build leaves its objects beside the binary; a download brings the binary alone.
    expect(readdirSync(path.join(installed, 'node_modules', 'better-sqlite3', 'build', 'Release'))).toEqual(['better_sqlite3.node']);
  });

  it('answers --version with the package version, from any directory', async () => {
    const r = await fsbench(['--version']);
    expect([r.code, r.stdout]).toEqual([0, `${FSBENCH_VERSION}\n`]);
  });

  it('lists the shipped examples and runs one by name from an empty directory', async () => {
    const shipped = readdirSync(path.join(PACKAGE_ROOT, 'examples')).filter((f) => f.endsWith('.yaml'));
    const list = await fsbench(['examples']);
    expect(list.code).toBe(0);
    expect(list.stdout.trimEnd().split('\n').map((l) => l.split(/\s+/)[0])).toEqual(shipped.map((f) => `example:${f.slice(0, -5)}`).sort());
    const paths = await fsbench(['examples', '--paths']);
    for (const p of paths.stdout.trimEnd().split('\n')) expect(p.startsWith(path.join(installed, 'examples') + path.sep)).toBe(true);

    // The quickest example: three backends, three runs each.
    const run = await fsbench(['run', 'example:inotify-quick', '--out', 'quick.jsonl', '--no-progress', '--scratch', path.join(root.dir, 'scratch'), '--format', 'csv']);
    expect(run.code, run.stderr).toBe(0);
    const runs = readFileSync(path.join(empty, 'quick.jsonl'), 'utf8').trimEnd().split('\n').map((l) => z.object({ state: z.string(), fingerprint: z.object({ fsbench: z.string() }).loose() }).loose().parse(JSON.parse(l)));
    expect(runs).toHaveLength(9);
    expect(runs.every((r) => r.state === 'ok' && r.fingerprint.fsbench === FSBENCH_VERSION)).toBe(true);
    const missing = await fsbench(['run', 'example:no-such-example']);
    expect([missing.code, missing.stderr]).toEqual([2, expect.stringMatching(/no example named "no-such-example": .*inotify-quick.* \[MATRIX_FILE_UNREADABLE\]/)]);
  }, 180_000);

  it('runs a coordinator that serves the API and dashboard, and names an agent of another version in its log, /metrics and fsbench agents', async () => {
    // The installed package, as another release: its coordinator is then of another version than this checkout's agent.
    const manifest = path.join(installed, 'package.json');
    const other = `${FSBENCH_VERSION}-other`;
    writeFileSync(manifest, readFileSync(manifest, 'utf8').replace(`"version": "${FSBENCH_VERSION}"`, `"version": "${other}"`));
    expect((await fsbench(['--version'])).stdout).toBe(`${other}\n`);

    const dataDir = path.join(root.dir, 'coordinator');
    mkdirSync(dataDir);
    // The cluster's job key, so that the cluster's agent runs what this coordinator signs.
    await writeFile(path.join(dataDir, JOB_KEY_FILE), cluster.jobPrivateKey, { mode: 0o600 });
    const port = await freePort();
    const queuePrefix = uniquePrefix('install');
    const url = `http://127.0.0.1:${String(port)}`;
    const coordinator = spawn('fsbench', ['coordinator'], {
      cwd: empty,
      env: { ...env, REDIS_URL: cluster.redis().url, FSBENCH_QUEUE_PREFIX: queuePrefix, FSBENCH_PORT: String(port), FSBENCH_HOST: '127.0.0.1', FSBENCH_DATA_DIR: dataDir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let log = '';
    coordinator.stdout.on('data', (d: Buffer) => (log += d.toString()));
    coordinator.stderr.on('data', (d: Buffer) => (log += d.toString()));
    try {
      await until('the installed coordinator to be ready', async () => ((await fetch(`${url}/readyz`).catch(() => null))?.ok === true ? true : undefined), { ms: 30_000, everyMs: 200 });
      expect(await (await fetch(`${url}/healthz`)).json()).toEqual({ ok: true, version: other });
      const page = await fetch(`${url}/`);
      expect([page.status, (await fetch(`${url}/app.js`)).status]).toEqual([200, 200]);

      await cluster.agent(queuePrefix, 'h-install', 'install-machine');
      writeFileSync(path.join(empty, 'noop.yaml'), 'name: installed\nworkload: noop\nrepetitions: 3\nwarmup: 0\nparams:\n  value: [1, 2]\n');
      const submitted = await fsbench(['submit', 'noop.yaml', '--wait', '--url', url]);
      expect(submitted.code, submitted.stderr).toBe(0);
      const id = submitted.stdout.trim();
      const results = await fsbench(['results', id, '--format', 'csv', '--url', url]);
      expect(results.code, results.stderr).toBe(0);
      // Both cells, each a row per metric, labelled by the value that tells them apart.
      for (const label of ['value=1', 'value=2']) expect(results.stdout).toContain(`,noop,${label},`);

      const agents = await fsbench(['agents', '--url', url]);
      expect(agents.code).toBe(0);
      expect(agents.stdout).toMatch(new RegExp(`^install-machine +h-instal +- +${FSBENCH_VERSION.replace(/\./g, '\\.')} `, 'm'));
      expect(agents.stderr).toContain(`warning: 1 agent(s) run another fsbench version than the coordinator's ${other}: install-machine (${FSBENCH_VERSION})`);
      const metrics = await (await fetch(`${url}/metrics`)).text();
      expect(metrics).toMatch(new RegExp(`^fsbench_build_info\\{version="${other.replace(/\./g, '\\.')}",node="${process.version}"\\} 1$`, 'm'));
      expect(metrics).toMatch(/^fsbench_live_agents_other_version 1$/m);
      await until('the coordinator to log the agent of another version', () => Promise.resolve(/"event":"agent\.version-differs"/.test(log) ? true : undefined), { ms: 30_000, everyMs: 200 });
      expect(log).toContain(`runs fsbench ${FSBENCH_VERSION}, this coordinator ${other}: run one version everywhere`);
    } finally {
      coordinator.kill('SIGTERM');
      await new Promise((r) => coordinator.once('exit', r));
    }
  }, 180_000);
});
