/** The contract shared by the CLI, the agent and the coordinator. */
export * from './errors.js';
export * from './fingerprint.js';
export * from './matrix.js';
export * from './metrics.js';
export * from './params.js';
export * from './result.js';
export * from './units.js';
export * from './workloads/index.js';
