/**
 * Redis as fsbench needs it, checked when the coordinator starts: the queued runs, the reports
 * not yet collected and the enrolled keys live only in Redis.
 *
 * An evicting `maxmemory-policy` lets Redis delete any of them silently when it runs out of
 * memory (a queued run vanishes and its matrix never finishes; BullMQ's production guide asks
 * for `noeviction`), so the coordinator refuses it. Persistence is a trade-off the operator
 * makes, so it is only said: what a restart of this Redis would lose.
 *
 * Managed Redis often renames or disables CONFIG: then the policy is read from INFO memory, and
 * what cannot be read is logged as unchecked, never guessed.
 */
import type { Redis } from 'ioredis';
import { z } from 'zod';
import { FsbenchError, messageOf } from '../contract/errors.js';
import type { HealthLog } from './redis-health.js';

/** CONFIG GET's answer: names and values, alternating. */
const ConfigReply = z.array(z.string());

/** `name:value` lines of an INFO section. */
function infoFields(text: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    const i = line.indexOf(':');
    if (i > 0 && !line.startsWith('#')) fields.set(line.slice(0, i), line.slice(i + 1).trim());
  }
  return fields;
}

async function configGet(redis: Redis, name: string): Promise<string> {
  const reply = ConfigReply.parse(await redis.call('CONFIG', 'GET', name));
  const value = reply[1];
  if (reply[0] !== name || value === undefined) throw new Error(`CONFIG GET ${name} answered ${JSON.stringify(reply).slice(0, 100)}`);
  return value;
}

/** What the coordinator found, for the log line (and the tests). */
export interface RedisSettings {
  /** `maxmemory-policy`, or null when neither CONFIG nor INFO said. */
  readonly maxmemoryPolicy: string | null;
  readonly appendonly: boolean | null;
  readonly appendfsync: string | null;
  /** `save`'s schedule ('' when RDB snapshots are off), or null when CONFIG is not allowed. */
  readonly save: string | null;
  /** Seconds since the last RDB save, from INFO persistence. */
  readonly secondsSinceSave: number | null;
  /** What a restart of this Redis would lose, in words. */
  readonly restartLoses: string;
  /** Set when CONFIG could not be used: why (renamed, refused to this user). */
  readonly unchecked: string | null;
}

function restartLoses(s: Omit<RedisSettings, 'restartLoses' | 'unchecked'>): string {
  if (s.appendonly === true) {
    if (s.appendfsync === 'always') return 'nothing acknowledged (AOF, appendfsync always)';
    if (s.appendfsync === 'no') return 'the writes the operating system had not flushed yet, up to about 30 s (AOF, appendfsync no)';
    if (s.appendfsync === 'everysec') return 'about the last second of writes (AOF, appendfsync everysec)';
    return 'the writes not yet synced to the append-only file (AOF, appendfsync not readable)';
  }
  if (s.appendonly === null) return 'unknown: its persistence settings could not be read';
  const since = s.secondsSinceSave === null ? '' : `, the last ${s.secondsSinceSave} s ago`;
  if (s.save === '') {
    return 'everything: queued runs, reports not yet collected, enrolled agents (no AOF, no RDB snapshots); run it with --appendonly yes';
  }
  if (s.save === null) return `every write since the last RDB snapshot${since} (no AOF; the snapshot schedule could not be read); run it with --appendonly yes`;
  return `every write since the last RDB snapshot${since} (no AOF; save ${s.save}); run it with --appendonly yes to lose about a second at most`;
}

/**
 * Reads the settings, refuses an evicting policy (REDIS_EVICTS), and logs one line saying what
 * was found and what a restart would lose. `url` is the Redis as a log may show it.
 */
export async function checkRedisSettings(redis: Redis, url: string, log: HealthLog): Promise<RedisSettings> {
  let unchecked: string | null = null;
  let policy: string | null = null;
  let appendonly: boolean | null = null;
  let appendfsync: string | null = null;
  let save: string | null = null;
  try {
    policy = await configGet(redis, 'maxmemory-policy');
    appendonly = (await configGet(redis, 'appendonly')) === 'yes';
    appendfsync = await configGet(redis, 'appendfsync');
    save = await configGet(redis, 'save');
  } catch (err) {
    // Renamed or disabled (managed Redis), or refused to this ACL user: INFO still tells much.
    unchecked = `CONFIG GET is not allowed (${messageOf(err).replace(/\s+/g, ' ').slice(0, 160)})`;
  }
  let secondsSinceSave: number | null = null;
  try {
    const memory = infoFields(z.string().parse(await redis.info('memory')));
    policy ??= memory.get('maxmemory_policy') ?? null;
    const persistence = infoFields(z.string().parse(await redis.info('persistence')));
    const aof = persistence.get('aof_enabled');
    if (appendonly === null && aof !== undefined) appendonly = aof === '1';
    const last = Number(persistence.get('rdb_last_save_time'));
    if (Number.isFinite(last) && last > 0) secondsSinceSave = Math.max(0, Math.round(Date.now() / 1000 - last));
  } catch (err) {
    unchecked = `${unchecked ?? 'CONFIG was not asked'}; INFO failed too (${messageOf(err).replace(/\s+/g, ' ').slice(0, 160)})`;
  }
  if (policy !== null && policy !== 'noeviction') {
    throw new FsbenchError(
      'REDIS_EVICTS',
      `Redis at ${url} has maxmemory-policy ${policy}: when full it would delete keys, queued runs and uncollected reports among them, without a word. ` +
        'Set maxmemory-policy noeviction (redis-server --maxmemory-policy noeviction, or CONFIG SET maxmemory-policy noeviction and CONFIG REWRITE; on a managed Redis, in its parameter group), then start the coordinator again',
    );
  }
  const found = { maxmemoryPolicy: policy, appendonly, appendfsync, save, secondsSinceSave };
  const settings: RedisSettings = { ...found, restartLoses: restartLoses(found), unchecked };
  const policyWords = policy === null ? 'maxmemory-policy unknown (could not be read: make sure it is noeviction)' : 'maxmemory-policy noeviction';
  log(`Redis at ${url}: ${policyWords}; a restart of it would lose ${settings.restartLoses}${unchecked === null ? '' : `; not all checked: ${unchecked}`}`, {
    event: 'redis.settings',
    url,
    ...settings,
  });
  return settings;
}
