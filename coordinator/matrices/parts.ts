import type { RedisConnection } from '../../queue/redis.js';
import type { Store } from '../store/index.js';
import type { Dispatcher } from './dispatch.js';

/**
 * The parts most of a coordinator's modules work with, named alike in each module's deps: a
 * module's deps extend these (or pick from them) rather than restate them.
 */
export interface CoordinatorParts {
  /** The database. */
  readonly store: Store;
  /** The queues. */
  readonly dispatcher: Dispatcher;
  /** The connection the API and the queues share. */
  readonly redis: RedisConnection;
  /** FSBENCH_QUEUE_PREFIX: every Redis key's. */
  readonly prefix: string;
}
