/**
 * Approvals as the coordinator writes them to Redis for its agents, and what it makes of those it
 * finds there. Its database is the authority: an enrolled key's approval is the one whose id the
 * database holds (any other text in its place is written over), an approval of a revoked key is
 * removed wherever it comes from, and one of a key the database does not know at all is taken in
 * only with this coordinator's signature, unexpired (a coordinator restored from a backup older
 * than the enrollment, or another of the same key on this Redis).
 */
import { randomBytes } from 'node:crypto';
import { ApprovalEntry, parseJson, type Approval } from '../../queue/enrollment.js';
import type { JobSigner } from '../../queue/signing.js';
import type { AgentKeyRow, ApprovalRecord } from '../store/index.js';

/**
 * How long an approval holds. The coordinator signs a new one when half of it is left, so an agent
 * whose coordinator is up never sees one expire; one saved from Redis is worthless after this.
 */
export const APPROVAL_TTL_MS = 7 * 86_400_000;

/** A new approval's id and expiry. */
export function newApproval(now = Date.now()): ApprovalRecord {
  return { id: randomBytes(16).toString('base64url'), expiresAt: now + APPROVAL_TTL_MS };
}

/** Whether an approval is due to be signed again: half its life or less left. */
export function renewalDue(a: ApprovalRecord, now = Date.now()): boolean {
  return a.expiresAt - now < APPROVAL_TTL_MS / 2;
}

/** The entry written to Redis: the approval and the coordinator's signature over it. */
export function approvalText(signer: JobSigner, approval: Approval): string {
  return JSON.stringify({ approval, signature: signer.signApproval(approval) } satisfies ApprovalEntry);
}

/** What to do with an approval in Redis of a key that is not enrolled here. */
export type ForeignApproval = { readonly take: Approval } | 'remove' | 'ignore';

/**
 * Judges an approval found in Redis for `key`, which is not enrolled here; `row` is the database's
 * record of the key, if any. Revoked keys' and expired approvals go; a valid approval of a key
 * this database never enrolled is taken in; anything not signed by this coordinator is left for
 * whoever wrote it (it enrolls nothing, and no agent trusts it).
 */
export function judgeForeign(signer: JobSigner, key: string, raw: string, row: AgentKeyRow | undefined, now = Date.now()): ForeignApproval {
  if (row?.state === 'revoked') return 'remove';
  const entry = parseJson(ApprovalEntry, raw);
  if (!entry || entry.approval.key !== key || !signer.verifier.verifyApproval(entry.approval, entry.signature)) return 'ignore';
  if (entry.approval.expiresAt <= now) return 'remove';
  // A row enrolled here is in memory unless its report key is unusable (a hand-edited row): left alone.
  if (row?.state === 'enrolled') return 'ignore';
  return { take: entry.approval };
}
