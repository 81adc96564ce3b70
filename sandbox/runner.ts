/**
 * Sandbox mode: a cell with `container.storage` other than `none` runs in a fresh container per
 * run, started from the agent's own image through the Docker engine, shaped by the cell's
 * `container.*` parameters, and removed afterwards, also after a failure, a timeout or a
 * cancellation.
 *
 * What a crash of the agent could leave behind is found again by labels, not by the host-change
 * journal (whose entry kinds describe this process's own mounts, limits and paths): every run
 * container and volume carries `io.fsbench.sandbox` and its owner, and the first run of a
 * runner sweeps whatever a dead owner left. The run's own journal lives in a directory of the
 * agent's scratch directory bind-mounted into the container, so limits a killed run container
 * changed on the shared kernel are restored by the sweep too.
 */
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type Docker from 'dockerode';
import { FsbenchError, toFsbenchError, messageOf } from '../contract/errors.js';
import type { Cell } from '../contract/matrix.js';
import { currentBootId } from '../host/journal.js';
import type { RunContext, WorkloadOutcome, WorkloadRunner } from '../workloads/workload.js';
import {
  dockerClient,
  engineReachable,
  engineStatus,
  quietly,
  ImageInspect,
  inspectContainer,
  inspectSelf,
  WaitResult,
  type ContainerInspect,
} from './engine.js';
import { collectDockerFingerprint, type DockerFingerprint } from './fingerprint.js';
import { LineLog, Tail } from './output.js';
import { LABEL_OWNER, LABEL_RUN, restoreLimits, sweepLeftovers } from './sweep.js';

export { LABEL_OWNER, LABEL_RUN } from './sweep.js';
import { containerShape, JOURNAL_DIR, SandboxOutput, sandboxedCell, WORK_DIR, type ContainerShape } from './protocol.js';

export const LABEL_CELL = 'io.fsbench.cell';

/**
 * What a run container may do when the agent is not in a container to copy it from: what
 * CONTEXT.md found an agent needs. `systempaths=unconfined` is the CLI's spelling; through the
 * API it is the read-only paths without /proc/sys (the engine's defaults otherwise).
 */
const DEFAULT_PRIVILEGES = {
  CapAdd: ['SYS_ADMIN'],
  CapDrop: [] as string[],
  SecurityOpt: ['apparmor=unconfined'],
  DeviceCgroupRules: ['b 7:* rmw'],
  ReadonlyPaths: ['/proc/bus', '/proc/fs', '/proc/irq', '/proc/sysrq-trigger'],
};
const LOOP_CONTROL = '/dev/loop-control';

const MAX_STDOUT = 1024 * 1024;
const MAX_STDERR = 16 * 1024;

export interface SandboxOptions {
  /** Default: DOCKER_HOST, else /var/run/docker.sock. */
  readonly docker?: Docker;
  /** The image run containers start from; default: the image of the agent's own container. */
  readonly image?: string;
  /** Longest a run container may live; default 1 h plus the cell's `duration` and `drainTimeout`. */
  readonly timeoutMs?: number;
  /** Seconds `docker stop` leaves the run to restore limits before it is killed. */
  readonly stopGraceSeconds?: number;
  readonly log?: (line: string) => void;
}



/** Engine errors as FsbenchErrors: unreachable is SANDBOX_UNAVAILABLE, the rest SANDBOX_FAILED. */
function engineError(what: string, err: unknown): FsbenchError {
  if (err instanceof FsbenchError) return err;
  const unreachable = err instanceof Error && 'code' in err && ['ECONNREFUSED', 'ENOENT', 'EACCES'].includes(String(err.code));
  return new FsbenchError(unreachable ? 'SANDBOX_UNAVAILABLE' : 'SANDBOX_FAILED', `${what}: ${messageOf(err)}`);
}


function defaultTimeoutMs(cell: Cell): number {
  const ms = (name: string) => {
    const v = cell.params[name];
    return typeof v === 'number' ? v : 0;
  };
  return 3_600_000 + ms('duration') + ms('drainTimeout');
}

type Ended = { kind: 'exited'; status: number } | { kind: 'timeout' } | { kind: 'cancelled' };

export class SandboxRunner implements WorkloadRunner {
  private readonly sweptDirs = new Set<string>();

  private constructor(
    readonly docker: Docker,
    /** The agent's own container, when it runs in one. */
    private readonly self: ContainerInspect | null,
    private readonly image: string,
    private readonly owner: string,
    private readonly bootId: string,
    private readonly opts: SandboxOptions,
  ) {}

