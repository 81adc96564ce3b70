/**
 * A stored matrix's report, built off the event loop and kept per matrix version in each
 * rendering, and a stored run as the results answer shows it beside the report.
 */
export { matrixReport, renderReport, ReportCache, type Rendering } from './report-cache.js';
export { runJson, runView, RunView } from './run-view.js';
