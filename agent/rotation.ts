/**
 * Key rotation on the agent's side. Asked by its approval (`fsbench agents rotate`) or by its
 * key's age (FSBENCH_KEY_MAX_AGE), an enrolled agent stops taking runs once the one in hand is
 * done, makes a new key pair, and announces the new key signed over by the old one
 * (queue/enrollment.ts rotationStatement). The coordinator enrolls the new key for the same host
 * and machine and revokes the old one in one step; the agent then moves the new key into place and
 * takes runs again.
 *
 * The new key is written to `*.next.pem` files (same rules as every key file: O_EXCL, O_NOFOLLOW,
 * 0600) before it is announced, so an agent that dies meanwhile finds it at its next start, and
 * agents of one host (which share a key) make and announce the same one. It is moved into place by
 * rename, report key first: a signing key left in `*.next.pem` always has its report key beside it
 * or already in place.
 */
import { lstat, rename } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { errnoOf, FsbenchError, messageOf } from '../contract/errors.js';
import { reportMacKey } from '../queue/enrollment.js';
import { agentKeysKey } from '../queue/keys.js';
import type { RedisConnection } from '../queue/redis.js';
import type { HealthLog } from '../queue/redis-health.js';
import { loadOrCreatePrivateKey, type JobVerifier } from '../queue/signing.js';
import { AGENT_KEY_FILE, AGENT_REPORT_KEY_FILE, announcementOf, coordinatorReportKey, currentApproval, identityOf, loadOrCreateAgentKey, type AgentIdentity } from './identity.js';

const NEXT_KEY_FILE = 'agent-key.next.pem';
const NEXT_REPORT_KEY_FILE = 'agent-report-key.next.pem';
/** How often the new key is announced again while the coordinator has not enrolled it. */
const ANNOUNCE_EVERY_MS = 10_000;

async function exists(file: string): Promise<boolean> {
  try {
    await lstat(file);
    return true;
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return false;
    throw err;
  }
}

/** Whether a rotation was begun in `stateDir` and not finished (its new key not yet in place). */
export function rotationBegun(stateDir: string): Promise<boolean> {
  return exists(path.join(stateDir, NEXT_KEY_FILE));
}

/** The new key pair, made if missing (report key first), or the one a rotation begun earlier made. */
async function loadOrCreateNextKey(stateDir: string): Promise<AgentIdentity> {
  const nextReport = path.join(stateDir, NEXT_REPORT_KEY_FILE);
  if (!(await rotationBegun(stateDir))) await loadOrCreatePrivateKey(nextReport, 'x25519', 'new agent report key');
  const privateKey = await loadOrCreatePrivateKey(path.join(stateDir, NEXT_KEY_FILE), 'ed25519', 'new agent key');
  // Moved into place already by an agent that died before moving the signing key.
  const reportFile = (await exists(nextReport)) ? nextReport : path.join(stateDir, AGENT_REPORT_KEY_FILE);
  return identityOf(privateKey, await loadOrCreatePrivateKey(reportFile, 'x25519', 'new agent report key'));
}

/** Moves the new key into place, report key first; a move another agent of the host made already is no failure. */
async function promoteNextKey(stateDir: string): Promise<AgentIdentity> {
  for (const [from, to] of [[NEXT_REPORT_KEY_FILE, AGENT_REPORT_KEY_FILE], [NEXT_KEY_FILE, AGENT_KEY_FILE]] as const) {
    await rename(path.join(stateDir, from), path.join(stateDir, to)).catch((err: unknown) => {
      if (errnoOf(err) !== 'ENOENT') throw err;
    });
  }
  return loadOrCreateAgentKey(stateDir);
}

/** When the key in place was made: its file's modification time (key files are written once). */
async function keyBornAt(stateDir: string): Promise<number> {
  return (await lstat(path.join(stateDir, AGENT_KEY_FILE))).mtimeMs;
}

export interface KeyRotationDeps {
  readonly redis: RedisConnection;
  readonly prefix: string;
  readonly stateDir: string;
  readonly hostId: string;
  readonly labels: readonly string[];
  /** The machine name the key is enrolled under. */
  readonly machine: () => string;
  readonly jobKey: JobVerifier;
  /** FSBENCH_KEY_MAX_AGE in ms; 0: never by age. */
  readonly maxAgeMs: number;
  /** The key in use now. */
  readonly current: () => AgentIdentity;
  /** Stops taking runs, once the one in hand is done. */
  readonly pause: () => Promise<void>;
  /** Takes runs again (when the approval holds). */
  readonly resume: () => Promise<void>;
  /** Uses the new key from now on, with the secret its reports are authenticated with. */
  readonly switchTo: (identity: AgentIdentity, macKey: Buffer) => void;
  readonly log: HealthLog;
  readonly signal: AbortSignal;
  readonly pollMs: number;
}