  /**
   * Connects to the engine and finds the image to run. Throws SANDBOX_UNAVAILABLE, saying what
   * is missing, when there is no engine or no image to use.
   */
  static async connect(opts: SandboxOptions = {}): Promise<SandboxRunner> {
    const docker = opts.docker ?? dockerClient();
    if (!(await engineReachable(docker))) {
      throw new FsbenchError(
        'SANDBOX_UNAVAILABLE',
        'no Docker engine answers (DOCKER_HOST, else /var/run/docker.sock): mount the engine\'s socket into the agent container',
      );
    }
    const self = await inspectSelf(docker).catch((err: unknown) => {
      throw engineError('cannot inspect the agent\'s own container', err);
    });
    const wanted = opts.image ?? self?.Image;
    if (wanted === undefined) {
      throw new FsbenchError(
        'SANDBOX_UNAVAILABLE',
        'this agent runs outside a container, so it has no image of its own for run containers: give the sandbox an image (an fsbench agent image)',
      );
    }
    // By id: every run of this agent uses the same image even if the tag moves meanwhile.
    let image: string;
    try {
      image = ImageInspect.parse(await docker.getImage(wanted).inspect()).Id;
    } catch (err) {
      if (engineStatus(err) === 404) {
        throw new FsbenchError('SANDBOX_UNAVAILABLE', `the image ${wanted} for run containers does not exist: build it (docker compose build agent)`);
      }
      throw engineError(`cannot inspect the image ${wanted}`, err);
    }
    const boot = await currentBootId();
    const owner = self ? `container:${self.Id}` : `host:${boot}:${process.pid}`;
    return new SandboxRunner(docker, self, image, owner, boot, opts);
  }

  /** The Docker part of this machine's fingerprint. */
  fingerprint(): Promise<DockerFingerprint> {
    return collectDockerFingerprint(this.docker);
  }

  private log(ctx: RunContext | null, line: string): void {
    (ctx?.log ?? this.opts.log ?? (() => undefined))(line);
  }

  /** Where the engine finds `p` of this process's filesystem (they differ when the agent is in a container). */
  hostPath(p: string): string {
    if (this.self === null) return p;
    let best: { Source: string; Destination: string } | null = null;
    for (const m of this.self.Mounts ?? []) {
      if (m.Type !== 'bind' && m.Type !== 'volume') continue;
      const inside = p === m.Destination || p.startsWith(m.Destination.endsWith('/') ? m.Destination : `${m.Destination}/`);
      if (inside && (best === null || m.Destination.length > best.Destination.length)) best = m;
    }
    if (best === null) {
      throw new FsbenchError(
        'SANDBOX_UNAVAILABLE',
        `${p} is in the agent container's own filesystem, which the engine cannot mount into a run container: ` +
          'put the scratch directory (FSBENCH_SCRATCH) on a volume or bind mount, as compose.yaml does',
      );
    }
    return path.join(best.Source, path.relative(best.Destination, p));
  }

  /**
   * Removes the run containers and volumes whose owner is gone, and the run directories under
   * `scratchDir` no container uses any more, restoring the kernel limits their runs changed.
   * Returns a line per thing removed.
   */
  recover(scratchDir: string): Promise<string[]> {
    return sweepLeftovers({ docker: this.docker, owner: this.owner, bootId: this.bootId, inContainer: this.self !== null }, scratchDir);
  }

  /** Runs are one at a time, so a set is enough to sweep each scratch directory once. */
  private async sweepOnce(ctx: RunContext): Promise<void> {
    if (this.sweptDirs.has(ctx.scratchDir)) return;
    for (const line of await this.recover(ctx.scratchDir)) this.log(ctx, `recovered: ${line}`);
    this.sweptDirs.add(ctx.scratchDir);
  }

