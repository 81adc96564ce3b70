/**
 * deploy/kubernetes/ rendered and checked without a cluster or the kustomize binary.
 *
 * The renderer is the subset of kustomize the manifests use (resources, images, namespace,
 * nameSuffix, secretGenerator with fixed names, patches: JSON 6902 or a deletion) and refuses any
 * other field, so a kustomization that grows a
 * feature it cannot render fails here instead of being rendered wrong. Each check returns the
 * problems it found, one line each, so a test can both expect none and plant one.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Namespace, Secret, ConfigMap, Service, PersistentVolumeClaim, ServiceAccount } from 'kubernetes-models/v1';
import { Deployment, StatefulSet, DaemonSet } from 'kubernetes-models/apps/v1';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { ClusterRole, ClusterRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import { parseAllDocuments } from 'yaml';
import { z } from 'zod';
import { messageOf } from '../../contract/errors.js';
import { PACKAGE_ROOT } from '../../host/native.js';
import { freshCli } from './local.js';

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export interface K8sObject extends JsonObject {
  apiVersion: string;
  kind: string;
  metadata: JsonObject & { name: string; namespace?: string };
}

export const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

const K8sHeader = z.looseObject({
  apiVersion: z.string().min(1),
  kind: z.string().min(1),
  metadata: z.looseObject({ name: z.string().min(1), namespace: z.string().min(1).optional() }),
});

const ImageEntry = z.strictObject({
  name: z.string().min(1),
  newName: z.string().min(1).optional(),
  newTag: z.string().min(1).optional(),
  digest: z.string().min(1).optional(),
});

const SecretGenerator = z.strictObject({
  name: z.string().min(1),
  namespace: z.string().min(1).optional(),
  type: z.string().min(1).optional(),
  files: z.array(z.string().min(1)).optional(),
  literals: z.array(z.string().min(1)).optional(),
});

/** A patch by target: a JSON 6902 list of operations, or a strategic merge patch that deletes the target (nothing else). */
const Patch = z.strictObject({
  target: z.strictObject({ kind: z.string().min(1), name: z.string().min(1), namespace: z.string().min(1).optional() }),
  patch: z.string().min(1),
});

/** The kustomization fields this renderer knows; any other is refused (strictObject). */
const Kustomization = z.strictObject({
  apiVersion: z.literal('kustomize.config.k8s.io/v1beta1'),
  kind: z.literal('Kustomization'),
  namespace: z.string().min(1).optional(),
  resources: z.array(z.string().min(1)).optional(),
  nameSuffix: z.string().min(1).optional(),
  patches: z.array(Patch).optional(),
  images: z.array(ImageEntry).optional(),
  generatorOptions: z
    .strictObject({
      // Generated names with a content hash would have to be rewritten wherever pods name them.
      disableNameSuffixHash: z.literal(true, 'the renderer makes fixed names only: set disableNameSuffixHash: true'),
      labels: z.record(z.string(), z.string()).optional(),
    })
    .optional(),
  secretGenerator: z.array(SecretGenerator).optional(),
});

/** Kinds without a namespace, which kustomize's namespace field leaves alone. */
const CLUSTER_SCOPED = new Set(['Namespace', 'ClusterRole', 'ClusterRoleBinding', 'PersistentVolume', 'StorageClass', 'PriorityClass']);

export interface RenderOptions {
  /** The bytes of a secretGenerator's file; the default reads it (a missing one is an error, as for kustomize). */
  readonly secretFile?: (file: string) => Buffer;
}

const inside = (root: string, p: string) => {
  const rel = path.relative(root, p);
  return rel !== '' && !rel.startsWith('..') && !path.isAbsolute(rel);
};

