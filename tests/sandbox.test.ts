/**
 * Sandbox mode against the real Docker engine: one fresh container per run from the agent
 * image, each storage kind, and nothing left behind after success, failure, timeout,
 * cancellation or a crash. Needs a running engine (CI starts one) and builds the agent image
 * from docker/Dockerfile (a cache hit once compose or an earlier run built it).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FsbenchError } from '../contract/errors.js';
import { collectFingerprint } from '../host/fingerprint.js';
import { Journal } from '../host/journal.js';
import { runCell } from '../runner/run-cell.js';
import type { RunContext } from '../workloads/workload.js';
import { PACKAGE_ROOT } from '../host/native.js';
import { dockerClient, engineReachable } from '../sandbox/engine.js';
import { collectDockerFingerprint, DockerFingerprint } from '../sandbox/fingerprint.js';
import { runInside } from '../sandbox/inner.js';
import { SandboxOutput, sandboxedCell, WORK_DIR } from '../sandbox/protocol.js';
import { LABEL_OWNER, LABEL_RUN, SandboxRunner } from '../sandbox/runner.js';
import { cellOf, tempDir } from './helpers/local.js';

// The one image (docker/Dockerfile), under a tag of these tests: the sandbox starts its run containers from it.
const IMAGE = 'fsbench-test:sandbox';
const docker = dockerClient();
// No skipping: without an engine these tests fail and say what to install (`npm test` does it first, in scripts/prepare-host.sh).
if (!(await engineReachable(docker))) throw new Error('the sandbox tests need a running Docker engine: `npm test` starts one (scripts/prepare-host.sh)');

const MAX_QUEUED = '/proc/sys/fs/inotify/max_queued_events';

/** Run containers and volumes of ours still on the engine. */
async function leftovers(): Promise<{ containers: number; volumes: number }> {
  const containers = await docker.listContainers({ all: true, filters: { label: [LABEL_RUN] } });
  const volumes = (await docker.listVolumes({ filters: { label: [LABEL_RUN] } })).Volumes;
  return { containers: containers.length, volumes: volumes.length };
}

const quick = (params: Record<string, unknown> = {}) =>
  cellOf('inotify', { duration: '200ms', files: 16, writers: 2, 'container.storage': 'overlay', ...params });

describe('sandbox protocol', () => {
  it('points the run at the work directory and never recurses', () => {
    const inner = sandboxedCell(quick({ 'container.cpus': 1, 'container.memory': '128MiB' }));
    expect(inner.params['container.storage']).toBe('none');
    expect(inner.params['container.cpus']).toBe(0);
    expect(inner.params['container.memory']).toBe(0);
    expect(inner.params['target']).toBe(WORK_DIR);
    expect(inner.id).toMatch(/^[0-9a-f]{12}$/);
    const xfs = sandboxedCell(cellOf('metadata', { fs: 'xfs', 'container.storage': 'tmpfs' }));
    expect(xfs.params['target']).toBe('scratch');
    const none = sandboxedCell(cellOf('metadata', { fs: 'none', 'container.storage': 'volume' }));
    expect(none.params['target']).toBe(WORK_DIR);
  });

  it('rejects output that is not a SandboxOutput', () => {
    expect(SandboxOutput.safeParse({ ok: true, outcome: { metrics: { a: 'x' }, limits: null, targetFs: null } }).success).toBe(false);
    expect(SandboxOutput.safeParse({ ok: false, error: { code: 'NOPE', message: '' } }).success).toBe(false);
    expect(SandboxOutput.safeParse({ ok: false, error: { code: 'TIMEOUT', message: 'slow' } }).success).toBe(true);
  });

  it('run-cell refuses a cell that asks for another sandbox', async () => {
    const scratch = tempDir('fsbench-inner-');
    try {
      const out = await runInside(JSON.stringify(quick()), {
        scratchDir: path.join(scratch.dir, 'work'),
        journalDir: path.join(scratch.dir, 'journal'),
        signal: new AbortController().signal,
        log: () => undefined,
      });
      expect(out).toMatchObject({ ok: false, error: { code: 'SANDBOX_FAILED' } });
      expect(await runInside('{', { scratchDir: scratch.dir, journalDir: scratch.dir, signal: new AbortController().signal, log: () => undefined })).toMatchObject({
        ok: false,
      });
    } finally {
      scratch.remove();
    }
  });
});

