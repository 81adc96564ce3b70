/**
 * Ingestion: results collected from Redis exactly once (the collector, checking that each report
 * names a run this coordinator issued, authenticated by an enrolled key), runs given up on hosts
 * that went away, and the versions of the live agents.
 */
export { Collector, type CollectorDeps } from './collector.js';
export { HostWatch, type HostWatchDeps } from './hosts.js';
export { DropLog, QUIET_MS } from './drop-log.js';
export { authenticate, type DropReason } from './verify.js';
export { AgentVersions } from './versions.js';