function parseYamlObjects(file: string): K8sObject[] {
  const objects: K8sObject[] = [];
  // YAML 1.1, as kubectl reads manifests: `defaultMode: 0440` is octal there (288), and YAML
  // 1.2 would read it as decimal 440, another mode.
  for (const doc of parseAllDocuments(readFileSync(file, 'utf8'), { version: '1.1' })) {
    if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors.map((e) => e.message).join('; ')}`);
    const value: unknown = doc.toJS();
    if (value === null || value === undefined) continue;
    const header = K8sHeader.safeParse(value);
    if (!header.success || !isObject(value)) throw new Error(`${file}: a document that is not a Kubernetes object: ${header.error?.message ?? 'not a mapping'}`);
    // toJS of parsed YAML gives plain JSON values: the header says it is an object with these fields.
    objects.push(value as K8sObject);
  }
  return objects;
}

function generateSecret(dir: string, g: z.output<typeof SecretGenerator>, labels: Record<string, string> | undefined, o: RenderOptions): K8sObject {
  const data: JsonObject = {};
  for (const entry of g.files ?? []) {
    const eq = entry.indexOf('=');
    const key = eq < 0 ? path.basename(entry) : entry.slice(0, eq);
    const file = path.resolve(dir, eq < 0 ? entry : entry.slice(eq + 1));
    // kustomize's default load restriction: files of the kustomization's own directory tree.
    if (!inside(dir, file)) throw new Error(`${dir}: secretGenerator ${g.name} reads ${file}, outside its directory`);
    const bytes = o.secretFile ? o.secretFile(file) : readFileSync(file);
    data[key] = bytes.toString('base64');
  }
  for (const literal of g.literals ?? []) {
    const eq = literal.indexOf('=');
    if (eq < 1) throw new Error(`${dir}: secretGenerator ${g.name}: literal without KEY=`);
    data[literal.slice(0, eq)] = Buffer.from(literal.slice(eq + 1)).toString('base64');
  }
  const metadata: K8sObject['metadata'] = { name: g.name };
  if (g.namespace !== undefined) metadata.namespace = g.namespace;
  if (labels !== undefined) metadata.labels = { ...labels };
  return { apiVersion: 'v1', kind: 'Secret', metadata, type: g.type ?? 'Opaque', data };
}

/** The pod specs of a workload object (Deployment, StatefulSet, DaemonSet, Job, Pod), as they are stored (not copies). */
export function podSpecsOf(o: K8sObject): JsonObject[] {
  if (o.kind === 'Pod') return isObject(o['spec']) ? [o['spec']] : [];
  const spec = o['spec'];
  if (!isObject(spec)) return [];
  const template = spec['template'];
  if (isObject(template) && isObject(template['spec'])) return [template['spec']];
  return [];
}

/** Every container of a pod spec, init containers included, as stored. */
export function containersOf(pod: JsonObject): { container: JsonObject; init: boolean }[] {
  const list = (key: string, init: boolean) => {
    const v = pod[key];
    return Array.isArray(v) ? v.filter(isObject).map((container) => ({ container, init })) : [];
  };
  return [...list('initContainers', true), ...list('containers', false)];
}

/** `name[:tag][@digest]` apart; a registry port (`host:5000/name`) is part of the name. */
export function splitImage(image: string): { name: string; tag?: string; digest?: string } {
  const at = image.indexOf('@');
  const digest = at < 0 ? undefined : image.slice(at + 1);
  const rest = at < 0 ? image : image.slice(0, at);
  const colon = rest.lastIndexOf(':');
  const hasTag = colon > rest.lastIndexOf('/');
  const name = hasTag ? rest.slice(0, colon) : rest;
  return { name, ...(hasTag ? { tag: rest.slice(colon + 1) } : {}), ...(digest === undefined ? {} : { digest }) };
}

function applyImages(objects: K8sObject[], images: z.output<typeof ImageEntry>[]): void {
  for (const o of objects) {
    for (const pod of podSpecsOf(o)) {
      for (const { container } of containersOf(pod)) {
        const image = container['image'];
        if (typeof image !== 'string') continue;
        const parts = splitImage(image);
        const entry = images.find((e) => e.name === parts.name);
        if (entry === undefined) continue;
        const tag = entry.newTag ?? parts.tag;
        const digest = entry.digest ?? parts.digest;
        container['image'] = `${entry.newName ?? parts.name}${entry.digest === undefined && tag !== undefined ? `:${tag}` : ''}${digest === undefined ? '' : `@${digest}`}`;
      }
    }
  }
}

const JsonOp = z.discriminatedUnion('op', [
  z.strictObject({ op: z.literal('add'), path: z.string(), value: z.json() }),
  z.strictObject({ op: z.literal('replace'), path: z.string(), value: z.json() }),
  z.strictObject({ op: z.literal('test'), path: z.string(), value: z.json() }),
  z.strictObject({ op: z.literal('remove'), path: z.string() }),
]);
const DeletePatch = z.looseObject({ $patch: z.literal('delete') });

/** RFC 6901: `/a/b~1c` is a, then b/c. */
const pointer = (p: string) => p.split('/').slice(1).map((t) => t.replaceAll('~1', '/').replaceAll('~0', '~'));

/** One RFC 6902 operation on `doc`, in place; a failed `test`, or a path that does not exist, throws, as kustomize stops. */
function applyOp(doc: JsonObject, op: z.output<typeof JsonOp>): void {
  const tokens = pointer(op.path);
  const last = tokens.pop();
  if (last === undefined) throw new Error(`patch path ${op.path}: the whole object`);
  let parent: Json = doc;
  for (const t of tokens) {
    const next: Json | undefined = Array.isArray(parent) ? parent[Number(t)] : isObject(parent) ? parent[t] : undefined;
    if (next === undefined) throw new Error(`patch path ${op.path}: no ${t}`);
    parent = next;
  }
  if (Array.isArray(parent)) {
    const i = last === '-' ? parent.length : Number(last);
    if (!Number.isInteger(i) || i < 0 || i > parent.length || (op.op !== 'add' && i >= parent.length)) throw new Error(`patch path ${op.path}: no index ${last}`);
    if (op.op === 'add') parent.splice(i, 0, op.value);
    else if (op.op === 'replace') parent[i] = op.value;
    else if (op.op === 'remove') parent.splice(i, 1);
    else if (JSON.stringify(parent[i]) !== JSON.stringify(op.value)) throw new Error(`patch test ${op.path}: ${JSON.stringify(parent[i])} is not ${JSON.stringify(op.value)}`);
    return;
  }
  if (!isObject(parent)) throw new Error(`patch path ${op.path}: not an object or list`);
  if (op.op !== 'add' && !Object.hasOwn(parent, last)) throw new Error(`patch path ${op.path}: no ${last}`);
  if (op.op === 'add' || op.op === 'replace') parent[last] = op.value;
  else if (op.op === 'remove') Reflect.deleteProperty(parent, last);
  else if (JSON.stringify(parent[last]) !== JSON.stringify(op.value)) throw new Error(`patch test ${op.path}: ${JSON.stringify(parent[last] ?? null)} is not ${JSON.stringify(op.value)}`);
}

function applyPatch(file: string, objects: K8sObject[], p: z.output<typeof Patch>): void {
  const { kind, name, namespace } = p.target;
  const targets = objects.filter((o) => o.kind === kind && o.metadata.name === name && (namespace === undefined || o.metadata.namespace === namespace));
  if (targets.length === 0) throw new Error(`${file}: a patch targets ${kind} ${namespace ?? '*'}/${name}, which is not rendered`);
  const body: unknown = parseAllDocuments(p.patch, { version: '1.1' })[0]?.toJS();
  if (DeletePatch.safeParse(body).success) {
    for (const t of targets) objects.splice(objects.indexOf(t), 1);
    return;
  }
  const ops = z.array(JsonOp).safeParse(body);
  if (!ops.success) throw new Error(`${file}: a patch of ${kind} ${name} is neither JSON 6902 operations nor a deletion (the renderer makes no other): ${ops.error.message}`);
  for (const t of targets) for (const op of ops.data) applyOp(t, op);
}

/**
 * kustomize's nameSuffix: every object's name, and the names by which this kustomization's pods
 * refer to its Secrets and ConfigMaps (volumes, projections, env), which it renames with them.
 */
function addNameSuffix(objects: K8sObject[], suffix: string): void {
  const renamed = new Set(objects.map((o) => `${o.kind} ${o.metadata.namespace ?? 'default'}/${o.metadata.name}`));
  for (const o of objects) o.metadata.name = `${o.metadata.name}${suffix}`;
  for (const o of objects) {
    const ns = o.metadata.namespace ?? 'default';
    const rename = (ref: JsonObject | undefined, kind: 'Secret' | 'ConfigMap', key: string) => {
      const name = ref?.[key];
      if (ref !== undefined && typeof name === 'string' && renamed.has(`${kind} ${ns}/${name}`)) ref[key] = `${name}${suffix}`;
    };
    for (const pod of podSpecsOf(o)) {
      for (const v of Array.isArray(pod['volumes']) ? pod['volumes'].filter(isObject) : []) {
        rename(isObject(v['secret']) ? v['secret'] : undefined, 'Secret', 'secretName');
        rename(isObject(v['configMap']) ? v['configMap'] : undefined, 'ConfigMap', 'name');
        const sources = isObject(v['projected']) && Array.isArray(v['projected']['sources']) ? v['projected']['sources'].filter(isObject) : [];
        for (const s of sources) {
          rename(isObject(s['secret']) ? s['secret'] : undefined, 'Secret', 'name');
          rename(isObject(s['configMap']) ? s['configMap'] : undefined, 'ConfigMap', 'name');
        }
      }
      for (const { container } of containersOf(pod)) {
        for (const e of Array.isArray(container['env']) ? container['env'].filter(isObject) : []) {
          const from = isObject(e['valueFrom']) ? e['valueFrom'] : undefined;
          rename(isObject(from?.['secretKeyRef']) ? from['secretKeyRef'] : undefined, 'Secret', 'name');
          rename(isObject(from?.['configMapKeyRef']) ? from['configMapKeyRef'] : undefined, 'ConfigMap', 'name');
        }
      }
    }
  }
}

/** What `kustomize build DIR` (and `kubectl kustomize DIR`) gives for the fields above, in resource order (kustomize sorts by kind; nothing here depends on order). */
export function renderKustomization(dir: string, o: RenderOptions = {}): K8sObject[] {
  const file = path.join(dir, 'kustomization.yaml');
  const parsed = Kustomization.safeParse(parseAllDocuments(readFileSync(file, 'utf8'))[0]?.toJS());
  if (!parsed.success) throw new Error(`${file}: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(top)'}: ${i.message}`).join('; ')}`);
  const k = parsed.data;
  const objects: K8sObject[] = [];
  for (const r of k.resources ?? []) {
    const p = path.resolve(dir, r);
    if (!existsSync(p)) throw new Error(`${file}: resource ${r} does not exist`);
    objects.push(...(statSync(p).isDirectory() ? renderKustomization(p, o) : parseYamlObjects(p)));
  }
  for (const g of k.secretGenerator ?? []) {
    if (k.generatorOptions === undefined) throw new Error(`${file}: secretGenerator without generatorOptions.disableNameSuffixHash: true (names with a hash are not rendered here)`);
    objects.push(generateSecret(dir, g, k.generatorOptions.labels, o));
  }
  for (const p of k.patches ?? []) applyPatch(file, objects, p);
  if (k.nameSuffix !== undefined) addNameSuffix(objects, k.nameSuffix);
  if (k.namespace !== undefined) {
    for (const obj of objects) if (!CLUSTER_SCOPED.has(obj.kind)) obj.metadata.namespace = k.namespace;
  }
  applyImages(objects, k.images ?? []);
  const seen = new Set<string>();
  for (const obj of objects) {
    const id = objectId(obj);
    if (seen.has(id)) throw new Error(`${file}: ${id} is defined twice (kustomize refuses that too)`);
    seen.add(id);
  }
  return objects;
}

