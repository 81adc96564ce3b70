/**
 * A stored matrix's report, built off the event loop once per matrix version and kept in each
 * rendering; the worker threads that build it, which other work that would stall the event loop
 * shares; and a stored run as the results answer shows it beside the report.
 */
export { OffThread, serveJobs, type Done, type Handlers } from './off-thread.js';
export { matrixReport, renderReport, ReportCache, type Rendering } from './report-cache.js';
export { runJson, runView, RunView } from './run-view.js';
