/**
 * The Redis of deploy/kubernetes/sentinel run for real, short of a cluster: the data nodes' and
 * sentinels' scripts exactly as the rendered StatefulSets hold them, in containers of the same
 * image on a Docker network where each answers to the DNS name its pod would have
 * (`fsbench-redis-0.fsbench-redis-nodes.fsbench.svc` ...), as uid 999 with a read-only root and
 * the password file where the Secret is mounted. The first start elects fsbench-redis-0; a
 * SIGKILLed primary is replaced by its replica; the old primary's pod, recreated, rejoins as a
 * replica of the new one; a sentinel recreated with an empty volume learns the current primary.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { PACKAGE_ROOT } from '../host/native.js';
import { dockerClient, engineReachable } from '../sandbox/engine.js';
import { until as waitUntil } from './helpers/http.js';
import { containersOf, objectId, podsOf, renderKustomization } from './helpers/kubernetes.js';

const run = promisify(execFile);
const docker = dockerClient();
if (!(await engineReachable(docker))) throw new Error('this test needs a running Docker engine: `npm test` starts one (scripts/prepare-host.sh)');

const objects = renderKustomization(path.join(PACKAGE_ROOT, 'deploy/kubernetes/sentinel'), { secretFile: (f) => Buffer.from(`placeholder for ${path.basename(f)}\n`) });
/** The image and the script of the one container of StatefulSet `name`, as rendered. */
function podOf(name: string): { image: string; script: string } {
  const pod = podsOf(objects).find((p) => objectId(p.owner) === `StatefulSet fsbench/${name}`);
  const c = pod === undefined ? undefined : containersOf(pod.spec)[0]?.container;
  const command = z.array(z.string()).length(3).parse(c?.['command']);
  return { image: z.string().parse(c?.['image']), script: command[2] ?? '' };
}
const data = podOf('fsbench-redis');
const sentinel = podOf('fsbench-sentinel');
const nodeName = (i: number) => `fsbench-redis-${i}.fsbench-redis-nodes.fsbench.svc`;

const suffix = `${process.pid}-${randomBytes(3).toString('hex')}`;
const network = `fsbench-k8s-sentinel-${suffix}`;
let dir = '';
const password = randomBytes(16).toString('hex');

/** Starts (or recreates) the pod `pod` of `kind` under its DNS name; its /data is new, as a new volume. */
async function startPod(kind: 'redis' | 'sentinel', pod: string): Promise<void> {
  const spec = kind === 'redis' ? data : sentinel;
  const service = kind === 'redis' ? 'fsbench-redis-nodes' : 'fsbench-sentinel-nodes';
  const name = `${pod}-${suffix}`;
  await docker.getContainer(name).remove({ force: true }).catch(() => undefined);
  const container = await docker.createContainer({
    name,
    Image: spec.image,
    User: '999:999',
    Env: [`POD_NAME=${pod}`],
    Entrypoint: ['/bin/sh', '-c'],
    Cmd: [spec.script],
    HostConfig: {
      NetworkMode: network,
      ReadonlyRootfs: true,
      Binds: [`${path.join(dir, 'password')}:/run/fsbench-redis/password:ro`],
      Tmpfs: { '/data': 'uid=999,gid=999' },
    },
    NetworkingConfig: { EndpointsConfig: { [network]: { Aliases: [`${pod}.${service}.fsbench.svc`] } } },
  });
  await container.start();
}

/** redis-cli in container `pod`, authenticated as the pods are. */
async function cli(pod: string, ...args: string[]): Promise<string[]> {
  const { stdout } = await run('docker', ['exec', '-e', `REDISCLI_AUTH=${password}`, `${pod}-${suffix}`, 'redis-cli', ...args]);
  return stdout.split('\n').filter((l) => l !== '');
}

const primaryPerSentinel = async (sentinels: readonly string[]) =>
  Promise.all(sentinels.map(async (s) => (await cli(s, '-p', '26379', 'sentinel', 'get-master-addr-by-name', 'fsbench').catch(() => []))[0] ?? ''));

/** Polls `probe` until it gives a value, a minute at most; a pod not answering yet is retried. */
const until = <T>(what: string, probe: () => Promise<T | undefined>): Promise<T> => waitUntil(what, probe, { ms: 60_000, everyMs: 250, retryErrors: true });

const SENTINELS = ['fsbench-sentinel-0', 'fsbench-sentinel-1', 'fsbench-sentinel-2'];

/** `sentinel master fsbench` as sentinel `pod` answers it: its flat list of names and values. */
async function masterSeenBy(pod: string): Promise<Record<string, string>> {
  const flat = await cli(pod, '-p', '26379', 'sentinel', 'master', 'fsbench');
  return Object.fromEntries(flat.flatMap((v, i) => (i % 2 === 0 ? [[v, flat[i + 1] ?? '']] : [])));
}

/** The last lines each pod logged, for a failure to say what happened. */
async function logsOf(pods: readonly string[]): Promise<string> {
  const out: string[] = [];
  for (const pod of pods) {
    const { stdout, stderr } = await run('docker', ['logs', '--tail', '30', `${pod}-${suffix}`]).catch(() => ({ stdout: '', stderr: '(no logs)' }));
    out.push(`== ${pod}\n${stdout}${stderr}`);
  }
  return out.join('\n');
}