export const objectId = (o: K8sObject) => `${o.kind} ${o.metadata.namespace === undefined ? '' : `${o.metadata.namespace}/`}${o.metadata.name}`;

// ---------------------------------------------------------------------------------------------
// Schemas: kubernetes-models (Kubernetes' OpenAPI schemas compiled to validators), plus unknown
// fields, which those validators let through.

interface Validatable {
  // A property, not a method: it is called with another `this` on purpose (below).
  readonly validate: (this: unknown) => void;
}
type ModelClass = { readonly prototype: Validatable; readonly apiVersion: string; readonly kind: string };
const MODELS: readonly ModelClass[] = [Namespace, Secret, ConfigMap, Service, PersistentVolumeClaim, ServiceAccount, Deployment, StatefulSet, DaemonSet, NetworkPolicy, ClusterRole, ClusterRoleBinding];

/**
 * The validator reads every field its schema knows (`data.field`) and enumerates the keys only of
 * maps (labels, data, resources). So a field of an object it read key by key and never enumerated
 * that it also never read is one the schema does not have: a typo Kubernetes would drop or refuse.
 */
function trackReads(root: Json): { value: Json; unknownFields: () => string[] } {
  interface Seen {
    readonly read: Set<string>;
    enumerated: boolean;
  }
  const seen = new Map<object, Seen>();
  const proxies = new WeakMap<object, Json>();
  const wrap = (v: Json): Json => {
    if (typeof v !== 'object' || v === null) return v;
    const cached = proxies.get(v);
    if (cached !== undefined) return cached;
    const state: Seen = { read: new Set(), enumerated: false };
    seen.set(v, state);
    const proxy = new Proxy(v, {
      get(target, key, receiver) {
        if (typeof key === 'string') state.read.add(key);
        const child: unknown = Reflect.get(target, key, receiver);
        return typeof key === 'string' && Object.hasOwn(target, key) ? wrap(child as Json) : child;
      },
      has(target, key) {
        if (typeof key === 'string') state.read.add(key);
        return Reflect.has(target, key);
      },
      getOwnPropertyDescriptor(target, key) {
        if (typeof key === 'string') state.read.add(key);
        return Reflect.getOwnPropertyDescriptor(target, key);
      },
      ownKeys(target) {
        state.enumerated = true;
        return Reflect.ownKeys(target);
      },
    });
    proxies.set(v, proxy);
    return proxy;
  };
  const unknownFields = () => {
    const found: string[] = [];
    const walk = (v: Json, at: string) => {
      if (Array.isArray(v)) {
        v.forEach((x, i) => {
          walk(x, `${at}/${String(i)}`);
        });
        return;
      }
      if (!isObject(v)) return;
      const state = seen.get(v);
      for (const [key, child] of Object.entries(v)) {
        if (state !== undefined && !state.enumerated && !state.read.has(key)) found.push(`${at}/${key}`);
        else walk(child, `${at}/${key}`);
      }
    };
    walk(root, '');
    return found;
  };
  return { value: wrap(root), unknownFields };
}