describe('sandbox runner (Docker engine)', () => {
  const scratch = tempDir('fsbench-sandbox-');
  let journal: Journal;
  let sandbox: SandboxRunner;
  const ctx = (signal = new AbortController().signal): RunContext => ({
    scratchDir: scratch.dir,
    journal,
    signal,
    log: () => undefined,
  });

  beforeAll(async () => {
    execFileSync('docker', ['build', '-q', '-f', 'docker/Dockerfile', '-t', IMAGE, '.'], {
      cwd: PACKAGE_ROOT,
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    journal = await Journal.open(path.join(scratch.dir, 'journal'));
    sandbox = await SandboxRunner.connect({ docker, image: IMAGE });
  }, 900_000);

  afterAll(() => {
    scratch.remove();
  });

  it('records the engine in the fingerprint', async () => {
    const f = await collectDockerFingerprint(docker);
    expect(f.engineVersion).toMatch(/^\d+\.\d+/);
    expect(f.storageDriver).not.toBe('');
    expect(['1', '2', null]).toContain(f.cgroupVersion);
    // These tests run on the host, not in a container.
    expect(f.self).toBeNull();
  });

  it('reads its own container limits when the agent runs in a container', () => {
    const script =
      "import { dockerFingerprintIfAny } from '/app/dist/sandbox/fingerprint.js'; process.stdout.write(JSON.stringify(await dockerFingerprintIfAny()));";
    const out = execFileSync(
      'docker',
      // Root, as an agent runs: the Docker socket is root's.
      ['run', '--rm', '--user', '0', '--cpus', '1.5', '--memory', '256m', '-v', '/var/run/docker.sock:/var/run/docker.sock', '--entrypoint', 'node', IMAGE, '--input-type=module', '-e', script],
      { encoding: 'utf8' },
    );
    const f = DockerFingerprint.parse(JSON.parse(out));
    expect(f.self).toMatchObject({ image: IMAGE, cpuLimit: 1.5, memoryLimitBytes: 256 * 1024 ** 2, cpuset: null });
    expect(f.self?.containerId).toMatch(/^[0-9a-f]{64}$/);
  }, 60_000);

  it('fails with the engine\'s reason when the container cannot be made, leaving nothing', async () => {
    const err = await sandbox.run(quick({ 'container.cpus': 1024, 'container.storage': 'volume' }), ctx()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FsbenchError);
    expect((err as FsbenchError).code).toBe('SANDBOX_FAILED');
    expect((err as FsbenchError).message).toMatch(/CPU/i);
    expect(await leftovers()).toEqual({ containers: 0, volumes: 0 });
    expect(readdirSync(path.join(scratch.dir, 'sandbox'))).toEqual([]);
  }, 60_000);

  it.each([
    ['overlay', 'overlay'],
    ['tmpfs', 'tmpfs'],
    ['volume', null],
    ['bind', null],
  ] as const)('runs a cell on %s storage and removes everything afterwards', async (storage, fs) => {
    const outcome = await sandbox.run(quick({ 'container.storage': storage }), ctx());
    expect(outcome.metrics['events']).toBeGreaterThan(0);
    expect(outcome.info?.['sandboxImage']).toMatch(/^[0-9a-f]{12}$/);
    if (fs !== null) expect(outcome.targetFs).toBe(fs);
    else expect(outcome.targetFs).not.toMatch(/overlay|tmpfs/);
    expect(await leftovers()).toEqual({ containers: 0, volumes: 0 });
    expect(readdirSync(path.join(scratch.dir, 'sandbox'))).toEqual([]);
  }, 120_000);

  it('gives runCell a RunResult with the container parameters and limits', async () => {
    const fingerprint = await collectFingerprint();
    const run = await runCell(
      { matrix: 't', cell: quick({ 'container.cpus': 1, 'container.memory': '256MiB' }), repetition: 0, fingerprint },
      { ...ctx(), sandbox },
    );
    expect(run.state).toBe('ok');
    expect(run.params['container.storage']).toBe('overlay');
    expect(run.fingerprint.targetFs).toBe('overlay');
  }, 120_000);

  it('reports what failed inside the container with its own code', async () => {
    // Outside a container the run gets SYS_ADMIN only, so a negative nice value is refused.
    const err = await sandbox.run(quick({ readerNice: -5 }), ctx()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FsbenchError);
    expect((err as FsbenchError).code).toBe('PRIVILEGE_MISSING');
    expect(await leftovers()).toEqual({ containers: 0, volumes: 0 });
  }, 120_000);

  it('stops and removes a container that outlives its timeout', async () => {
    const slow = await SandboxRunner.connect({ docker, image: IMAGE, timeoutMs: 2_000, stopGraceSeconds: 2 });
    const started = Date.now();
    const err = await slow.run(quick({ duration: '30s', 'container.storage': 'volume' }), ctx()).catch((e: unknown) => e);
    expect((err as FsbenchError).code).toBe('TIMEOUT');
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(await leftovers()).toEqual({ containers: 0, volumes: 0 });
  }, 60_000);

  it('stops and removes the container when the run is cancelled', async () => {
    const controller = new AbortController();
    setTimeout(() => {
      controller.abort();
    }, 1500);
    const err = await sandbox.run(quick({ duration: '30s', 'container.storage': 'bind' }), ctx(controller.signal)).catch((e: unknown) => e);
    expect((err as FsbenchError).code).toBe('CANCELLED');
    expect(await leftovers()).toEqual({ containers: 0, volumes: 0 });
    expect(readdirSync(path.join(scratch.dir, 'sandbox'))).toEqual([]);
  }, 60_000);

  it('sweeps what a dead agent left: containers, volumes, and the kernel limits its run changed', async () => {
    const original = readFileSync(MAX_QUEUED, 'utf8');
    const gone = `container:${'0'.repeat(64)}`;
    const labels = { [LABEL_RUN]: 'deadbeef0000', [LABEL_OWNER]: gone };
    await docker.createVolume({ Name: 'fsbench-sandbox-deadbeef0000', Labels: labels });
    const c = await docker.createContainer({ Image: IMAGE, Cmd: ['--help'], Labels: labels, HostConfig: { NetworkMode: 'none' } });
    // A run container killed after it changed a limit: its journal entry is all that is left.
    const runJournal = path.join(scratch.dir, 'sandbox', 'deadbeef0000', 'journal');
    const j = await Journal.open(runJournal);
    await j.record({ kind: 'sysctl', path: MAX_QUEUED, original });
    // The container's run-cell is gone: its owner lock with it (a live one's entries are never undone).
    await j.close();
    try {
      writeFileSync(MAX_QUEUED, '12345');
      const fresh = await SandboxRunner.connect({ docker, image: IMAGE });
      const lines = await fresh.recover(scratch.dir);
      expect(lines.join('\n')).toContain(c.id.slice(0, 12));
      expect(readFileSync(MAX_QUEUED, 'utf8')).toBe(original);
      expect(await leftovers()).toEqual({ containers: 0, volumes: 0 });
      expect(existsSync(path.join(scratch.dir, 'sandbox', 'deadbeef0000'))).toBe(false);
    } finally {
      writeFileSync(MAX_QUEUED, original);
      await c.remove({ force: true }).catch(() => undefined);
      await docker.getVolume('fsbench-sandbox-deadbeef0000').remove().catch(() => undefined);
    }
  }, 60_000);

  it('leaves alone run containers whose owner is alive', async () => {
    const labels = { [LABEL_RUN]: 'alive0000000', [LABEL_OWNER]: `host:${readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()}:1` };
    const c = await docker.createContainer({ Image: IMAGE, Cmd: ['--help'], Labels: labels, HostConfig: { NetworkMode: 'none' } });
    try {
      await sandbox.recover(scratch.dir);
      expect((await leftovers()).containers).toBe(1);
    } finally {
      await c.remove({ force: true });
    }
  }, 60_000);

});
