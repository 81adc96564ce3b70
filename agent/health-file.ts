/**
 * The agent's health as a file whose modification time says when the agent last reached Redis
 * (FSBENCH_HEALTH_FILE). A container healthcheck reads its age and needs nothing else: before,
 * it asked the coordinator's API whether it listed the agent, and so every agent container held
 * the coordinator's bearer token, which also lets whoever reads it submit matrices that agents
 * run as root. The file says nothing secret; it is removed when the agent stops.
 *
 * Its content says the state: `{"ok":true,...}` while Redis is reachable; while it is not,
 * `{"ok":false,"reason":...,"since":...}` with the modification time left at the last moment
 * Redis answered, so a healthcheck reading the age and a person reading the file agree.
 */
import { rename, rm, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { messageOf } from '../contract/errors.js';
import type { RedisHealthView } from '../queue/redis-health.js';

export interface HealthFileOptions {
  /** Where the file goes; its directory must exist. */
  readonly file: string;
  readonly intervalMs: number;
  /** Whether Redis is reachable now (the agent's RedisHealth, which probes it). */
  readonly redis: () => RedisHealthView;
  readonly log: (line: string) => void;
}

export interface HealthFile {
  /** Stops the updates and removes the file, so that a stopping agent is no longer healthy. */
  stop(): Promise<void>;
}

/** Writes the file at once, then every `intervalMs` while Redis is reachable, and once when it is lost. */
export async function startHealthFile(o: HealthFileOptions): Promise<HealthFile> {
  // Written beside the file and renamed over it: a healthcheck never reads a half-written one.
  const temp = path.join(path.dirname(o.file), `.${path.basename(o.file)}.${String(process.pid)}.tmp`);
  let lastReached = new Date();
  /** The outage already written down (its `since`), so the file is not rewritten at each tick. */
  let written: string | undefined;
  let failing = false;
  const update = async () => {
    const redis = o.redis();
    try {
      if (redis.reachable) {
        lastReached = new Date();
        await writeFile(temp, `${JSON.stringify({ ok: true, pid: process.pid, at: lastReached.toISOString() })}\n`, { mode: 0o644 });
        written = undefined;
      } else {
        if (written === redis.since) return;
        await writeFile(temp, `${JSON.stringify({ ok: false, pid: process.pid, at: lastReached.toISOString(), reason: redis.reason, since: redis.since })}\n`, { mode: 0o644 });
        await utimes(temp, lastReached, lastReached);
        written = redis.since;
      }
      await rename(temp, o.file);
      if (failing) o.log(`health file ${o.file}: updated again`);
      failing = false;
    } catch (err) {
      if (!failing) o.log(`health file ${o.file} not updated: ${messageOf(err)}`);
      failing = true;
    }
  };
  let updating: Promise<void> | undefined = update();
  await updating;
  updating = undefined;
  const timer = setInterval(() => {
    updating ??= update().finally(() => {
      updating = undefined;
    });
  }, o.intervalMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await updating;
      await rm(o.file, { force: true });
      await rm(temp, { force: true });
    },
  };
}
