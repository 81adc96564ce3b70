/**
 * `fsbench agents acl --kubernetes OVERLAY NODE...`: the Redis ACL users of a Kubernetes fleet,
 * written into OVERLAY/users as kustomizations (deploy/kubernetes/redis-acl). A DaemonSet mounts
 * one Secret in every pod, and a kubelet may read every Secret its node's pods name, so a shared
 * Secret of all nodes' passwords would give each node them all: each node gets its own copy of
 * the agents' DaemonSet instead, pinned to it by kubernetes.io/hostname, with a Secret that only
 * that copy names. The node's name is its agent's host id, so the user's rules hold across reboots.
 */
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { stringify } from 'yaml';
import { z } from 'zod';
import { FsbenchError } from '../contract/errors.js';
import { ensureSafeDir } from '../host/safe-dir.js';
import { agentAclRules, agentUserName, coordinatorAclRules } from '../queue/acl.js';
import { replaceFile, writeUserFiles } from './acl-files.js';

/**
 * A node name that is at once a Kubernetes node name, a label value (63 at most, for the copy's
 * selector) and an fsbench host id.
 */
export const KubernetesNode = z.string().regex(/^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$/, 'must be a node name of at most 63 lower-case letters, digits, dots or dashes (kubectl get nodes)');

const COORDINATOR_USER = 'fsbench-coordinator';
const GENERATED = '# Made by `fsbench agents acl --kubernetes`: run it again (with every node) rather than editing this file.\n';
const GENERATOR_OPTIONS = { disableNameSuffixHash: true, labels: { 'app.kubernetes.io/part-of': 'fsbench' } };

/** One node's kustomization: the overlay's agent DaemonSet, renamed and pinned to the node, and its Secret. */
function nodeKustomization(node: string): string {
  return stringify({
    apiVersion: 'kustomize.config.k8s.io/v1beta1',
    kind: 'Kustomization',
    // The suffix renames the DaemonSet and the Secret, and the DaemonSet's reference with it.
    nameSuffix: `-${node}`,
    resources: ['../../agent'],
    patches: [
      {
        target: { kind: 'DaemonSet', name: 'fsbench-agent' },
        patch: stringify([
          // Its own selector label: DaemonSets whose selectors overlap would fight over pods.
          { op: 'add', path: '/spec/selector/matchLabels/fsbench.dev~1node', value: node },
          { op: 'add', path: '/spec/template/metadata/labels/fsbench.dev~1node', value: node },
          { op: 'add', path: '/spec/template/spec/nodeSelector/kubernetes.io~1hostname', value: node },
        ]),
      },
    ],
    generatorOptions: GENERATOR_OPTIONS,
    secretGenerator: [{ name: 'fsbench-agent-redis', namespace: 'fsbench-agents', files: [`password=${agentUserName(node)}.password`] }],
  });
}

/** The users' kustomization: every node's, the coordinator's Secret, and the rule lines Redis loads. */
function usersKustomization(nodes: readonly string[]): string {
  return stringify({
    apiVersion: 'kustomize.config.k8s.io/v1beta1',
    kind: 'Kustomization',
    resources: [...nodes],
    generatorOptions: GENERATOR_OPTIONS,
    secretGenerator: [
      // Hashes only, yet in a Secret: the lines say which hosts exist and what each may do.
      { name: 'fsbench-redis-users', namespace: 'fsbench', files: [`${COORDINATOR_USER}.acl`, ...nodes.map((n) => `${n}/${agentUserName(n)}.acl`)] },
      { name: 'fsbench-coordinator-redis', namespace: 'fsbench', files: [`password=${COORDINATOR_USER}.password`] },
    ],
  });
}

/** Writes OVERLAY/users for `nodes` (passwords kept where they exist); returns what to tell the operator. */
export async function writeKubernetesUsers(overlay: string, nodes: readonly string[], prefix: string): Promise<string[]> {
  const names = nodes.map((n) => {
    const parsed = KubernetesNode.safeParse(n);
    if (!parsed.success) throw new FsbenchError('CONFIG_INVALID', `node ${JSON.stringify(n)}: ${parsed.error.issues[0]?.message ?? 'not a node name'}`);
    return parsed.data;
  });
  if (names.length === 0) throw new FsbenchError('CONFIG_INVALID', '--kubernetes needs the names of the nodes to measure (kubectl get nodes -l fsbench.dev/agent=true)');
  if (new Set(names).size !== names.length) throw new FsbenchError('CONFIG_INVALID', 'a node is named twice');
  const root = path.resolve(overlay);
  if (!existsSync(path.join(root, 'agent', 'kustomization.yaml'))) {
    throw new FsbenchError('CONFIG_INVALID', `${root} is not the ACL overlay (it has no agent/kustomization.yaml): give --kubernetes deploy/kubernetes/redis-acl, or a copy of it`);
  }
  const users = await ensureSafeDir(path.join(root, 'users'), { what: 'the directory of Kubernetes ACL users', setting: '--kubernetes' });
  const said: string[] = [];
  const coordinator = await writeUserFiles(users, COORDINATOR_USER, coordinatorAclRules(prefix));
  said.push(`${COORDINATOR_USER}: password ${coordinator.created ? 'new' : 'kept'}`);
  for (const node of [...names].sort()) {
    const dir = await ensureSafeDir(path.join(users, node), { what: 'the directory of a node\'s ACL user', setting: '--kubernetes' });
    const user = await writeUserFiles(dir, agentUserName(node), agentAclRules(prefix, node));
    await replaceFile(dir, 'kustomization.yaml', GENERATED + nodeKustomization(node), 0o644);
    said.push(`${agentUserName(node)}: DaemonSet fsbench-agent-${node} on node ${node}, Secret fsbench-agent-redis-${node}, password ${user.created ? 'new' : 'kept'}`);
  }
  await replaceFile(users, 'kustomization.yaml', GENERATED + usersKustomization([...names].sort()), 0o644);
  const dropped = (await readdir(users, { withFileTypes: true })).filter((e) => e.isDirectory() && !names.includes(e.name)).map((e) => e.name);
  for (const node of dropped) {
    said.push(`${node}: no longer listed (its files are kept): kubectl -n fsbench-agents delete daemonset/fsbench-agent-${node} secret/fsbench-agent-redis-${node}`);
  }
  said.push(`${users}: apply with kubectl apply -k ${root}, then restart Redis to load the users (kubectl -n fsbench rollout restart statefulset/fsbench-redis)`);
  return said;
}
