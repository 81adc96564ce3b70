/** Reads the Docker part of a machine fingerprint from the engine. */
import type Docker from 'dockerode';
import { z } from 'zod';
import { dockerClient, EngineInfo, EngineVersion, engineReachable, inspectSelf, type ContainerInspect } from './engine.js';
import { DockerFingerprint } from '../contract/fingerprint.js';

export { DockerFingerprint } from '../contract/fingerprint.js';

function cpuLimit(h: ContainerInspect['HostConfig']): number | null {
  if (h.NanoCpus) return h.NanoCpus / 1e9;
  if (h.CpuQuota && h.CpuQuota > 0) return h.CpuQuota / (h.CpuPeriod || 100_000);
  return null;
}

/** Throws when the engine cannot be reached; callers record null then. */
export async function collectDockerFingerprint(docker: Docker): Promise<DockerFingerprint> {
  const version = EngineVersion.parse(await docker.version());
  const info = EngineInfo.parse(await docker.info());
  const self = await inspectSelf(docker);
  const cgroup = z.enum(['1', '2']).safeParse(info.CgroupVersion);
  return DockerFingerprint.parse({
    engineVersion: version.Version,
    apiVersion: version.ApiVersion,
    storageDriver: info.Driver,
    cgroupVersion: cgroup.success ? cgroup.data : null,
    cgroupDriver: info.CgroupDriver ?? null,
    self:
      self === null
        ? null
        : {
            containerId: self.Id,
            image: self.Config.Image,
            cpuLimit: cpuLimit(self.HostConfig),
            cpuset: self.HostConfig.CpusetCpus || null,
            memoryLimitBytes: self.HostConfig.Memory || null,
          },
  });
}

/** The Docker fingerprint when this process reaches an engine (its socket is mounted), else null. */
export async function dockerFingerprintIfAny(docker: Docker = dockerClient()): Promise<DockerFingerprint | null> {
  if (!(await engineReachable(docker))) return null;
  try {
    return await collectDockerFingerprint(docker);
  } catch {
    // An engine that answers a ping but not its own inspect is not worth failing a run over.
    return null;
  }
}