/** Kubernetes' schema for each object (types, required fields, enums, formats) and no unknown field. */
export function schemaProblems(objects: readonly K8sObject[]): string[] {
  const problems: string[] = [];
  for (const o of objects) {
    const model = MODELS.find((m) => m.apiVersion === o.apiVersion && m.kind === o.kind);
    if (model === undefined) {
      problems.push(`${objectId(o)}: no schema for ${o.apiVersion} ${o.kind} here (add its model to MODELS)`);
      continue;
    }
    const tracked = trackReads(o);
    try {
      // The model's validate runs its compiled schema on `this`: here, the tracked object.
      Reflect.apply(model.prototype.validate, tracked.value, []);
    } catch (err) {
      problems.push(`${objectId(o)}: ${messageOf(err)}`);
    }
    for (const f of tracked.unknownFields()) problems.push(`${objectId(o)}: unknown field ${f}`);
  }
  return problems;
}

// ---------------------------------------------------------------------------------------------
// fsbench's own rules.

const str = (v: Json | undefined): string | undefined => (typeof v === 'string' ? v : undefined);
const obj = (v: Json | undefined): JsonObject | undefined => (isObject(v) ? v : undefined);
const arr = (v: Json | undefined): Json[] => (Array.isArray(v) ? v : []);
const labelsOf = (v: Json | undefined): Record<string, string> => {
  const out: Record<string, string> = {};
  for (const [k, x] of Object.entries(obj(v) ?? {})) if (typeof x === 'string') out[k] = x;
  return out;
};

export interface Pod {
  readonly owner: K8sObject;
  readonly namespace: string;
  readonly labels: Record<string, string>;
  readonly spec: JsonObject;
}

/** The pods the workloads would make: their templates' labels and specs. */
export function podsOf(objects: readonly K8sObject[]): Pod[] {
  return objects.flatMap((o) => {
    const template = obj(obj(o['spec'])?.['template']);
    return podSpecsOf(o).map((spec) => ({
      owner: o,
      namespace: o.metadata.namespace ?? 'default',
      labels: labelsOf(o.kind === 'Pod' ? o.metadata['labels'] : obj(template?.['metadata'])?.['labels']),
      spec,
    }));
  });
}

const containerId = (p: Pod, c: JsonObject) => `${objectId(p.owner)} container ${str(c['name']) ?? '?'}`;

/** Which containers may go without a CPU limit, and why (a quota would distort what they measure). */
export interface Exemptions {
  readonly noCpuLimit: readonly string[];
  readonly privileged: readonly string[];
}

/** Requests and limits on every container, probes on every long-running one. */
export function resourceAndProbeProblems(objects: readonly K8sObject[], exempt: Exemptions): string[] {
  const problems: string[] = [];
  for (const p of podsOf(objects)) {
    for (const { container, init } of containersOf(p.spec)) {
      const id = containerId(p, container);
      const resources = obj(container['resources']);
      const requests = obj(resources?.['requests']);
      const limits = obj(resources?.['limits']);
      for (const r of ['cpu', 'memory']) if (requests?.[r] === undefined) problems.push(`${id}: no ${r} request`);
      if (limits?.['memory'] === undefined) problems.push(`${id}: no memory limit`);
      if (limits?.['cpu'] === undefined && !exempt.noCpuLimit.includes(id)) problems.push(`${id}: no cpu limit`);
      // Init containers run to completion and cannot have probes.
      if (!init) for (const probe of ['livenessProbe', 'readinessProbe']) if (container[probe] === undefined) problems.push(`${id}: no ${probe}`);
    }
  }
  return problems;
}

