/**
 * The HTTP edge every request passes, whichever route answers it: who may do what (auth), the
 * one error handler and its answers, the request's own logger, and the deadline on Redis calls
 * made while a client waits.
 */
export { describeAuth, principalOf, requireKnownHost, requireRead, requireWrite, type AuthConfig, type Principal } from './auth.js';
export { withDeadline } from './deadline.js';
export { describeError, errorHandler, type DescribedError, type ErrorBody } from './errors.js';
export { logTo, pathOf, withRequestLogger } from './request-log.js';
