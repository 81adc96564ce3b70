/**
 * What passes between the agent and the run container: the cell the container runs (rewritten
 * so that it measures the container's work directory and cannot start a sandbox itself), and
 * the one JSON line the container prints back. Both sides import this file; it has no Docker
 * dependency so the container's entry point stays light.
 */
import { z } from 'zod';
import { ERROR_CODE_LIST } from '../contract/errors.js';
import { InotifyLimits } from '../contract/fingerprint.js';
import { type Cell, type CellParams, cellId } from '../contract/matrix.js';
import { Histogram } from '../contract/result.js';
import { WORKLOADS } from '../contract/workloads/index.js';

/** Where, inside a run container, the storage under test is mounted (or, for `overlay`, made). */
export const WORK_DIR = '/fsbench-sandbox/work';
/**
 * The run's journal inside the container, bind-mounted from the agent's scratch directory so
 * that limits a killed container changed on the shared kernel can still be restored.
 */
export const JOURNAL_DIR = '/fsbench-sandbox/journal';

export const SANDBOX_STORAGE = ['overlay', 'volume', 'tmpfs', 'bind'] as const;
export type SandboxStorage = (typeof SANDBOX_STORAGE)[number];

/** The `container.*` parameters of a cell that asks for a sandbox, or null when it does not. */
export interface ContainerShape {
  readonly storage: SandboxStorage;
  /** CPUs (Docker NanoCpus / 1e9); 0 = no limit. */
  readonly cpus: number;
  /** Bytes; 0 = no limit. */
  readonly memoryBytes: number;
}

export function containerShape(cell: Cell): ContainerShape | null {
  const storage = z.enum(SANDBOX_STORAGE).safeParse(cell.params['container.storage']);
  if (!storage.success) return null;
  const cpus = cell.params['container.cpus'];
  const memory = cell.params['container.memory'];
  return {
    storage: storage.data,
    cpus: typeof cpus === 'number' ? cpus : 0,
    memoryBytes: typeof memory === 'number' ? memory : 0,
  };
}

/**
 * The cell as the run container runs it: `container.*` back to their defaults (so it runs in
 * the container's own process, never recursing into another sandbox) and the workload pointed
 * at the work directory, through the parameter its slice names (SandboxNeeds.workDirParam). A
 * cell whose runs work under the scratch directory (a filesystem image) keeps its parameters:
 * the container's scratch directory is the work directory, so the run lands on the storage
 * under test.
 */
export function sandboxedCell(cell: Cell): Cell {
  const params: CellParams = { ...cell.params, 'container.storage': 'none', 'container.cpus': 0, 'container.memory': 0 };
  const workDir = WORKLOADS[cell.workload].sandbox?.workDirParam(cell.params);
  if (workDir !== undefined) params[workDir] = WORK_DIR;
  return { id: cellId(cell.workload, params), workload: cell.workload, params };
}


/** A WorkloadOutcome as JSON. */
export const SandboxOutcome = z
  .object({
    metrics: z.record(z.string(), z.number().nullable()),
    histograms: z.record(z.string(), Histogram).optional(),
    info: z.record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.null()])).optional(),
    limits: InotifyLimits.nullable(),
    targetFs: z.string().nullable(),
  })
  .strict();

/** The last line the run container prints on stdout. */
export const SandboxOutput = z.discriminatedUnion('ok', [
  z.object({ ok: z.literal(true), outcome: SandboxOutcome }).strict(),
  z.object({ ok: z.literal(false), error: z.object({ code: z.enum(ERROR_CODE_LIST), message: z.string() }).strict() }).strict(),
]);
export type SandboxOutput = z.infer<typeof SandboxOutput>;
