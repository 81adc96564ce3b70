/**
 * The HTTP edge every request passes, whichever route answers it: who may do what (auth), the
 * edge's handlers before and after every route, the one body parser, the one error handler and
 * its answers, the request's own logger, slots for long answers, and the deadline on Redis calls
 * made while a client waits.
 */
export { describeAuth, principalOf, requireRead, requireWrite, unguarded, type AuthConfig, type Principal } from './auth.js';
export { matrixOf, readBody, type BodyKind } from './body.js';
export { withDeadline } from './deadline.js';
export { edgeIn, edgeOut, readLimiter, type EdgeOptions } from './edge.js';
export { absent, describeError, errorHandler, type DescribedError, type ErrorBody } from './errors.js';
export { logTo } from './request-log.js';
export { Slots } from './slots.js';