  private hostConfig(shape: ContainerShape, mounts: Docker.MountSettings[]): Docker.HostConfig {
    const h = this.self?.HostConfig;
    const devices = h?.Devices ?? (existsSync(LOOP_CONTROL) ? [{ PathOnHost: LOOP_CONTROL, PathInContainer: LOOP_CONTROL, CgroupPermissions: 'rwm' }] : []);
    // The run needs exactly what the agent was given to measure, no more.
    const privileges = h
      ? {
          CapAdd: h.CapAdd ?? [],
          CapDrop: h.CapDrop ?? [],
          // The engine reports the CLI's systempaths option as the paths themselves, copied below.
          SecurityOpt: (h.SecurityOpt ?? []).filter((o) => !o.startsWith('systempaths=')),
          DeviceCgroupRules: h.DeviceCgroupRules ?? [],
          ...(h.MaskedPaths ? { MaskedPaths: h.MaskedPaths } : {}),
          ...(h.ReadonlyPaths ? { ReadonlyPaths: h.ReadonlyPaths } : {}),
        }
      : DEFAULT_PRIVILEGES;
    return {
      ...privileges,
      Devices: devices.map((d) => ({ PathOnHost: d.PathOnHost, PathInContainer: d.PathInContainer, CgroupPermissions: d.CgroupPermissions })),
      NetworkMode: 'none',
      Mounts: mounts,
      ...(shape.cpus > 0 ? { NanoCpus: shape.cpus * 1e9 } : {}),
      // No swap beyond the limit: a run that needs more memory fails visibly instead of paging.
      ...(shape.memoryBytes > 0 ? { Memory: shape.memoryBytes, MemorySwap: shape.memoryBytes } : {}),
    };
  }

  async run(cell: Cell, ctx: RunContext): Promise<WorkloadOutcome> {
    const shape = containerShape(cell);
    if (shape === null) throw new FsbenchError('INTERNAL', `cell ${cell.id} has no container.storage for a sandbox`);
    const cancelled = () => new FsbenchError('CANCELLED', 'the run was cancelled');
    // A function, not a property read: the signal changes while this awaits.
    const aborted = () => ctx.signal.aborted;
    if (aborted()) throw cancelled();
    try {
      await this.sweepOnce(ctx);
    } catch (err) {
      throw engineError('cannot clean up earlier run containers', err);
    }

    const runId = randomUUID().replace(/-/g, '').slice(0, 12);
    const runDir = path.join(ctx.scratchDir, 'sandbox', runId);
    const labels = { [LABEL_RUN]: runId, [LABEL_OWNER]: this.owner, [LABEL_CELL]: cell.id };
    const undoStack: { what: string; undo: () => Promise<unknown> }[] = [];
    let result: WorkloadOutcome | undefined;
    let failure: unknown;
    try {
      await mkdir(path.join(runDir, 'journal'), { recursive: true });
      undoStack.push({
        what: `run directory ${runDir}`,
        undo: async () => {
          await restoreLimits(path.join(runDir, 'journal'));
          await rm(runDir, { recursive: true, force: true });
        },
      });
      const mounts: Docker.MountSettings[] = [{ Type: 'bind', Source: this.hostPath(path.join(runDir, 'journal')), Target: JOURNAL_DIR }];
      switch (shape.storage) {
        case 'overlay':
          break;
        case 'tmpfs':
          // Mode 0700: the run's scratch directory must be its own (a tmpfs is 1777 by default, which run-cell refuses); size 0: no limit of its own, the engine's default.
          mounts.push({ Type: 'tmpfs', Target: WORK_DIR, Source: '', TmpfsOptions: { SizeBytes: 0, Mode: 0o700 } });
          break;
        case 'bind':
          await mkdir(path.join(runDir, 'work'), { recursive: true });
          mounts.push({ Type: 'bind', Source: this.hostPath(path.join(runDir, 'work')), Target: WORK_DIR });
          break;
        case 'volume': {
          const name = `fsbench-sandbox-${runId}`;
          await this.docker.createVolume({ Name: name, Labels: labels });
          undoStack.push({ what: `volume ${name}`, undo: () => quietly(this.docker.getVolume(name).remove()) });
          mounts.push({ Type: 'volume', Source: name, Target: WORK_DIR });
          break;
        }
      }
      if (aborted()) throw cancelled();
      const container = await this.docker.createContainer({
        name: `fsbench-sandbox-${runId}`,
        Image: this.image,
        User: 'root',
        Cmd: ['run-cell', '--scratch', WORK_DIR, '--journal', JOURNAL_DIR, JSON.stringify(sandboxedCell(cell))],
        Labels: labels,
        AttachStdout: true,
        AttachStderr: true,
        Tty: false,
        HostConfig: this.hostConfig(shape, mounts),
      });
      undoStack.push({
        what: `container ${container.id.slice(0, 12)}`,
        undo: () => quietly(container.remove({ force: true, v: true })),
      });
      result = await this.execute(container, cell, shape, ctx);
    } catch (err) {
      failure = err;
    }

    const leftovers: string[] = [];
    for (const step of undoStack.reverse()) {
      try {
        await step.undo();
      } catch (err) {
        leftovers.push(`${step.what}: ${messageOf(err)}`);
      }
    }
    if (leftovers.length > 0) {
      const what = `could not remove everything the run container used (the next start retries): ${leftovers.join('; ')}`;
      if (failure === undefined) throw new FsbenchError('SANDBOX_FAILED', what);
      this.log(ctx, what);
    }
    if (failure !== undefined) throw engineError('the run container could not be run', failure);
    if (result === undefined) throw new FsbenchError('INTERNAL', 'the run container returned nothing');
    return result;
  }

