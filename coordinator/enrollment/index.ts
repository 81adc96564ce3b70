/**
 * Enrollment: which agent keys the coordinator trusts, for which host, and on what proof (an
 * operator's approval or a one-time token); revocation, and the audit of every change; the
 * tokens themselves; the coordinator's report key.
 */
export { Enrollment, type EnrolledKey, type EnrollmentDeps } from './enrollment.js';
export { loadOrCreateReportKey } from './views.js';
export { MAX_TOKENS_PER_REQUEST } from './tokens.js';
