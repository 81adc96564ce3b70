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
 *
 * The agent runs as root: its directory passes the rules of the scratch directory (host/safe-dir.ts)
 * and each version is created anew (O_EXCL, never through a symlink) before it is renamed over
 * the file, so nothing another user plants there is written through.
 */
import { rename, rm, utimes } from 'node:fs/promises';
import path from 'node:path';
import { messageOf } from '../contract/errors.js';
import { ensureSafeDir, writeOwnFile, type DirPurpose } from '../host/safe-dir.js';
import type { RedisHealthView } from '../queue/redis-health.js';

export interface HealthFileOptions {
  /** Where the file goes; its directory is created (0700) when missing, and must be one only root (or this user) controls. */
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

const HEALTH_PURPOSE: DirPurpose = { what: "the health file's directory", setting: 'FSBENCH_HEALTH_FILE' };

/** Writes the file at once, then every `intervalMs` while Redis is reachable, and once when it is lost. */
export async function startHealthFile(o: HealthFileOptions): Promise<HealthFile> {
  const dir = await ensureSafeDir(path.dirname(path.resolve(o.file)), HEALTH_PURPOSE);
  const file = path.join(dir, path.basename(o.file));
  // Written beside the file and renamed over it: a healthcheck never reads a half-written one.
  const tempName = `.${path.basename(file)}.${String(process.pid)}.tmp`;
  const temp = path.join(dir, tempName);
  /** A fresh file each time: whatever is in its place (a leftover, a planted symlink) is unlinked, not followed. */
  const writeTemp = async (text: string) => {
    await rm(temp, { force: true });
    await writeOwnFile(dir, tempName, text, 0o644);
  };
  let lastReached = new Date();
  /** The outage already written down (its `since`), so the file is not rewritten at each tick. */
  let written: string | undefined;
  let failing = false;
  const update = async () => {
    const redis = o.redis();
    try {
      if (redis.reachable) {
        lastReached = new Date();
        await writeTemp(`${JSON.stringify({ ok: true, pid: process.pid, at: lastReached.toISOString() })}\n`);
        written = undefined;
      } else {
        if (written === redis.since) return;
        await writeTemp(`${JSON.stringify({ ok: false, pid: process.pid, at: lastReached.toISOString(), reason: redis.reason, since: redis.since })}\n`);
        await utimes(temp, lastReached, lastReached);
        written = redis.since;
      }
      await rename(temp, file);
      if (failing) o.log(`health file ${file}: updated again`);
      failing = false;
    } catch (err) {
      if (!failing) o.log(`health file ${file} not updated: ${messageOf(err)}`);
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
      await rm(file, { force: true });
      await rm(temp, { force: true });
    },
  };
}