/** Only the listed containers are privileged, and only their pods use the node's filesystem or namespaces. */
export function privilegeProblems(objects: readonly K8sObject[], exempt: Exemptions): string[] {
  const problems: string[] = [];
  for (const p of podsOf(objects)) {
    const ids = containersOf(p.spec).map(({ container }) => containerId(p, container));
    const allowed = ids.some((id) => exempt.privileged.includes(id));
    for (const { container } of containersOf(p.spec)) {
      const id = containerId(p, container);
      const sc = obj(container['securityContext']);
      if (sc?.['privileged'] === true && !exempt.privileged.includes(id)) problems.push(`${id}: privileged`);
      if (arr(obj(sc?.['capabilities'])?.['add']).length > 0 && !exempt.privileged.includes(id)) problems.push(`${id}: adds capabilities`);
    }
    if (!allowed) {
      for (const ns of ['hostNetwork', 'hostPID', 'hostIPC']) if (p.spec[ns] === true) problems.push(`${objectId(p.owner)}: ${ns}`);
      for (const v of arr(p.spec['volumes'])) if (isObject(v) && v['hostPath'] !== undefined) problems.push(`${objectId(p.owner)}: hostPath volume ${str(v['name']) ?? '?'}`);
    }
  }
  return problems;
}

const RESTRICTED_VOLUMES = new Set(['configMap', 'csi', 'downwardAPI', 'emptyDir', 'ephemeral', 'persistentVolumeClaim', 'projected', 'secret']);

/**
 * Pod Security Admission: every namespace says which level it enforces, only namespaces with a
 * privileged container enforce `privileged`, and the pods of a `restricted` namespace meet that
 * level (the rules of https://kubernetes.io/docs/concepts/security/pod-security-standards/).
 */
export function podSecurityProblems(objects: readonly K8sObject[]): string[] {
  const problems: string[] = [];
  const pods = podsOf(objects);
  for (const ns of objects.filter((o) => o.kind === 'Namespace')) {
    const name = ns.metadata.name;
    const level = labelsOf(ns.metadata['labels'])['pod-security.kubernetes.io/enforce'];
    const mine = pods.filter((p) => p.namespace === name);
    const privileged = mine.some((p) => containersOf(p.spec).some(({ container }) => obj(container['securityContext'])?.['privileged'] === true));
    if (level === undefined) problems.push(`Namespace ${name}: no pod-security.kubernetes.io/enforce label`);
    else if (level !== 'restricted' && !privileged) problems.push(`Namespace ${name}: enforces ${level}, wider than its pods need (restricted)`);
    if (level !== 'restricted') continue;
    for (const p of mine) {
      const podSc = obj(p.spec['securityContext']);
      const where = objectId(p.owner);
      for (const v of arr(p.spec['volumes'])) {
        const kind = isObject(v) ? Object.keys(v).find((k) => k !== 'name') : undefined;
        if (kind === undefined || !RESTRICTED_VOLUMES.has(kind)) problems.push(`${where}: volume type ${kind ?? '?'} is not allowed at restricted`);
      }
      for (const ns2 of ['hostNetwork', 'hostPID', 'hostIPC']) if (p.spec[ns2] === true) problems.push(`${where}: ${ns2} at restricted`);
      for (const { container } of containersOf(p.spec)) {
        const id = containerId(p, container);
        const sc = obj(container['securityContext']);
        const pick = (k: string): Json | undefined => sc?.[k] ?? podSc?.[k];
        if (pick('runAsNonRoot') !== true) problems.push(`${id}: runAsNonRoot is not true`);
        if (pick('runAsUser') === 0) problems.push(`${id}: runAsUser 0`);
        if (sc?.['allowPrivilegeEscalation'] !== false) problems.push(`${id}: allowPrivilegeEscalation is not false`);
        if (sc?.['privileged'] === true) problems.push(`${id}: privileged`);
        const caps = obj(sc?.['capabilities']);
        if (!arr(caps?.['drop']).includes('ALL')) problems.push(`${id}: capabilities do not drop ALL`);
        if (arr(caps?.['add']).some((c) => c !== 'NET_BIND_SERVICE')) problems.push(`${id}: adds a capability beyond NET_BIND_SERVICE`);
        const seccomp = str(obj(pick('seccompProfile'))?.['type']);
        if (seccomp !== 'RuntimeDefault' && seccomp !== 'Localhost') problems.push(`${id}: seccompProfile is not RuntimeDefault or Localhost`);
      }
    }
  }
  return problems;
}

/** ConfigMaps the cluster makes in every namespace. */
const CLUSTER_CONFIGMAPS = new Set(['kube-root-ca.crt']);

