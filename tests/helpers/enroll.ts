/**
 * Enrolls a test agent before it starts, as an operator holding the coordinator's key could: makes
 * the agent's key in its state directory and writes the coordinator-signed approval of it, bound
 * to its host, to Redis. The coordinator takes in such approvals (they carry its signature), and
 * the agent finds its own at start. Tests of enrollment itself use tokens and `agents approve`.
 */
import { createPrivateKey, randomBytes, type KeyObject } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { Redis } from 'ioredis';
import { hostStateDir, loadOrCreateAgentKey, type AgentIdentity } from '../../agent/identity.js';
import type { Approval, ApprovalEntry } from '../../queue/enrollment.js';
import { agentApprovalsKey } from '../../queue/keys.js';
import { JobSigner } from '../../queue/signing.js';

export interface PreEnrolled {
  readonly stateDir: string;
  readonly key: string;
  readonly identity: AgentIdentity;
}

/** `jobPrivateKey`: the coordinator's private job key (PEM or KeyObject). */
export async function preEnroll(redisUrl: string, prefix: string, jobPrivateKey: string | KeyObject, stateDir: string, hostId: string, machine: string): Promise<PreEnrolled> {
  const dir = hostStateDir(stateDir, hostId);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const identity = await loadOrCreateAgentKey(dir);
  const signer = new JobSigner(typeof jobPrivateKey === 'string' ? createPrivateKey(jobPrivateKey) : jobPrivateKey);
  // An approval as the coordinator signs one: its id and expiry are taken in with it (the coordinator's database has no record of the key).
  const approval: Approval = { key: identity.fingerprint, publicKey: identity.publicKeyPem, reportKey: identity.reportKeyPem, hostId, machine, id: randomBytes(16).toString('base64url'), expiresAt: Date.now() + 86_400_000 };
  const entry: ApprovalEntry = { approval, signature: signer.signApproval(approval) };
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 2 });
  try {
    await redis.connect();
    await redis.hset(agentApprovalsKey(prefix), identity.fingerprint, JSON.stringify(entry));
  } finally {
    redis.disconnect();
  }
  return { stateDir: path.resolve(stateDir), key: identity.fingerprint, identity };
}
