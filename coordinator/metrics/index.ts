/** `GET /metrics`: the Prometheus registry and its route, and the coordinator's snapshot it reads at each scrape. */
export { createMetrics, type CoordinatorMetrics, type MetricsDeps, type MetricsSnapshot, type RunTiming } from './registry.js';
export { coordinatorMetrics, type MetricsSources } from './snapshot.js';
