/**
 * The Docker engine as fsbench sees it: a dockerode client, and every answer of the engine this
 * module reads, parsed with zod (the engine's JSON is input like any other; the typings of
 * dockerode describe what it should send, not what it did).
 */
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import Docker from 'dockerode';
import { z } from 'zod';
import { FsbenchError } from '../contract/errors.js';

/** The subset of `GET /containers/{id}/json` fsbench reads. */
export const ContainerInspect = z
  .object({
    Id: z.string().regex(/^[0-9a-f]{64}$/),
    /** The image id (sha256:...), not its tag: a sandbox runs the very image the agent runs. */
    Image: z.string().min(1),
    Config: z.object({ Image: z.string(), Labels: z.record(z.string(), z.string()).nullish() }).loose(),
    State: z.object({ Running: z.boolean(), OOMKilled: z.boolean().optional() }).loose(),
    HostConfig: z
      .object({
        NanoCpus: z.number().int().nullish(),
        CpuQuota: z.number().int().nullish(),
        CpuPeriod: z.number().int().nullish(),
        CpusetCpus: z.string().nullish(),
        Memory: z.number().int().nullish(),
        CapAdd: z.array(z.string()).nullish(),
        CapDrop: z.array(z.string()).nullish(),
        SecurityOpt: z.array(z.string()).nullish(),
        Devices: z
          .array(z.object({ PathOnHost: z.string(), PathInContainer: z.string(), CgroupPermissions: z.string() }).loose())
          .nullish(),
        DeviceCgroupRules: z.array(z.string()).nullish(),
        MaskedPaths: z.array(z.string()).nullish(),
        ReadonlyPaths: z.array(z.string()).nullish(),
      })
      .loose(),
    Mounts: z
      .array(z.object({ Type: z.string(), Source: z.string(), Destination: z.string(), Name: z.string().optional() }).loose())
      .nullish(),
  })
  .loose();
export type ContainerInspect = z.infer<typeof ContainerInspect>;

export const ImageInspect = z.object({ Id: z.string().regex(/^sha256:[0-9a-f]{64}$/) }).loose();

export const EngineVersion = z.object({ Version: z.string(), ApiVersion: z.string() }).loose();

export const EngineInfo = z
  .object({
    Driver: z.string(),
    /** "1" or "2"; absent before API 1.40. */
    CgroupVersion: z.string().optional(),
    CgroupDriver: z.string().optional(),
  })
  .loose();

export const ContainerSummary = z
  .object({ Id: z.string(), State: z.string(), Labels: z.record(z.string(), z.string()).nullish() })
  .loose();

export const VolumeList = z
  .object({
    Volumes: z.array(z.object({ Name: z.string(), Labels: z.record(z.string(), z.string()).nullish() }).loose()).nullish(),
  })
  .loose();

export const WaitResult = z.object({ StatusCode: z.number().int() }).loose();

const EngineError = z.object({ statusCode: z.number().int() }).loose();

/** The HTTP status of a failed engine call, when it was the engine that answered. */
export function engineStatus(err: unknown): number | null {
  const r = EngineError.safeParse(err);
  return r.success ? r.data.statusCode : null;
}

/** A client for DOCKER_HOST, else /var/run/docker.sock, or `socketPath` when given. */
export function dockerClient(socketPath?: string): Docker {
  return socketPath === undefined ? new Docker() : new Docker({ socketPath });
}

/** True when the engine answers a ping. */
export async function engineReachable(docker: Docker): Promise<boolean> {
  try {
    await docker.ping();
    return true;
  } catch {
    return false;
  }
}

export async function inspectContainer(docker: Docker, id: string): Promise<ContainerInspect | null> {
  let raw: unknown;
  try {
    raw = await docker.getContainer(id).inspect();
  } catch (err) {
    if (engineStatus(err) === 404) return null;
    throw err;
  }
  const r = ContainerInspect.safeParse(raw);
  if (!r.success) {
    throw new FsbenchError('SANDBOX_FAILED', `the engine's description of container ${id} is not what fsbench expects: ${r.error.message}`);
  }
  return r.data;
}

/**
 * Ids this process's own container may have, best first: a bind mount of the engine's
 * per-container files (/etc/hostname, /etc/hosts, resolv.conf) names it under both cgroup
 * versions; cgroup v1 paths name it too; Docker makes the hostname its short id by default.
 */
export async function ownContainerCandidates(): Promise<string[]> {
  const ids: string[] = [];
  const add = (id: string | undefined) => {
    if (id !== undefined && !ids.includes(id)) ids.push(id);
  };
  // Only these mount points: on a host, the engine's own shm mounts name every container.
  const mountinfo = await readFile('/proc/self/mountinfo', 'utf8').catch(() => '');
  for (const line of mountinfo.split('\n')) {
    const [, , , root, point] = line.split(' ');
    if (point === '/etc/hostname' || point === '/etc/hosts' || point === '/etc/resolv.conf') {
      add(/\/containers\/([0-9a-f]{64})\//.exec(root ?? '')?.[1]);
    }
  }
  const cgroup = await readFile('/proc/self/cgroup', 'utf8').catch(() => '');
  for (const m of cgroup.matchAll(/(?:docker[/-]|\/)([0-9a-f]{64})(?:\.scope)?$/gm)) add(m[1]);
  const host = os.hostname();
  if (/^[0-9a-f]{12}$/.test(host)) add(host);
  return ids;
}

/** This process's own container as the engine describes it, or null when it runs on a host. */
export async function inspectSelf(docker: Docker): Promise<ContainerInspect | null> {
  for (const id of await ownContainerCandidates()) {
    const self = await inspectContainer(docker, id);
    if (self?.State.Running) return self;
  }
  return null;
}

/** Ignores the engine's "already gone" answers (304 not modified, 404 no such object, 409 in progress). */
export async function quietly(op: Promise<unknown>): Promise<void> {
  try {
    await op;
  } catch (err) {
    const status = engineStatus(err);
    if (status === 304 || status === 404 || status === 409) return;
    throw err;
  }
}