  /** Starts the container, waits for it (bounded), and parses the line it printed. */
  private async execute(container: Docker.Container, cell: Cell, shape: ContainerShape, ctx: RunContext): Promise<WorkloadOutcome> {
    const stdout = new Tail(MAX_STDOUT);
    const stderr = new LineLog(ctx.log, MAX_STDERR);
    const stream = await container.attach({ stream: true, stdout: true, stderr: true });
    const drained = new Promise<void>((resolve) => {
      stream.once('end', resolve);
      stream.once('close', resolve);
      stream.once('error', () => {
        resolve();
      });
    });
    this.docker.modem.demuxStream(stream, stdout, stderr);
    await container.start();

    const timeoutMs = this.opts.timeoutMs ?? defaultTimeoutMs(cell);
    const waited = container.wait().then((r: unknown) => WaitResult.parse(r));
    let timer: NodeJS.Timeout | undefined;
    let cancel = (): void => undefined;
    const onAbort = () => {
      cancel();
    };
    const ended = await Promise.race<Ended>([
      waited.then((r) => ({ kind: 'exited', status: r.StatusCode })),
      new Promise<Ended>((resolve) => {
        timer = setTimeout(() => {
          resolve({ kind: 'timeout' });
        }, timeoutMs);
      }),
      new Promise<Ended>((resolve) => {
        cancel = () => {
          resolve({ kind: 'cancelled' });
        };
        if (ctx.signal.aborted) cancel();
        else ctx.signal.addEventListener('abort', onAbort, { once: true });
      }),
    ]).finally(() => {
      clearTimeout(timer);
      ctx.signal.removeEventListener('abort', onAbort);
    });

    if (ended.kind !== 'exited') {
      // SIGTERM first: the run restores the limits it changed before it is killed.
      await quietly(container.stop({ t: this.opts.stopGraceSeconds ?? 10 }));
      await waited.catch(() => undefined);
      if (ended.kind === 'cancelled') throw new FsbenchError('CANCELLED', 'the run was cancelled; its container was stopped and removed');
      throw new FsbenchError('TIMEOUT', `the run container did not finish within ${Math.round(timeoutMs / 1000)} s; it was stopped and removed`);
    }
    // The exit can be reported before the last bytes of output arrive.
    await Promise.race([drained, new Promise((r) => setTimeout(r, 5_000))]);

    const lastLine = stdout.text().trimEnd().split('\n').pop() ?? '';
    let json: unknown;
    try {
      json = JSON.parse(lastLine);
    } catch {
      json = undefined;
    }
    const parsed = SandboxOutput.safeParse(json);
    if (!parsed.success) {
      const state = await inspectContainer(this.docker, container.id).catch(() => null);
      const oom = state?.State.OOMKilled === true ? `; it ran out of memory (container.memory ${shape.memoryBytes} B)` : '';
      const tail = stderr.text().trim().split('\n').slice(-5).join(' | ');
      throw new FsbenchError(
        'SANDBOX_FAILED',
        `the run container exited with code ${ended.status} without a result${oom}${tail ? `: ${tail}` : ''}`,
      );
    }
    if (!parsed.data.ok) throw new FsbenchError(parsed.data.error.code, parsed.data.error.message);
    const outcome = parsed.data.outcome;
    return {
      metrics: outcome.metrics,
      ...(outcome.histograms ? { histograms: outcome.histograms } : {}),
      info: { ...outcome.info, sandboxImage: this.image.replace(/^sha256:/, '').slice(0, 12) },
      limits: outcome.limits,
      targetFs: outcome.targetFs,
    };
  }
}

/**
 * The sandbox an agent hands to `runCell` (as `RunContext.sandbox`), or null with the reason
 * logged when this process cannot reach a Docker engine (cells that ask for a container then
 * fail with SANDBOX_UNAVAILABLE).
 */
export async function connectSandbox(opts: SandboxOptions = {}): Promise<SandboxRunner | null> {
  try {
    return await SandboxRunner.connect(opts);
  } catch (err) {
    opts.log?.(`sandbox mode unavailable: ${toFsbenchError(err).message}`);
    return null;
  }
}