/** Every Secret, ConfigMap, claim, service account and volume a pod names exists, with the keys it reads. */
export function referenceProblems(objects: readonly K8sObject[]): string[] {
  const problems: string[] = [];
  const find = (kind: string, namespace: string, name: string) => objects.find((o) => o.kind === kind && o.metadata.name === name && (o.metadata.namespace ?? 'default') === namespace);
  const keysOf = (o: K8sObject) => new Set([...Object.keys(obj(o['data']) ?? {}), ...Object.keys(obj(o['stringData']) ?? {})]);
  for (const p of podsOf(objects)) {
    const where = objectId(p.owner);
    const need = (kind: 'Secret' | 'ConfigMap', name: string | undefined, keys: readonly string[], what: string): void => {
      if (name === undefined) {
        problems.push(`${where}: ${what} names no ${kind}`);
        return;
      }
      if (kind === 'ConfigMap' && CLUSTER_CONFIGMAPS.has(name)) return;
      const target = find(kind, p.namespace, name);
      if (target === undefined) {
        problems.push(`${where}: ${what} names ${kind} ${p.namespace}/${name}, which is not defined`);
        return;
      }
      const have = keysOf(target);
      for (const k of keys) if (!have.has(k)) problems.push(`${where}: ${what} reads key ${k} of ${kind} ${p.namespace}/${name}, which has ${[...have].join(', ') || 'none'}`);
    };
    const itemKeys = (v: JsonObject | undefined) => arr(v?.['items']).flatMap((i) => (isObject(i) && typeof i['key'] === 'string' ? [i['key']] : []));
    const volumes = arr(p.spec['volumes']).filter(isObject);
    for (const v of volumes) {
      const name = str(v['name']) ?? '?';
      const secret = obj(v['secret']);
      if (secret) need('Secret', str(secret['secretName']), itemKeys(secret), `volume ${name}`);
      const cm = obj(v['configMap']);
      if (cm) need('ConfigMap', str(cm['name']), itemKeys(cm), `volume ${name}`);
      for (const source of arr(obj(v['projected'])?.['sources']).filter(isObject)) {
        const s = obj(source['secret']);
        if (s) need('Secret', str(s['name']), itemKeys(s), `volume ${name}`);
        const c = obj(source['configMap']);
        if (c) need('ConfigMap', str(c['name']), itemKeys(c), `volume ${name}`);
      }
      const claim = obj(v['persistentVolumeClaim']);
      const claimName = str(claim?.['claimName']);
      if (claim && (claimName === undefined || find('PersistentVolumeClaim', p.namespace, claimName) === undefined)) {
        problems.push(`${where}: volume ${name} claims ${claimName ?? '?'}, which is not defined`);
      }
    }
    const templates = arr(obj(p.owner['spec'])?.['volumeClaimTemplates']).filter(isObject).map((t) => str(obj(t['metadata'])?.['name']));
    const volumeNames = new Set([...volumes.map((v) => str(v['name'])), ...templates]);
    const sa = str(p.spec['serviceAccountName']);
    if (sa !== undefined && sa !== 'default' && find('ServiceAccount', p.namespace, sa) === undefined) problems.push(`${where}: service account ${sa} is not defined`);
    for (const { container } of containersOf(p.spec)) {
      const id = containerId(p, container);
      for (const m of arr(container['volumeMounts']).filter(isObject)) {
        if (!volumeNames.has(str(m['name']))) problems.push(`${id}: mounts volume ${str(m['name']) ?? '?'}, which the pod does not have`);
      }
      for (const e of arr(container['env']).filter(isObject)) {
        const from = obj(e['valueFrom']);
        const sk = obj(from?.['secretKeyRef']);
        if (sk && sk['optional'] !== true) need('Secret', str(sk['name']), [str(sk['key']) ?? '?'], `${id} env ${str(e['name']) ?? '?'}`);
        const ck = obj(from?.['configMapKeyRef']);
        if (ck && ck['optional'] !== true) need('ConfigMap', str(ck['name']), [str(ck['key']) ?? '?'], `${id} env ${str(e['name']) ?? '?'}`);
      }
      for (const e of arr(container['envFrom']).filter(isObject)) {
        const s = obj(e['secretRef']);
        if (s && s['optional'] !== true) need('Secret', str(s['name']), [], `${id} envFrom`);
        const c = obj(e['configMapRef']);
        if (c && c['optional'] !== true) need('ConfigMap', str(c['name']), [], `${id} envFrom`);
      }
    }
  }
  return problems;
}

const selects = (selector: Record<string, string>, labels: Record<string, string>) => Object.entries(selector).every(([k, v]) => labels[k] === v);

/** A label selector's matchLabels and matchExpressions (In, NotIn, Exists, DoesNotExist) against labels. */
function matchesSelector(selector: JsonObject, labels: Record<string, string>): boolean {
  if (!selects(labelsOf(selector['matchLabels']), labels)) return false;
  return arr(selector['matchExpressions']).every((e) => {
    if (!isObject(e)) return false;
    const key = str(e['key']) ?? '';
    const values = arr(e['values']).filter((x): x is string => typeof x === 'string');
    const has = Object.hasOwn(labels, key);
    switch (str(e['operator'])) {
      case 'In':
        return has && values.includes(labels[key] ?? '');
      case 'NotIn':
        return !has || !values.includes(labels[key] ?? '');
      case 'Exists':
        return has;
      case 'DoesNotExist':
        return !has;
      default:
        return false;
    }
  });
}

/** Every Service selects pods, and its target ports are ports those pods declare. */
export function serviceProblems(objects: readonly K8sObject[]): string[] {
  const problems: string[] = [];
  const pods = podsOf(objects);
  for (const s of objects.filter((o) => o.kind === 'Service')) {
    const spec = obj(s['spec']);
    const selector = labelsOf(spec?.['selector']);
    const ns = s.metadata.namespace ?? 'default';
    const chosen = Object.keys(selector).length === 0 ? [] : pods.filter((p) => p.namespace === ns && selects(selector, p.labels));
    if (chosen.length === 0) {
      problems.push(`${objectId(s)}: selects no pod`);
      continue;
    }
    const ports = chosen.flatMap((p) => containersOf(p.spec).filter(({ init }) => !init).flatMap(({ container }) => arr(container['ports']).filter(isObject)));
    for (const port of arr(spec?.['ports']).filter(isObject)) {
      const target = port['targetPort'] ?? port['port'];
      const ok = ports.some((cp) => (typeof target === 'string' ? cp['name'] === target : cp['containerPort'] === target));
      if (!ok) problems.push(`${objectId(s)}: target port ${JSON.stringify(target ?? null)} is no port of the pods it selects`);
    }
  }
  return problems;
}

