/**
 * A matrix's life: submitted (validated, estimated, placed, stored and queued at once), its runs
 * put on the queues and taken off again (dispatch), more runs for cells not yet precise enough
 * under `repetitions: auto` (plans), and where it stands (progress), in the answers' shapes
 * (answers: zod schemas, the source of their types and of the OpenAPI document's).
 */
export { Dispatcher, requestOf, type EnqueueRequest } from './dispatch.js';
export { estimateRunMs, planMatrix, type MatrixPlan } from './estimate.js';
export type { CoordinatorParts } from './parts.js';
export { afterStored, issuedOf, issuedRuns, judgeAll, plannedRuns, type NextRun } from './plans.js';
export { Cancelled, MachineProgress, MatrixDetail, MatrixList, MatrixSummary, PrecisionSummary, Progress, Submitted } from './answers.js';
export { detailOf, isFinal, ProgressHub, progressOf, summaryOf, type ProgressEvent } from './progress.js';
export { Submissions, type Limits, type SubmitAnswer, type SubmitDeps } from './submit.js';
