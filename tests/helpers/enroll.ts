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
import { coordinatorReportKey, hostStateDir, loadOrCreateAgentKey, type AgentIdentity } from '../../agent/identity.js';
import { reportMac, reportMacKey, type Approval, type ApprovalEntry } from '../../queue/enrollment.js';
import { qualifiedQueueName, type RunReport, type SignedRunReport } from '../../queue/jobs.js';
import { agentApprovalsKey } from '../../queue/keys.js';
import { JobSigner, type JobVerifier } from '../../queue/signing.js';

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

/** `fsbench_reports_dropped_total{reason}` on the coordinator's /metrics (0 when absent). */
export async function droppedReports(url: string, reason: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const m = new RegExp(`^fsbench_reports_dropped_total\\{reason="${reason}"\\} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

/**
 * Appends to the event stream of queue `target` a `completed` event carrying `report`,
 * authenticated with the real MAC of the agent key kept in `stateDir` for `report.hostId`: what
 * root on that host can write whatever its agent does. Returns the key's fingerprint.
 */
export async function reportAsAgent(redis: Redis, prefix: string, jobKey: JobVerifier, stateDir: string, target: string, report: RunReport): Promise<string> {
  const identity = await loadOrCreateAgentKey(hostStateDir(stateDir, report.hostId));
  const theirs = await coordinatorReportKey(redis, prefix, jobKey);
  if (theirs === null) throw new Error('the coordinator published no report key');
  const text = JSON.stringify(report);
  const envelope: SignedRunReport = { report: text, key: identity.fingerprint, mac: reportMac(reportMacKey(identity.reportKey, theirs, identity.fingerprint, report.hostId), text) };
  await redis.xadd(`${qualifiedQueueName(prefix, target)}:events`, '*', 'event', 'completed', 'jobId', report.jobId, 'returnvalue', JSON.stringify(envelope), 'prev', 'active');
  return identity.fingerprint;
}
