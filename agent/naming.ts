/**
 * What an agent is called: its host id (the kernel's boot id unless FSBENCH_HOST_ID says) and,
 * until its key is enrolled, the machine name it announces (once enrolled, its approval's).
 */
import os from 'node:os';
import { FsbenchError } from '../contract/errors.js';
import { readBootId } from '../host/kernel.js';
import { isContainerId, readMachineName } from '../host/machine-name.js';
import type { HealthLog } from '../queue/redis-health.js';
import type { AgentSettings } from './contract.js';

export async function kernelBootId(): Promise<string> {
  const id = await readBootId();
  if (id !== null) return id;
  throw new FsbenchError(
    'HOST_ID_UNREADABLE',
    'cannot read /proc/sys/kernel/random/boot_id, which identifies the host: mount /proc, or set FSBENCH_HOST_ID',
  );
}

/**
 * The machine's name: FSBENCH_MACHINE, else the one FSBENCH_MACHINE_FILE holds, else undefined
 * (the fingerprint then takes the hostname). Results, history and enrollment go by this name, so
 * a hostname that is a container's id, gone with the container, is said in the log.
 */
export async function machineName(s: Pick<AgentSettings, 'machine' | 'machineFile'>, log: HealthLog): Promise<string | undefined> {
  if (s.machine !== undefined) return s.machine;
  if (s.machineFile !== undefined) return readMachineName(s.machineFile);
  const hostname = os.hostname();
  if (await isContainerId(hostname)) {
    log(
      `this machine is named ${hostname}, its container's id, which a recreated container does not keep (its runs would then count as another machine's): ` +
        "set FSBENCH_MACHINE, or mount the host's /etc/hostname read-only and point FSBENCH_MACHINE_FILE at it",
      { event: 'agent.machine-name-ephemeral', machine: hostname },
    );
  }
  return undefined;
}

