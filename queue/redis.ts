/** Redis connections as BullMQ needs them, for the coordinator, the agents and the benchmark. */
import { Redis } from 'ioredis';
import { FsbenchError } from '../contract/errors.js';

/**
 * `maxRetriesPerRequest: null` makes commands wait for a reconnect instead of failing, which
 * BullMQ workers require and which lets everything ride out a Redis restart.
 */
export function connectRedis(url: string, name: string): Redis {
  const redis = new Redis(url, { maxRetriesPerRequest: null, connectionName: name, enableReadyCheck: true });
  // Connection errors surface as failed or waiting commands, which their callers log once;
  // without a listener ioredis would print every reconnect attempt while Redis is away.
  redis.on('error', () => undefined);
  return redis;
}

const REDIS_START_WAIT_MS = 30_000;

/**
 * Waits for Redis at start (it may be starting alongside, as in a compose file), saying so in
 * the log, and stops the process with one line if it never answers.
 */
/** A Redis URL as it may be shown in a log or an error: its password, if any, replaced. */
export function shownUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== '') u.password = 'redacted';
    return u.toString();
  } catch {
    return '(the REDIS_URL given)';
  }
}

export async function awaitRedis(redis: Redis, rawUrl: string, log: (line: string) => void): Promise<void> {
  const url = shownUrl(rawUrl);
  const told = setTimeout(() => {
    log(`Redis at ${url} does not answer yet; waiting up to ${REDIS_START_WAIT_MS / 1000} s`);
  }, 2000);
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      redis.ping(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          reject(new FsbenchError('UNAVAILABLE', `cannot reach Redis at ${url} within ${REDIS_START_WAIT_MS / 1000} s: start it, or point REDIS_URL (--redis-url) at it`));
        }, REDIS_START_WAIT_MS);
      }),
    ]);
  } catch (err) {
    redis.disconnect();
    throw err;
  } finally {
    clearTimeout(told);
    clearTimeout(timer);
  }
}
