/**
 * The coordinator's recovery policy: what it queues again so that every matrix finishes whatever
 * stopped on the way, without running a stored run twice. Job ids are deterministic, so a job
 * still queued is never doubled, and runs already stored are skipped; a run whose report is
 * still on its way runs again, and the second report is ignored when stored.
 *
 * - At start: a previous coordinator may have died between storing a matrix and enqueueing all
 *   of it, or between storing a cell's last run and queueing its next; cells whose runs were all
 *   stored while nobody judged them are judged.
 * - After a failover, or a restart, of Redis: it may have lost writes it had acknowledged
 *   (replication and the append-only file's fsync are asynchronous): jobs queued, taken or
 *   finished. Nothing else would notice a queued job that vanished: its matrix would wait
 *   forever. Every unfinished matrix is queued again (tests/redis-sentinel.test.ts loses a
 *   matrix's jobs this way).
 * - When reports on a target's queue were lost before the collector read them: the unfinished
 *   matrices on that target are queued again.
 * - Under `repetitions: auto`, after runs are stored: the next run of each cell not precise enough
 *   yet, and when that cannot be queued (Redis away for a moment), its matrix again a little later.
 */
import { messageOf } from '../contract/errors.js';
import type { Log } from '../log/index.js';
import { onServerChange, type RedisConnection } from '../queue/redis.js';
import { afterStored, judgeAll, requestOf, type CoordinatorParts, type NextRun, type ProgressHub } from './matrices/index.js';
import type { StoredRun } from './store/index.js';

/** After a failed enqueue of a cell's next run (Redis away for a moment), when to requeue its matrix. */
const REQUEUE_RETRY_MS = 5_000;
/** Unfinished matrices looked at, in each state, when every one is queued again. */
const UNFINISHED_MAX = 1000;

export interface RecoveryDeps extends Pick<CoordinatorParts, 'store' | 'dispatcher'> {
  /** Told of the matrices whose cells stopped under `auto`. */
  readonly hub: ProgressHub;
  readonly log: Log;
}

export class Recovery {
  constructor(private readonly d: RecoveryDeps) {}

  /** Queues every run of a matrix that is not stored; nothing for a matrix that is not there. */
  async requeue(id: string, what: string): Promise<void> {
    const { store, dispatcher, log } = this.d;
    const m = store.getMatrix(id);
    if (!m) return;
    const added = await dispatcher.enqueue({ ...requestOf(store, m), skip: store.storedRunKeys(id) });
    store.markEnqueued(id);
    log(`matrix ${id}: ${what} (${added} jobs, existing ones kept)`, { event: 'matrix.requeued', matrixId: id, jobs: added });
  }

  /** At start: what a previous coordinator left unfinished. */
  async atStart(): Promise<void> {
    for (const id of this.d.store.notEnqueued()) await this.requeue(id, 'finished enqueueing after a restart');
    this.measureFurther(judgeAll(this.d.store));
  }

  /** After a batch of runs was stored: under `auto`, the next runs of the cells they belong to. */
  stored(runs: readonly StoredRun[]): void {
    this.measureFurther(afterStored(this.d.store, runs));
  }

  /** Reports on `target`'s queue were lost before they were read: its unfinished matrices queued again. */
  async reportsLost(target: string): Promise<void> {
    for (const m of this.unfinished()) {
      if (m.targets.some((t) => t.target === target)) await this.requeue(m.id, 'queued again the runs whose reports were lost');
    }
  }

  /** Watches which server answers for Redis; when it changes, every unfinished matrix is queued again. Returns the stop. */
  watchRedis(redis: RedisConnection, key: string): () => void {
    const { log } = this.d;
    return onServerChange(redis, key, (from, to) => {
      log(`Redis is another server now (run_id ${from.slice(0, 8)}... became ${to.slice(0, 8)}...: a failover or a restart), which may have lost its last writes: queueing again what unfinished matrices have not stored`, {
        event: 'redis.server-changed',
      });
      void (async () => {
        for (const m of this.unfinished()) {
          await this.requeue(m.id, 'queued again after Redis changed server').catch((err: unknown) => {
            log(`matrix ${m.id}: queueing again after Redis changed server failed (${messageOf(err)})`, { event: 'matrix.requeue-failed', matrixId: m.id });
          });
        }
      })();
    });
  }

  private unfinished() {
    return [...this.d.store.listMatrices(UNFINISHED_MAX, 'running'), ...this.d.store.listMatrices(UNFINISHED_MAX, 'queued')];
  }

  /**
   * Under `repetitions: auto`: queues the next run of each cell not yet precise enough (matrices/plans.ts),
   * and tells watchers of the matrices whose cells stopped. A run that cannot be queued now is
   * queued again by a requeue of its matrix a little later.
   */
  private measureFurther({ next, changed }: { next: readonly NextRun[]; changed: ReadonlySet<string> }): void {
    const { store, dispatcher, hub, log } = this.d;
    if (changed.size > 0) hub.changed(changed);
    for (const n of next) {
      const m = store.getMatrix(n.matrixId);
      const cell = store.cell(n.matrixId, n.cellId);
      if (!m || !cell || m.state === 'cancelled') continue;
      dispatcher.enqueueNext(n.matrixId, cell, n.target, n.repetition, m.spec.warmup).catch((err: unknown) => {
        log(`matrix ${n.matrixId}: queueing run ${n.repetition} of cell ${n.cellId} failed (${messageOf(err)}); trying again shortly`);
        setTimeout(() => {
          this.requeue(n.matrixId, 'queued again a run of a cell still being measured').catch(() => undefined);
        }, REQUEUE_RETRY_MS).unref();
      });
    }
  }
}
