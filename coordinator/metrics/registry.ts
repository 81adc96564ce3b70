/**
 * `GET /metrics` in the Prometheus text format (prom-client): queue depth, stored runs by
 * state, matrices by state, live agents, and the distribution of run durations. Gauges are read
 * from the coordinator at scrape time, so they are never stale or double-counted; durations
 * are observed as runs are stored. Each call builds its own registry, so two coordinators in
 * one process (tests) do not share series.
 */
import { Router, type RequestHandler } from 'express';
import { collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { unguarded } from '../http/index.js';

export interface MetricsSnapshot {
  /** Runs waiting in the queues. */
  readonly queueDepth: number;
  /** Stored runs per state, over all matrices. */
  readonly runsByState: Readonly<Record<'ok' | 'failed' | 'skipped', number>>;
  readonly matricesByState: Readonly<Partial<Record<'queued' | 'running' | 'done' | 'cancelled', number>>>;
  readonly liveAgents: number;
  /** Live agents whose fsbench version is not the coordinator's. */
  readonly liveAgentsOtherVersion?: number;
  /** Times the live agents' watchdogs recreated their workers (agent/watchdog.ts), summed. */
  readonly workerRestarts?: number;
  /** Jobs agents refused, by error code (JOB_MISROUTED, JOB_EXPIRED, ...), since Redis was new. */
  readonly refusedJobs?: Readonly<Record<string, number>>;
  /** Agent keys enrolled, waiting for enrollment, and revoked. */
  readonly agentKeys?: { readonly enrolled: number; readonly pending: number; readonly revoked: number };
}

export interface MetricsDeps {
  /** Read at every scrape. */
  readonly snapshot: () => MetricsSnapshot | Promise<MetricsSnapshot>;
  /**
   * The coordinator's read guard (requireRead), so FSBENCH_READ_AUTH=token closes /metrics too;
   * Prometheus sends the token with `authorization: { credentials_file: ... }` in its scrape
   * config. Open when omitted.
   */
  readonly read?: RequestHandler;
  /** The coordinator's fsbench version, as `fsbench_build_info{version}`; none when omitted. */
  readonly version?: string;
  /** Also export Node's process metrics (event loop lag, heap, GC); default true. */
  readonly processMetrics?: boolean;
}

/** What a stored run tells the duration histogram. */
export interface RunTiming {
  readonly workload: string;
  readonly state: 'ok' | 'failed' | 'skipped';
  readonly startedAt: string;
  readonly finishedAt: string;
}

export interface CoordinatorMetrics {
  readonly router: Router;
  readonly registry: Registry;
  /** Call once per run as it is stored. */
  observeRun(run: RunTiming): void;
}

/**
 * Run durations span 100 ms noop runs to 10-minute metadata runs; buckets from 0.1 s doubling
 * to about 27 min keep each within a factor of two.
 */
const DURATION_BUCKETS = Array.from({ length: 15 }, (_, i) => 0.1 * 2 ** i);

export function createMetrics(deps: MetricsDeps): CoordinatorMetrics {
  const registry = new Registry();
  if (deps.processMetrics ?? true) collectDefaultMetrics({ register: registry, prefix: 'fsbench_' });
  let pending: Promise<MetricsSnapshot> | null = null;
  // One snapshot per scrape, shared by every gauge's collect().
  const snapshot = () => (pending ??= Promise.resolve(deps.snapshot()));

  new Gauge({
    name: 'fsbench_queue_depth',
    help: 'Runs waiting in the queues for an agent.',
    registers: [registry],
    async collect() {
      this.set((await snapshot()).queueDepth);
    },
  });
  new Gauge({
    name: 'fsbench_runs',
    help: 'Stored runs by state.',
    labelNames: ['state'] as const,
    registers: [registry],
    async collect() {
      const s = await snapshot();
      for (const state of ['ok', 'failed', 'skipped'] as const) this.set({ state }, s.runsByState[state]);
    },
  });
  new Gauge({
    name: 'fsbench_matrices',
    help: 'Matrices by state.',
    labelNames: ['state'] as const,
    registers: [registry],
    async collect() {
      const s = await snapshot();
      for (const state of ['queued', 'running', 'done', 'cancelled'] as const) this.set({ state }, s.matricesByState[state] ?? 0);
    },
  });
  if (deps.version !== undefined) {
    // The Prometheus convention for what is running: a constant 1, the facts in labels.
    new Gauge({ name: 'fsbench_build_info', help: 'The fsbench version and Node.js release of this coordinator: always 1.', labelNames: ['version', 'node'] as const, registers: [registry] }).set(
      { version: deps.version, node: process.version },
      1,
    );
  }
  new Gauge({
    name: 'fsbench_live_agents_other_version',
    help: "Live agents whose fsbench version is not this coordinator's (each also logged once, event agent.version-differs).",
    registers: [registry],
    async collect() {
      this.set((await snapshot()).liveAgentsOtherVersion ?? 0);
    },
  });
  new Gauge({
    name: 'fsbench_live_agents',
    help: 'Agents whose heartbeat is current.',
    registers: [registry],
    async collect() {
      this.set((await snapshot()).liveAgents);
    },
  });
  new Gauge({
    // Each agent counts its own and says so in its heartbeat: a sum over the live ones, so it
    // drops when an agent that restarted its workers goes away.
    name: 'fsbench_agent_worker_restarts',
    help: "Times the live agents' watchdogs recreated their workers and connections: runs waited, the agent was idle, and it took none for twice the stall timeout.",
    registers: [registry],
    async collect() {
      this.set((await snapshot()).workerRestarts ?? 0);
    },
  });
  new Gauge({
    // A counter kept in Redis by the agents, read at each scrape: hence a gauge that only grows.
    name: 'fsbench_jobs_refused_total',
    help: 'Signed jobs agents refused without running them (copied under another id or queue, expired, replayed, of a cancelled matrix), by error code.',
    labelNames: ['code'] as const,
    registers: [registry],
    async collect() {
      for (const [code, n] of Object.entries((await snapshot()).refusedJobs ?? {})) this.set({ code }, n);
    },
  });
  new Gauge({
    name: 'fsbench_agent_keys',
    help: 'Agent keys by enrollment state: enrolled, waiting for `fsbench agents approve`, or revoked.',
    labelNames: ['state'] as const,
    registers: [registry],
    async collect() {
      const keys = (await snapshot()).agentKeys;
      if (!keys) return;
      this.set({ state: 'enrolled' }, keys.enrolled);
      this.set({ state: 'pending' }, keys.pending);
      this.set({ state: 'revoked' }, keys.revoked);
    },
  });
  const durations = new Histogram({
    name: 'fsbench_run_duration_seconds',
    help: 'Wall-clock duration of stored runs, from start to finish.',
    labelNames: ['workload', 'state'] as const,
    buckets: DURATION_BUCKETS,
    registers: [registry],
  });

  const router = Router();
  router.get('/metrics', deps.read ?? unguarded, async (_req, res) => {
    try {
      const text = await registry.metrics();
      res.type(registry.contentType).send(text);
    } finally {
      pending = null;
    }
  });

  return {
    router,
    registry,
    observeRun(run) {
      const seconds = (Date.parse(run.finishedAt) - Date.parse(run.startedAt)) / 1000;
      if (Number.isFinite(seconds) && seconds >= 0) durations.observe({ workload: run.workload, state: run.state }, seconds);
    },
  };
}