export class KeyRotation {
  private running: Promise<void> | undefined;
  private bornAt: number | undefined;

  constructor(private readonly deps: KeyRotationDeps) {}

  /** Whether a rotation is under way: the agent takes no run meanwhile, on purpose. */
  get underway(): boolean {
    return this.running !== undefined;
  }

  /** Whether the key in place is older than FSBENCH_KEY_MAX_AGE. */
  async due(): Promise<boolean> {
    if (this.deps.maxAgeMs === 0) return false;
    this.bornAt ??= await keyBornAt(this.deps.stateDir);
    return Date.now() - this.bornAt > this.deps.maxAgeMs;
  }

  /** Begins a rotation unless one is under way; `why` is logged. */
  begin(why: string): void {
    this.running ??= this.rotate(why)
      .catch((err: unknown) => {
        if (!this.deps.signal.aborted) this.deps.log(`key rotation: ${messageOf(err)}`, { event: 'agent.key-rotation-failed' });
      })
      .finally(() => {
        this.running = undefined;
      });
  }

  /** Resolves once the rotation under way, if any, is over. */
  async settled(): Promise<void> {
    await this.running;
  }

  private async rotate(why: string): Promise<void> {
    const d = this.deps;
    await d.pause();
    try {
      const old = d.current();
      const next = await loadOrCreateNextKey(d.stateDir);
      d.log(`rotating this agent's key ${old.fingerprint} to ${next.fingerprint} (${why}): taking no run until the coordinator enrolls it`, {
        event: 'agent.key-rotating', key: old.fingerprint, next: next.fingerprint,
      });
      const request = { redis: d.redis, prefix: d.prefix, identity: next, hostId: d.hostId, jobKey: d.jobKey };
      let announcedAt = 0;
      for (;;) {
        if (d.signal.aborted) throw new FsbenchError('CANCELLED', 'the agent stopped during a key rotation: it goes on at the next start');
        const theirs = await coordinatorReportKey(d.redis, d.prefix, d.jobKey);
        if (theirs !== null && (await currentApproval(request)) !== null) {
          const promoted = await promoteNextKey(d.stateDir);
          if (promoted.fingerprint !== next.fingerprint) throw new FsbenchError('INTERNAL', `the key in ${d.stateDir} is ${promoted.fingerprint} after moving ${next.fingerprint} into place`);
          d.switchTo(promoted, reportMacKey(promoted.reportKey, theirs, promoted.fingerprint, d.hostId));
          this.bornAt = undefined;
          d.log(`this agent's key is now ${promoted.fingerprint} (${old.fingerprint} is revoked): taking runs again`, { event: 'agent.key-rotated', key: promoted.fingerprint, old: old.fingerprint });
          return;
        }
        if (Date.now() - announcedAt >= ANNOUNCE_EVERY_MS) {
          await d.redis.hset(agentKeysKey(d.prefix), next.fingerprint, announcementOf(next, d.hostId, d.machine(), d.labels, undefined, undefined, old));
          announcedAt = Date.now();
        }
        await sleep(d.pollMs, undefined, { signal: d.signal }).catch(() => undefined);
      }
    } finally {
      await d.resume();
    }
  }
}

/**
 * At start: a rotation an agent of this host begun and the coordinator finished (the new key is
 * enrolled, the old one revoked) whose new key was not yet moved into place is finished here, and
 * the new key returned; null otherwise (none begun, or not enrolled yet: then it goes on once the
 * agent is enrolled).
 */
export async function finishBegunRotation(r: { redis: RedisConnection; prefix: string; stateDir: string; hostId: string; jobKey: JobVerifier }): Promise<AgentIdentity | null> {
  if (!(await rotationBegun(r.stateDir))) return null;
  const next = await loadOrCreateNextKey(r.stateDir);
  if ((await currentApproval({ ...r, identity: next })) === null) return null;
  return promoteNextKey(r.stateDir);
}