/** Every NetworkPolicy selects pods, and every peer it admits by pod selector is a pod that exists. */
export function networkPolicyProblems(objects: readonly K8sObject[]): string[] {
  const problems: string[] = [];
  const pods = podsOf(objects);
  const namespaces = objects.filter((o) => o.kind === 'Namespace');
  // The API server labels every namespace with its name.
  const nsLabels = (name: string) => ({ ...labelsOf(namespaces.find((n) => n.metadata.name === name)?.metadata['labels']), 'kubernetes.io/metadata.name': name });
  for (const np of objects.filter((o) => o.kind === 'NetworkPolicy')) {
    const spec = obj(np['spec']) ?? {};
    const ns = np.metadata.namespace ?? 'default';
    const selector = obj(spec['podSelector']) ?? {};
    if (!pods.some((p) => p.namespace === ns && matchesSelector(selector, p.labels))) problems.push(`${objectId(np)}: selects no pod`);
    const rules = [...arr(spec['ingress']).map((r) => ({ r, dir: 'from' })), ...arr(spec['egress']).map((r) => ({ r, dir: 'to' }))];
    for (const { r, dir } of rules) {
      if (!isObject(r)) continue;
      for (const peer of arr(r[dir]).filter(isObject)) {
        const podSel = obj(peer['podSelector']);
        if (podSel === undefined) continue;
        const nsSel = obj(peer['namespaceSelector']);
        const inNs = (p: Pod) => (nsSel === undefined ? p.namespace === ns : matchesSelector(nsSel, nsLabels(p.namespace)));
        if (!pods.some((p) => inNs(p) && matchesSelector(podSel, p.labels))) problems.push(`${objectId(np)}: a ${dir} peer matches no pod`);
      }
    }
  }
  return problems;
}

/** Images named as compose.yaml builds and pulls them: same names, same tags (its defaults). */
export function imageProblems(objects: readonly K8sObject[], composeImages: readonly string[]): string[] {
  const known = composeImages.map(splitImage);
  const problems: string[] = [];
  for (const p of podsOf(objects)) {
    for (const { container } of containersOf(p.spec)) {
      const image = str(container['image']) ?? '';
      const { name, tag } = splitImage(image);
      const match = known.find((k) => k.name === name);
      if (match === undefined) problems.push(`${containerId(p, container)}: image ${image} is none compose.yaml names (${composeImages.join(', ')})`);
      else if (match.tag !== tag) problems.push(`${containerId(p, container)}: image ${image} has another tag than compose.yaml's ${match.name}:${match.tag ?? '(none)'}`);
    }
  }
  return problems;
}

/**
 * Environment variables of fsbench's own processes named as fsbench reads them: every FSBENCH_*
 * and REDIS_* variable is a setting (or a secret setting's `_FILE`), so a typo is not silently
 * ignored by a process that never looks for it.
 */
export function settingNameProblems(objects: readonly K8sObject[], settingNames: ReadonlySet<string>): string[] {
  const problems: string[] = [];
  for (const p of podsOf(objects)) {
    for (const { container } of containersOf(p.spec)) {
      for (const e of arr(container['env']).filter(isObject)) {
        const name = str(e['name']) ?? '';
        if (/^(FSBENCH|REDIS)_/.test(name) && !settingNames.has(name)) problems.push(`${containerId(p, container)}: ${name} is no fsbench setting`);
      }
    }
  }
  return problems;
}

/** The value of `key` in each ConfigMap called `name`, by namespace. */
export function configMapValues(objects: readonly K8sObject[], name: string, key: string): Map<string, string | undefined> {
  const values = new Map<string, string | undefined>();
  for (const o of objects) if (o.kind === 'ConfigMap' && o.metadata.name === name) values.set(o.metadata.namespace ?? 'default', str(obj(o['data'])?.[key]));
  return values;
}

// ---------------------------------------------------------------------------------------------
// Redis ACL users (deploy/kubernetes/redis-acl): what each node's agent pod can read.

/** Every Secret a pod names: volumes, projections, env and envFrom. */
function secretsOf(p: Pod): string[] {
  const names: string[] = [];
  for (const v of arr(p.spec['volumes']).filter(isObject)) {
    const s = str(obj(v['secret'])?.['secretName']);
    if (s !== undefined) names.push(s);
    for (const source of arr(obj(v['projected'])?.['sources']).filter(isObject)) {
      const n = str(obj(source['secret'])?.['name']);
      if (n !== undefined) names.push(n);
    }
  }
  for (const { container } of containersOf(p.spec)) {
    for (const e of arr(container['env']).filter(isObject)) {
      const n = str(obj(obj(e['valueFrom'])?.['secretKeyRef'])?.['name']);
      if (n !== undefined) names.push(n);
    }
    for (const e of arr(container['envFrom']).filter(isObject)) {
      const n = str(obj(e['secretRef'])?.['name']);
      if (n !== undefined) names.push(n);
    }
  }
  return [...new Set(names)];
}

/**
 * Each agent pod (the pods of `namespace`) is pinned to one node of its own by
 * kubernetes.io/hostname, and every Secret it names but those of `shared` (public keys) is named
 * by no pod of another node: a kubelet may read every Secret its node's pods name, so a Secret
 * two nodes' pods share gives each node the other's credentials.
 */
