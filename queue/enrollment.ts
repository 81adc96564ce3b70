/**
 * Enrollment on the wire: how an agent makes its key known and how it learns it was accepted.
 *
 * Every agent has an Ed25519 key of its own (agent/identity.ts), its identity, and an X25519 key
 * it authenticates its run reports with: from it and the coordinator's X25519 report key (which
 * the coordinator publishes signed with its job key) both sides derive a secret of that agent's
 * alone, and each report carries an HMAC under it. The coordinator stores a report only when it
 * carries the MAC of an enrolled key bound to the host the run was issued to. Why not an Ed25519
 * signature per report: checking one costs 120-180 us on a small VM, 15-20% of the coordinator's
 * CPU per run at 100 hosts (`npm run bench:dispatch`), an HMAC 10 us. An agent announces its public key in Redis, signed
 * with that key (so nobody can announce a key they do not hold) and, when it was given one, with
 * an enrollment token's secret sealed to the coordinator (sealToken). The coordinator enrolls the key when an operator approves it
 * or the token is valid and unused, and writes an approval signed with its job key: the agent
 * starts taking jobs once it finds an approval that verifies, and the coordinator itself trusts
 * an approval only with its own signature on it, so nothing written to Redis by anyone else
 * enrolls a key.
 */
import { createCipheriv, createDecipheriv, createHash, createHmac, diffieHellman, hkdfSync, randomBytes, timingSafeEqual, type KeyObject } from 'node:crypto';
import { z } from 'zod';
import { JobSignature, Target } from './jobs.js';

/** A key's fingerprint, `SHA256:<base64>` (see keyFingerprint). */
export const KeyFingerprint = z.string().regex(/^SHA256:[A-Za-z0-9+/]{43}$/, 'must be a key fingerprint (SHA256:...)');

/** An enrollment token: `<id>.<secret>`, as `fsbench agents token` prints it. */
export const EnrollToken = z.string().regex(/^[a-z0-9]{10}\.[A-Za-z0-9_-]{43}$/, 'must be an enrollment token as `fsbench agents token` prints it (<id>.<secret>)');
export const TokenId = z.string().regex(/^[a-z0-9]{10}$/);

/** What an agent says about itself, signed with its own key. */
export const Announcement = z
  .object({
    v: z.literal(1),
    /** SPKI PEM of the agent's Ed25519 public key. */
    publicKey: z.string().max(1000),
    /** SPKI PEM of the agent's X25519 report key (see reportMacKey). */
    reportKey: z.string().max(1000),
    hostId: Target,
    machine: z.string().max(200),
    labels: z.array(z.string().max(64)).max(32),
    /** An enrollment token: its id, and its secret sealed to the coordinator's report key (sealToken). */
    token: z.object({ id: TokenId, sealed: z.string().regex(/^[A-Za-z0-9_-]{80,120}$/) }).strict().optional(),
    /** A rotation: the enrolled key this one replaces, and that key's signature over rotationStatement. */
    rotatedFrom: z.object({ key: KeyFingerprint, signature: JobSignature }).strict().optional(),
  })
  .strict();
export type Announcement = z.infer<typeof Announcement>;

/**
 * What an agent's old key signs to hand its enrollment to a new key: the new key, its report key,
 * and the host and machine the old key is bound to. Signed apart from the announcement (which the
 * new key signs), so that neither key alone can claim the other.
 */
export function rotationStatement(from: string, to: string, a: Pick<Announcement, 'publicKey' | 'reportKey' | 'hostId' | 'machine'>): string {
  return JSON.stringify({ v: 1, from, to, publicKey: a.publicKey, reportKey: a.reportKey, hostId: a.hostId, machine: a.machine });
}

/** An announcement as it sits in Redis: the exact JSON text that was signed, and the signature. */
export const AnnouncementEntry = z.object({ body: z.string().max(8192), signature: JobSignature }).strict();

/**
 * What the coordinator signs to enroll a key: which key, bound to which host and machine name,
 * which approval this is and until when it holds. The coordinator trusts only the approval whose
 * id its database holds for an enrolled key, and signs a new one before this one expires: an
 * approval saved from Redis and written back after the key was revoked enrolls nothing, and one
 * kept longer is worthless to the agent too.
 */
export const Approval = z
  .object({
    key: KeyFingerprint,
    publicKey: z.string().max(1000),
    reportKey: z.string().max(1000),
    hostId: Target,
    machine: z.string().max(200),
    id: z.string().regex(/^[A-Za-z0-9_-]{22}$/),
    /** ms since the epoch. */
    expiresAt: z.number().int().nonnegative(),
    /** An operator asked this key's agent to rotate (`fsbench agents rotate`): it makes a new key when idle. */
    rotate: z.literal(true).optional(),
  })
  .strict();
export type Approval = z.infer<typeof Approval>;

/** The coordinator's X25519 report key (SPKI PEM), signed with its job key: in Redis, for agents. */
export const ReportKeyEntry = z.object({ publicKey: z.string().max(1000), signature: JobSignature }).strict();
export type ReportKeyEntry = z.infer<typeof ReportKeyEntry>;

