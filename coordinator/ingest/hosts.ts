/**
 * Hosts that go away. Runs placed on one host (`all`, `{labels}`) wait in that host's queue,
 * and only that host's agents take them. A host whose agents are all gone for longer than
 * FSBENCH_HOST_TIMEOUT (a rebooted machine comes back as another host: its boot id is new) has
 * its runs given up: removed from its queue and stored as failed runs that say why, so the
 * matrix finishes and shows what is missing instead of waiting forever. Runs already completed
 * are left to the collector, and runs that some agent of the host still holds stay held.
 * Every time here is the Redis server's (see queue/registry.ts): a coordinator whose clock jumps gives
 * up no host early, and an agent's clock keeps no host alive.
 */
import { readRegistry, type AgentStatus } from '../../queue/registry.js';
import { formatDuration } from '../../contract/units.js';
import { maxRepetitions } from '../../contract/matrix.js';
import { afterStored, issuedRuns, plannedRuns, type CoordinatorParts } from '../matrices/index.js';
import { ANY_TARGET, jobId } from '../../queue/jobs.js';
import { cellTargetKey, runKey, type MatrixRecord, type StoredRun } from '../store/index.js';

export interface HostWatchDeps extends CoordinatorParts {
  /** FSBENCH_HOST_TIMEOUT, in ms. */
  readonly timeoutMs: number;
  readonly onChange: (matrixIds: ReadonlySet<string>) => void;
  readonly log: (line: string) => void;
  /** The live agents at each check, for whoever else watches them (their versions). */
  readonly onLive?: (agents: readonly AgentStatus[]) => void;
}

/** Matrices looked at per check: the unfinished ones, newest first. */
const MATRICES_PER_CHECK = 1000;

export class HostWatch {
  /**
   * Host -> until when (Redis server time) one of its agents was live: its last beat plus its
   * ttl, so the timeout counts from when the host went silent, not from the check that noticed.
   * A host never seen counts from when it was first looked for.
   */
  private readonly lastSeen = new Map<string, number>();

  constructor(private readonly deps: HostWatchDeps) {}

  /** One look at the hosts of unfinished matrices; gives up the runs of those gone too long. */
  async check(): Promise<void> {
    const { store } = this.deps;
    const registry = await readRegistry(this.deps.redis, this.deps.prefix);
    const now = registry.serverNow;
    this.deps.onLive?.(registry.live);
    const live = new Map<string, number>();
    for (const a of registry.live) live.set(a.hostId, Math.max(live.get(a.hostId) ?? 0, Date.parse(a.lastHeartbeat) + a.ttlMs));
    const unfinished = [...store.listMatrices(MATRICES_PER_CHECK, 'running'), ...store.listMatrices(MATRICES_PER_CHECK, 'queued')];
    const watched = new Set<string>();
    const changed = new Set<string>();
    for (const m of unfinished) {
      for (const t of m.targets) {
        if (t.target === ANY_TARGET) continue;
        watched.add(t.target);
        const liveUntil = live.get(t.target);
        if (liveUntil !== undefined) this.lastSeen.set(t.target, liveUntil);
        else if (!this.lastSeen.has(t.target)) this.lastSeen.set(t.target, now);
        const seen = this.lastSeen.get(t.target) ?? now;
        if (now - seen <= this.deps.timeoutMs) continue;
        const given = await this.giveUp(m, t.target, t.machine ?? t.target);
        if (given > 0) {
          changed.add(m.id);
          this.deps.log(`matrix ${m.id}: ${given} runs on ${t.machine ?? t.target} given up, no agent of that host for ${formatDuration(now - seen)}`);
        }
      }
    }
    // Forget hosts no unfinished matrix waits for, so the map stays as small as the work.
    for (const host of this.lastSeen.keys()) if (!watched.has(host)) this.lastSeen.delete(host);
    if (changed.size > 0) this.deps.onChange(changed);
  }

  private async giveUp(m: MatrixRecord, target: string, machine: string): Promise<number> {
    const { store, dispatcher } = this.deps;
    const stored = store.storedRunKeys(m.id);
    const q = dispatcher.queue(target);
    const runs: StoredRun[] = [];
    const message = `the run was given up: no agent of host ${machine} (${target}) was live for ${formatDuration(this.deps.timeoutMs)} (FSBENCH_HOST_TIMEOUT)`;
    const planned = plannedRuns(store, m);
    for (const cell of store.cells(m.id)) {
      const issued = issuedRuns(maxRepetitions(m.spec), planned?.get(cellTargetKey(cell.id, target)));
      for (let repetition = 0; repetition < issued; repetition++) {
        if (stored.has(runKey(cell.id, target, repetition))) continue;
        if (!(await dispatcher.removeUnfinished(q, jobId(m.id, cell.id, target, repetition)))) continue;
        runs.push({ kind: 'gave-up', code: 'ABANDONED', matrixId: m.id, target, cell, repetition, machine, message, attempts: 0 });
      }
    }
    store.storeRuns(runs);
    // A cell under `repetitions: auto` with a run given up stops there (matrices/plans.ts).
    afterStored(store, runs);
    return runs.length;
  }
}
