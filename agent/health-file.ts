/**
 * The agent's health as a file whose modification time says when the agent last reached Redis
 * (FSBENCH_HEALTH_FILE). A container healthcheck reads its age and needs nothing else: before,
 * it asked the coordinator's API whether it listed the agent, and so every agent container held
 * the coordinator's bearer token, which also lets whoever reads it submit matrices that agents
 * run as root. The file says nothing secret; it is removed when the agent stops.
 */
import { rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { messageOf } from '../contract/errors.js';

export interface HealthFileOptions {
  /** Where the file goes; its directory must exist. */
  readonly file: string;
  readonly intervalMs: number;
  /** Resolves when the agent is healthy (Redis answers); a rejection leaves the file as old as it is. */
  readonly check: () => Promise<void>;
  readonly log: (line: string) => void;
}

export interface HealthFile {
  /** Stops the updates and removes the file, so that a stopping agent is no longer healthy. */
  stop(): Promise<void>;
}

/** Writes the file at once when the check passes, then every `intervalMs` while it passes. */
export async function startHealthFile(o: HealthFileOptions): Promise<HealthFile> {
  // Written beside the file and renamed over it: a healthcheck never reads a half-written one.
  const temp = path.join(path.dirname(o.file), `.${path.basename(o.file)}.${String(process.pid)}.tmp`);
  let failing = false;
  const update = async () => {
    try {
      await o.check();
      await writeFile(temp, `${JSON.stringify({ pid: process.pid, at: new Date().toISOString() })}\n`, { mode: 0o644 });
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
