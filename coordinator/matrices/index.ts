/**
 * A matrix's life: submitted (validated, estimated, placed, stored and queued at once), its runs
 * put on the queues and taken off again (dispatch), more runs for cells not yet precise enough
 * under `repetitions: auto` (plans), and where it stands (progress).
 */
export { Dispatcher, requestOf, type EnqueueRequest } from './dispatch.js';
export { estimateRunMs, planMatrix, type MatrixPlan } from './estimate.js';
export type { CoordinatorParts } from './parts.js';
export { afterStored, issuedOf, issuedRuns, judgeAll, plannedRuns, type NextRun, type PrecisionSummary } from './plans.js';
export { detailOf, isFinal, ProgressHub, progressOf, summaryOf, type MachineProgress, type MatrixSummary, type Progress, type ProgressEvent } from './progress.js';
export { Submissions, type Limits, type SubmitAnswer, type SubmitDeps } from './submit.js';