beforeAll(async () => {
  await run('bash', ['scripts/base-images.sh'], { cwd: PACKAGE_ROOT, timeout: 600_000 });
  dir = await mkdtemp(path.join(os.tmpdir(), 'fsbench-k8s-sentinel-'));
  await writeFile(path.join(dir, 'password'), `${password}\n`);
  // The Secret's file is readable by the pod's uid (defaultMode 0440 with fsGroup there).
  await chmod(path.join(dir, 'password'), 0o444);
  await docker.createNetwork({ Name: network });
  await Promise.all([...['fsbench-redis-0', 'fsbench-redis-1'].map((p) => startPod('redis', p)), ...SENTINELS.map((p) => startPod('sentinel', p))]);
}, 600_000);

afterAll(async () => {
  for (const pod of ['fsbench-redis-0', 'fsbench-redis-1', ...SENTINELS]) await docker.getContainer(`${pod}-${suffix}`).remove({ force: true }).catch(() => undefined);
  await docker.getNetwork(network).remove().catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
});

describe('the Redis of deploy/kubernetes/sentinel, its scripts run under the pod names', () => {
  it('elects fsbench-redis-0 at the first start, with fsbench-redis-1 its replica and three sentinels that know each other', async () => {
    const role = await until('fsbench-redis-1 to replicate fsbench-redis-0', async () => {
      const r = await cli('fsbench-redis-1', 'role');
      return r[0] === 'slave' && r[3] === 'connected' ? r : undefined;
    });
    expect(role[1]).toBe(nodeName(0));
    // What a failover needs: every sentinel watching the primary, knowing its replica (from the
    // primary's INFO, every 10 s) and the other two sentinels.
    const views = await until('every sentinel to know the primary, its replica and the others', async () => {
      const all = await Promise.all(SENTINELS.map(masterSeenBy));
      return all.every((m) => m.ip === nodeName(0) && m['num-slaves'] === '1' && m['num-other-sentinels'] === '2') ? all : undefined;
    });
    expect(views.map((m) => m.quorum)).toEqual(['2', '2', '2']);
  }, 120_000);

  it('promotes the replica when the primary is SIGKILLed, keeps what was written, and takes the recreated pod back as a replica', async () => {
    expect(await cli('fsbench-redis-0', 'set', 'written-before', 'the kill')).toEqual(['OK']);
    await until('the write to reach the replica', async () => ((await cli('fsbench-redis-1', 'get', 'written-before'))[0] === 'the kill' ? true : undefined));
    const killedAt = Date.now();
    await docker.getContainer(`fsbench-redis-0-${suffix}`).kill({ signal: 'SIGKILL' });
    await until('the sentinels to name fsbench-redis-1', async () => ((await primaryPerSentinel(SENTINELS)).every((p) => p === nodeName(1)) ? true : undefined)).catch(async (err: unknown) => {
      throw new Error(`${String(err)}; what the sentinels said:\n${await logsOf(SENTINELS)}`);
    });
    const promotedMs = Date.now() - killedAt;
    expect((await cli('fsbench-redis-1', 'role'))[0]).toBe('master');
    expect(await cli('fsbench-redis-1', 'get', 'written-before')).toEqual(['the kill']);

    // The pod recreated (a new volume here): it asks the sentinels and follows the new primary.
    await startPod('redis', 'fsbench-redis-0');
    const role = await until('fsbench-redis-0 to replicate again', async () => {
      const r = await cli('fsbench-redis-0', 'role');
      return r[0] === 'slave' && r[1] === nodeName(1) && (await cli('fsbench-redis-0', 'get', 'written-before'))[0] === 'the kill' ? r : undefined;
    });
    expect(role.slice(0, 2)).toEqual(['slave', nodeName(1)]);
    console.log(JSON.stringify({ figure: 'kubernetes-sentinel-scripts', promotedAfterMs: promotedMs, downAfterMs: 5000 }));
  }, 180_000);

  it('has a sentinel recreated with an empty volume watch the current primary, not the first pod', async () => {
    await startPod('sentinel', 'fsbench-sentinel-2');
    await until('the new sentinel to name fsbench-redis-1', async () => ((await primaryPerSentinel(['fsbench-sentinel-2']))[0] === nodeName(1) ? true : undefined));
    let seen: Record<string, string> = {};
    const master = await until('the new sentinel to find the others and the replica', async () => {
      seen = await masterSeenBy('fsbench-sentinel-2');
      // At least: an entry of the sentinel it replaced may linger in the others' view a while.
      return Number(seen['num-other-sentinels']) >= 2 && Number(seen['num-slaves']) >= 1 ? seen : undefined;
    }).catch(async (err: unknown) => {
      throw new Error(`${String(err)}; it says ${JSON.stringify(seen)}; the sentinels said:\n${await logsOf(SENTINELS)}`);
    });
    expect(master.ip).toBe(nodeName(1));
  }, 120_000);
});
