/**
 * An agent's identity: the Ed25519 key it signs its reports with, made on first start in its
 * state directory and kept there, and its enrollment (queue/enrollment.ts): the agent announces
 * its public key and waits until it finds the coordinator's signed approval of that key bound to
 * its host, before it takes a job. An agent that is not enrolled runs nothing, and a report it
 * signed would be dropped anyway.
 */
import { createPublicKey, type KeyObject } from 'node:crypto';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RedisConnection } from '../queue/redis.js';
import { FsbenchError } from '../contract/errors.js';
import { Announcement, ApprovalEntry, parseJson, type Approval, ReportKeyEntry, reportMacKey, rotationStatement, sealToken } from '../queue/enrollment.js';
import { agentApprovalsKey, agentKeysKey, reportKeyKey } from '../queue/keys.js';
import { canonicalJson, keyFingerprint, loadOrCreatePrivateKey, signText, type JobVerifier } from '../queue/signing.js';

export const AGENT_KEY_FILE = 'agent-key.pem';
export const AGENT_REPORT_KEY_FILE = 'agent-report-key.pem';

export interface AgentIdentity {
  readonly privateKey: KeyObject;
  readonly publicKeyPem: string;
  /** `SHA256:...`, what `fsbench agents` shows and `fsbench agents approve` accepts. */
  readonly fingerprint: string;
  /** X25519: what the secret its reports are authenticated with is agreed from (queue/enrollment.ts). */
  readonly reportKey: KeyObject;
  readonly reportKeyPem: string;
}

/**
 * Where one host's key lives in a state directory: each host id has its own, so agents of one
 * host share a key (compose's replicas) while simulated hosts on one machine (FSBENCH_HOST_ID) do
 * not. The prefix keeps a host id of `..` a plain name.
 */
export function hostStateDir(stateDir: string, hostId: string): string {
  return path.join(stateDir, `host-${hostId}`);
}

/** The agent's keys in `stateDir` (checked already: only root controls it), made on first start. */
export async function loadOrCreateAgentKey(stateDir: string): Promise<AgentIdentity> {
  const privateKey = await loadOrCreatePrivateKey(path.join(stateDir, AGENT_KEY_FILE), 'ed25519', 'agent key (it must then be enrolled again)');
  const reportKey = await loadOrCreatePrivateKey(path.join(stateDir, AGENT_REPORT_KEY_FILE), 'x25519', 'agent report key (the agent must then be enrolled again)');
  return identityOf(privateKey, reportKey);
}

/** An identity from its Ed25519 key and its X25519 report key (both private). */
export function identityOf(privateKey: KeyObject, reportKey: KeyObject): AgentIdentity {
  const publicKey = createPublicKey(privateKey);
  return {
    privateKey,
    publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    fingerprint: keyFingerprint(publicKey),
    reportKey,
    reportKeyPem: createPublicKey(reportKey).export({ type: 'spki', format: 'pem' }).toString(),
  };
}

/** The coordinator's report key from Redis, when it carries the coordinator's signature. */
export async function coordinatorReportKey(redis: RedisConnection, prefix: string, jobKey: JobVerifier): Promise<KeyObject | null> {
  const raw = await redis.get(reportKeyKey(prefix));
  const entry = raw === null ? null : parseJson(ReportKeyEntry, raw);
  if (entry === null || !jobKey.verifyReportKey(entry.publicKey, entry.signature)) return null;
  try {
    const key = createPublicKey(entry.publicKey);
    return key.asymmetricKeyType === 'x25519' ? key : null;
  } catch {
    return null;
  }
}

export interface EnrollmentRequest {
  readonly redis: RedisConnection;
  readonly prefix: string;
  readonly identity: AgentIdentity;
  readonly hostId: string;
  readonly machine: string;
  readonly labels: readonly string[];
  /**
   * FSBENCH_ENROLL_TOKEN: `<id>.<secret>`; the secret never leaves this process. Read again at
   * each look: a token file the coordinator rewrites once its token is used (FSBENCH_ENROLL_TOKEN_COPY)
   * enrolls the next host's key too.
   */
  readonly token: () => Promise<string | undefined>;
  /** The coordinator's public key: only its approvals count. */
  readonly jobKey: JobVerifier;
  readonly log: (line: string) => void;
  readonly signal: AbortSignal;
}

/**
 * What an agent writes for its key in `agentKeysKey` (field: its fingerprint): the announcement's
 * exact text and its signature with that key, and with a token, its secret sealed to the
 * coordinator's report key `sealTo` (without that key, the token is left out); in a rotation, the
 * signature of the enrolled key `rotatedFrom` handing over to this one.
 */
