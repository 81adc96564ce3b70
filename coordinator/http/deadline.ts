/** Redis calls on a request path answer in time, or the request fails with 503 and a Retry-After. */
import { FsbenchError } from '../../contract/errors.js';
import { formatDuration } from '../../contract/units.js';

/** Give up after this long rather than hang while Redis is away. */
const REDIS_DEADLINE_MS = 10_000;

export async function withDeadline<T>(p: Promise<T>, what: string, ms = REDIS_DEADLINE_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      reject(new FsbenchError('UNAVAILABLE', `${what}: Redis did not answer within ${formatDuration(ms)}`, [], { 'Retry-After': '10' }));
    }, ms);
  });
  try {
    return await Promise.race([p, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