/**
 * The secret one agent key shares with the coordinator: X25519 between the agent's report key and
 * the coordinator's, expanded with HKDF and bound to the agent key and its host, so it
 * authenticates nothing else.
 */
export function reportMacKey(ownPrivate: KeyObject, otherPublic: KeyObject, agentKey: string, hostId: string): Buffer {
  const shared = diffieHellman({ privateKey: ownPrivate, publicKey: otherPublic });
  return Buffer.from(hkdfSync('sha256', shared, 'fsbench report mac v1', `${agentKey}\n${hostId}`, 32));
}

/** The MAC a report's exact JSON text carries (base64url). */
export function reportMac(macKey: Buffer, text: string): string {
  return createHmac('sha256', macKey).update('fsbench run report v1\n').update(text).digest('base64url');
}
export const ApprovalEntry = z.object({ approval: Approval, signature: JobSignature }).strict();
export type ApprovalEntry = z.infer<typeof ApprovalEntry>;

/**
 * The token's secret travels sealed to the coordinator: AES-256-GCM under a key only the agent's
 * report key and the coordinator's agree (X25519, HKDF bound to the agent key, its host and the
 * token id, which are also the sealed text's associated data). The coordinator keeps only the
 * secret's hash and asks for the secret itself, so a copy of its database (or a backup) enrolls
 * nothing; a Redis reader sees only the sealed text, which opens for no other key or host.
 */
function sealingKey(ownPrivate: KeyObject, otherPublic: KeyObject, tokenId: string, agentKey: string, hostId: string): Buffer {
  const shared = diffieHellman({ privateKey: ownPrivate, publicKey: otherPublic });
  return Buffer.from(hkdfSync('sha256', shared, 'fsbench token seal v1', `${tokenId}\n${agentKey}\n${hostId}`, 32));
}

/** The agent's side: `secret` sealed with its report key to the coordinator's (base64url: nonce, text, tag). */
export function sealToken(secret: string, agentReportKey: KeyObject, coordinatorReportKey: KeyObject, tokenId: string, agentKey: string, hostId: string): string {
  const nonce = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', sealingKey(agentReportKey, coordinatorReportKey, tokenId, agentKey, hostId), nonce);
  cipher.setAAD(Buffer.from(`${tokenId}\n${agentKey}\n${hostId}`));
  const text = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
  return Buffer.concat([nonce, text, cipher.getAuthTag()]).toString('base64url');
}

/** The coordinator's side: the secret, or null when the sealed text does not open for this key, host and token. */
export function openToken(sealed: string, coordinatorReportKey: KeyObject, agentReportKey: KeyObject, tokenId: string, agentKey: string, hostId: string): string | null {
  const bytes = Buffer.from(sealed, 'base64url');
  if (bytes.length < 12 + 16 + 1) return null;
  try {
    const decipher = createDecipheriv('aes-256-gcm', sealingKey(coordinatorReportKey, agentReportKey, tokenId, agentKey, hostId), bytes.subarray(0, 12));
    decipher.setAAD(Buffer.from(`${tokenId}\n${agentKey}\n${hostId}`));
    decipher.setAuthTag(bytes.subarray(bytes.length - 16));
    return Buffer.concat([decipher.update(bytes.subarray(12, bytes.length - 16)), decipher.final()]).toString('utf8');
  } catch {
    return null;
  }
}

/**
 * What the coordinator keeps of a token's secret. A fast hash is enough: the secret is 32 random
 * bytes, beyond any search, and the hash is never what proves possession (openToken's secret is).
 */
export function secretHash(secret: string): Buffer {
  return createHash('sha256').update(secret).digest();
}

export function proofMatches(expected: string, got: string): boolean {
  const a = Buffer.from(expected);
  const b = Buffer.from(got);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** An agent key as `GET /v1/agents` lists it (`keys`): enrolled, or waiting for approval. */
export const AgentKeyView = z.object({
  key: z.string(),
  hostId: z.string(),
  machine: z.string(),
  labels: z.array(z.string()),
  state: z.enum(['pending', 'enrolled', 'revoked']),
  via: z.enum(['approval', 'token', 'import', 'rotate']).nullable(),
  firstSeen: z.iso.datetime(),
  enrolledAt: z.iso.datetime().nullable(),
  revokedAt: z.iso.datetime().nullable(),
});
export type AgentKeyView = z.infer<typeof AgentKeyView>;

/** One change to who is enrolled, as `GET /v1/agents/history` lists it (newest first). */
export const AuditEntryView = z.object({
  at: z.iso.datetime(),
  actor: z.string().describe('who asked: `api <address>` (an operator through the REST API), `agent <key>` (a token, or a key rotation), or `coordinator`'),
  action: z.enum(['enroll-token', 'approve', 'import', 'revoke', 'rotate', 'rename']),
  key: z.string(),
  hostId: z.string(),
  machine: z.string(),
  detail: z.string(),
});
export type AuditEntryView = z.infer<typeof AuditEntryView>;

/** `text` parsed as JSON and then by `schema`, or null when either fails: whatever is in Redis may be junk. */
export function parseJson<T extends z.ZodType>(schema: T, text: string): z.output<T> | null {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return null;
  }
  const r = schema.safeParse(json);
  return r.success ? r.data : null;
}