export function nodeSecretProblems(objects: readonly K8sObject[], namespace: string, shared: readonly string[]): string[] {
  const problems: string[] = [];
  const pods = podsOf(objects).filter((p) => p.namespace === namespace);
  if (pods.length === 0) return [`no pod in ${namespace}`];
  const nodeOf = new Map<Pod, string>();
  for (const p of pods) {
    const node = labelsOf(p.spec['nodeSelector'])['kubernetes.io/hostname'];
    if (node === undefined) problems.push(`${objectId(p.owner)}: not pinned to one node (no nodeSelector kubernetes.io/hostname)`);
    else nodeOf.set(p, node);
  }
  const byNode = new Map<string, Pod[]>();
  for (const [p, node] of nodeOf) byNode.set(node, [...(byNode.get(node) ?? []), p]);
  for (const [node, mine] of byNode) if (mine.length > 1) problems.push(`node ${node}: ${mine.length} agent workloads (${mine.map((p) => objectId(p.owner)).join(', ')})`);
  const readers = new Map<string, Set<string>>();
  for (const p of pods) {
    for (const s of secretsOf(p)) {
      if (shared.includes(s)) continue;
      readers.set(s, new Set([...(readers.get(s) ?? []), nodeOf.get(p) ?? `(unpinned ${objectId(p.owner)})`]));
    }
  }
  for (const [s, nodes] of readers) if (nodes.size > 1) problems.push(`Secret ${namespace}/${s} is named by the pods of ${nodes.size} nodes: ${[...nodes].sort().join(', ')}`);
  return problems;
}

/** Where any of `secrets` appears in clear: a ConfigMap's data, an env literal, a command or argument. */
export function secretInClearProblems(objects: readonly K8sObject[], secrets: readonly string[]): string[] {
  const problems: string[] = [];
  const leaks = (v: Json | undefined) => typeof v === 'string' && secrets.some((s) => v.includes(s));
  for (const o of objects.filter((x) => x.kind === 'ConfigMap')) {
    for (const [k, v] of Object.entries(obj(o['data']) ?? {})) if (leaks(v)) problems.push(`${objectId(o)}: key ${k} holds a secret`);
  }
  for (const p of podsOf(objects)) {
    for (const { container } of containersOf(p.spec)) {
      for (const e of arr(container['env']).filter(isObject)) if (leaks(e['value'])) problems.push(`${containerId(p, container)}: env ${str(e['name']) ?? '?'} holds a secret`);
      for (const part of [...arr(container['command']), ...arr(container['args'])]) if (leaks(part)) problems.push(`${containerId(p, container)}: its command line holds a secret`);
    }
  }
  return problems;
}

/** The decoded data of Secret `namespace/name`, key by key. */
export function secretData(objects: readonly K8sObject[], namespace: string, name: string): Map<string, string> {
  const s = objects.find((o) => o.kind === 'Secret' && o.metadata.name === name && o.metadata.namespace === namespace);
  if (s === undefined) throw new Error(`Secret ${namespace}/${name} is not rendered`);
  return new Map(Object.entries(obj(s['data']) ?? {}).map(([k, v]) => [k, Buffer.from(str(v) ?? '', 'base64').toString('utf8')]));
}

/** What secrets/kustomization.yaml reads: made by the operator, never committed. */
export const SECRET_FILES = ['redis-password', 'api-token', 'job-key.pem', 'job-key.pub.pem'];

export interface AclOverlay {
  /** The copy of deploy/kubernetes, with placeholder secrets and the users the CLI made. */
  readonly root: string;
  readonly objects: K8sObject[];
  /** Each user's password, as the CLI wrote it (fsbench-coordinator, fsbench-agent-<node>). */
  readonly passwords: ReadonlyMap<string, string>;
  /** The admin password's placeholder. */
  readonly adminPassword: string;
  /** What the CLI said on stderr. */
  readonly said: string;
  readonly remove: () => Promise<void>;
}

/** A copy of deploy/kubernetes whose redis-acl/users `fsbench agents acl --kubernetes` made for `nodes`, rendered. */
export async function aclOverlay(nodes: readonly string[]): Promise<AclOverlay> {
  const root = await mkdtemp(path.join(os.tmpdir(), 'fsbench-k8s-acl-'));
  await cp(path.join(PACKAGE_ROOT, 'deploy/kubernetes'), root, { recursive: true, filter: (src) => !SECRET_FILES.includes(path.basename(src)) && path.basename(src) !== 'users' });
  const adminPassword = `admin-placeholder-${path.basename(root)}`;
  for (const f of SECRET_FILES) await writeFile(path.join(root, 'secrets', f), f === 'redis-password' ? `${adminPassword}\n` : `placeholder for ${f}\n`);
  const { stderr } = await promisify(execFile)(process.execPath, [await freshCli(), 'agents', 'acl', '--kubernetes', path.join(root, 'redis-acl'), ...nodes], { env: { PATH: process.env['PATH'] ?? '' } });
  const passwords = new Map<string, string>();
  const users = path.join(root, 'redis-acl', 'users');
  passwords.set('fsbench-coordinator', (await readFile(path.join(users, 'fsbench-coordinator.password'), 'utf8')).trim());
  for (const n of nodes) passwords.set(`fsbench-agent-${n}`, (await readFile(path.join(users, n, `fsbench-agent-${n}.password`), 'utf8')).trim());
  return { root, objects: renderKustomization(path.join(root, 'redis-acl')), passwords, adminPassword, said: stderr, remove: () => rm(root, { recursive: true, force: true }) };
}
