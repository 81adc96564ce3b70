/**
 * The API's routes, by resource: matrices (with their results, reports and progress events),
 * agents, compare and gate, uploads, history (the costly reads computed off the event loop, within
 * limits: reads), the dashboard's files, and the OpenAPI document that describes them all.
 */
export { agentsRouter, type AgentsDeps } from './agents.js';
export { compareRouter, resultsUploadRouter, type CompareRouteDeps, type UploadRouteDeps } from './compare.js';
export { dashboardRouter, type DashboardDeps } from './dashboard.js';
export { historyRouter, type HistoryRouteDeps } from './history.js';
export { matricesRouter, type MatricesDeps } from './matrices.js';
export { openApiDocument } from './openapi.js';
export { probesRouter, type ProbeDeps } from './probes.js';
export { Reads, type ReadSettings } from './reads.js';
export { RESULTS_PAGE_DEFAULT, resultsHandler } from './results.js';
