/**
 * What a crashed agent's sandbox runs left behind, found again by labels: run containers and
 * volumes whose owner is gone, and run directories no container uses, whose kernel-limit
 * changes are restored from the run's own journal.
 */
import { readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type Docker from 'dockerode';
import { Journal, processAlive } from '../host/journal.js';
import { ContainerSummary, inspectContainer, quietly, VolumeList } from './engine.js';

export const LABEL_RUN = 'io.fsbench.sandbox';
export const LABEL_OWNER = 'io.fsbench.sandbox.owner';

export interface SweepIdentity {
  readonly docker: Docker;
  /** This runner's owner label: `container:<id>` or `host:<bootId>:<pid>`. */
  readonly owner: string;
  readonly bootId: string;
  /** From inside a container the host's processes are invisible. */
  readonly inContainer: boolean;
}

/** True when whoever started a labelled container or volume can no longer clean it up. */
async function ownerGone(me: SweepIdentity, owner: string | undefined): Promise<boolean> {
  if (owner === undefined || owner === me.owner) return true;
  const container = /^container:([0-9a-f]{64})$/.exec(owner)?.[1];
  if (container !== undefined) return !(await inspectContainer(me.docker, container))?.State.Running;
  const host = /^host:([^:]+):(\d+)$/.exec(owner);
  if (host?.[1] === undefined || host[2] === undefined) return false;
  if (host[1] !== me.bootId) return true;
  // From inside a container the host's processes are invisible: leave theirs alone.
  return !me.inContainer && !processAlive(Number(host[2]));
}

/**
 * Removes the run containers and volumes whose owner is gone, and the run directories under
 * `scratchDir` no container uses any more, restoring the kernel limits their runs changed.
 * Returns a line per thing removed.
 */
export async function sweepLeftovers(me: SweepIdentity, scratchDir: string): Promise<string[]> {
  const done: string[] = [];
  const raw: unknown = await me.docker.listContainers({ all: true, filters: { label: [LABEL_RUN] } });
  const alive = new Set<string>();
  for (const c of ContainerSummary.array().parse(raw)) {
    const run = c.Labels?.[LABEL_RUN] ?? '';
    if (await ownerGone(me, c.Labels?.[LABEL_OWNER])) {
      await quietly(me.docker.getContainer(c.Id).remove({ force: true, v: true }));
      done.push(`removed run container ${c.Id.slice(0, 12)} (run ${run})`);
    } else {
      alive.add(run);
    }
  }
  const volumes = VolumeList.parse(await me.docker.listVolumes({ filters: { label: [LABEL_RUN] } }));
  for (const v of volumes.Volumes ?? []) {
    if (!(await ownerGone(me, v.Labels?.[LABEL_OWNER]))) continue;
    await quietly(me.docker.getVolume(v.Name).remove());
    done.push(`removed run volume ${v.Name}`);
  }
  const runsDir = path.join(scratchDir, 'sandbox');
  for (const name of await readdir(runsDir).catch(() => [])) {
    if (alive.has(name)) continue;
    for (const line of await restoreLimits(path.join(runsDir, name, 'journal'))) done.push(line);
    await rm(path.join(runsDir, name), { recursive: true, force: true });
    done.push(`removed run directory ${path.join(runsDir, name)}`);
  }
  return done;
}

/**
 * Writes back the kernel limits a run container journaled and did not restore (it was
 * killed). Only sysctls: they are the kernel's, shared with this agent; the container's mounts
 * and paths went with it, and its loop devices clear themselves when their mount goes.
 */
export async function restoreLimits(journalDir: string): Promise<string[]> {
  const journal = await Journal.open(journalDir);
  try {
    // Entries with an owner lock are restored only once the container's run-cell let go of it (it is gone).
    const lines = await journal.recover({ ownersGone: true, kinds: ['sysctl'] });
    return lines.map((line) => `${line} after a killed run container`);
  } finally {
    await journal.close();
  }
}

