/**
 * Enrollment: which agent keys the coordinator trusts, for which host, and on what proof (an
 * operator's approval or a one-time token); the tokens themselves; the coordinator's report key.
 */
export { Enrollment, loadOrCreateReportKey, MAX_TOKENS_PER_REQUEST, type EnrolledKey, type EnrollmentDeps } from './enrollment.js';