export function announcementOf(
  identity: AgentIdentity, hostId: string, machine: string, labels: readonly string[], token?: string, sealTo?: KeyObject, rotatedFrom?: AgentIdentity,
): string {
  const [tokenId, secret] = token?.split('.') ?? [];
  const body: Announcement = {
    v: 1,
    publicKey: identity.publicKeyPem,
    reportKey: identity.reportKeyPem,
    hostId,
    machine,
    labels: [...labels],
    ...(tokenId !== undefined && secret !== undefined && sealTo !== undefined
      ? { token: { id: tokenId, sealed: sealToken(secret, identity.reportKey, sealTo, tokenId, identity.fingerprint, hostId) } }
      : {}),
    ...(rotatedFrom === undefined
      ? {}
      : { rotatedFrom: { key: rotatedFrom.fingerprint, signature: signText(rotatedFrom.privateKey, 'rotation', rotationStatement(rotatedFrom.fingerprint, identity.fingerprint, { publicKey: identity.publicKeyPem, reportKey: identity.reportKeyPem, hostId, machine })) } }),
  };
  const text = canonicalJson(body);
  return JSON.stringify({ body: text, signature: signText(identity.privateKey, 'announcement', text) });
}

/**
 * The coordinator's approval of this key, bound to this host, when Redis holds one that is signed
 * by the coordinator and unexpired; null otherwise (none yet, revoked, or expired).
 */
export async function currentApproval(r: Pick<EnrollmentRequest, 'redis' | 'prefix' | 'identity' | 'hostId' | 'jobKey'>): Promise<Approval | null> {
  const raw = await r.redis.hget(agentApprovalsKey(r.prefix), r.identity.fingerprint);
  const entry = raw === null ? null : parseJson(ApprovalEntry, raw);
  if (entry === null || !r.jobKey.verifyApproval(entry.approval, entry.signature)) return null;
  const a = entry.approval;
  if (a.key !== r.identity.fingerprint || a.reportKey !== r.identity.reportKeyPem || a.expiresAt <= Date.now()) return null;
  if (a.hostId !== r.hostId) {
    throw new FsbenchError(
      'CONFIG_INVALID',
      `this agent's key ${r.identity.fingerprint} is enrolled for host ${a.hostId}, not this host ${r.hostId}: give each host its own FSBENCH_STATE_DIR`,
    );
  }
  return a;
}

const ANNOUNCE_EVERY_MS = 30_000;
const WAITING_LOG_EVERY_MS = 60_000;

/**
 * Resolves, with the secret its reports are authenticated with and the machine name the key is
 * enrolled under, once this agent's key is enrolled
 * and the coordinator's report key is published (announcing the key until then); rejects when
 * `signal` aborts. Polls once a second: enrollment happens once per key, and nothing runs before it.
 */
export async function awaitEnrollment(r: EnrollmentRequest, pollMs = 1_000): Promise<{ readonly macKey: Buffer; readonly machine: string }> {
  let announcedAt = 0;
  let announcedWith: string | undefined;
  let loggedAt = 0;
  for (;;) {
    if (r.signal.aborted) throw new FsbenchError('CANCELLED', 'the agent stopped before it was enrolled');
    const now = Date.now();
    let token: string | undefined;
    try {
      token = await r.token();
      const theirs = await coordinatorReportKey(r.redis, r.prefix, r.jobKey);
      const approval = await currentApproval(r);
      // The machine name is the approval's: the coordinator drops a report naming another.
      if (approval !== null && theirs !== null) return { macKey: reportMacKey(r.identity.reportKey, theirs, r.identity.fingerprint, r.hostId), machine: approval.machine };
      // A token is sealed to the coordinator's report key: announced again once that key is there.
      const announcing = `${token ?? ''} ${theirs === null ? '' : 'sealed'}`;
      if (now - announcedAt >= ANNOUNCE_EVERY_MS || announcing !== announcedWith) {
        await r.redis.hset(agentKeysKey(r.prefix), r.identity.fingerprint, announcementOf(r.identity, r.hostId, r.machine, r.labels, token, theirs ?? undefined));
        announcedAt = now;
        announcedWith = announcing;
      }
    } catch (err) {
      if (err instanceof FsbenchError) throw err;
      // Redis away for a moment: the connection retries; so does this loop.
    }
    if (now - loggedAt >= WAITING_LOG_EVERY_MS) {
      loggedAt = now;
      r.log(
        token === undefined
          ? `waiting to be enrolled: on the coordinator, run \`fsbench agents approve ${r.machine}\` (key ${r.identity.fingerprint}, host ${r.hostId}), or start the agent with FSBENCH_ENROLL_TOKEN from \`fsbench agents token\``
          : `waiting to be enrolled with token ${token.split('.')[0] ?? '?'} (key ${r.identity.fingerprint}); an expired or used token enrolls nothing: then \`fsbench agents approve ${r.machine}\``,
      );
    }
    await sleep(pollMs, undefined, { signal: r.signal }).catch(() => undefined);
  }
}
