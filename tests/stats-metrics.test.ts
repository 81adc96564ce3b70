/** `GET /metrics` in the Prometheus text format, read at scrape time from the coordinator's state. */
import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMetrics, type MetricsSnapshot } from '../coordinator/metrics/index.js';

describe('GET /metrics', () => {
  let snapshot: MetricsSnapshot = { queueDepth: 7, runsByState: { ok: 10, failed: 2, skipped: 1 }, matricesByState: { running: 1, done: 3 }, liveAgents: 2 };
  let scrapes = 0;
  const metrics = createMetrics({
    snapshot: () => {
      scrapes++;
      return snapshot;
    },
  });
  const app = express().use(metrics.router);
  let server: Server;
  let url = '';
  beforeAll(async () => {
    server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`;
  });
  afterAll(() => {
    server.close();
  });

  it('exports queue depth, runs and matrices by state, live agents and run durations', async () => {
    metrics.observeRun({ workload: 'inotify', state: 'ok', startedAt: '2026-01-01T00:00:00.000Z', finishedAt: '2026-01-01T00:00:03.500Z' });
    metrics.observeRun({ workload: 'inotify', state: 'ok', startedAt: '2026-01-01T00:00:00.000Z', finishedAt: '2026-01-01T00:00:00.050Z' });
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    const text = await res.text();
    expect(text).toContain('fsbench_queue_depth 7');
    expect(text).toContain('fsbench_runs{state="ok"} 10');
    expect(text).toContain('fsbench_runs{state="failed"} 2');
    expect(text).toContain('fsbench_matrices{state="done"} 3');
    expect(text).toContain('fsbench_matrices{state="queued"} 0');
    expect(text).toContain('fsbench_live_agents 2');
    expect(text).toContain('fsbench_run_duration_seconds_count{workload="inotify",state="ok"} 2');
    expect(text).toContain('fsbench_run_duration_seconds_bucket{le="0.1",workload="inotify",state="ok"} 1');
    expect(text).toContain('fsbench_run_duration_seconds_sum{workload="inotify",state="ok"} 3.55');
    expect(text).toContain('fsbench_process_cpu_seconds_total');
    // One snapshot per scrape, however many gauges read it.
    expect(scrapes).toBe(1);
  });

  it('reads fresh values at every scrape', async () => {
    snapshot = { ...snapshot, queueDepth: 0, liveAgents: 0 };
    const text = await (await fetch(url)).text();
    expect(text).toContain('fsbench_queue_depth 0');
    expect(text).toContain('fsbench_live_agents 0');
    expect(scrapes).toBe(2);
  });
});
