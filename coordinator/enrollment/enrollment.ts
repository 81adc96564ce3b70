/**
 * Which agent keys the coordinator trusts, and for which host (see queue/enrollment.ts for the
 * protocol), over two tables of the store (store/key-table.ts): agent keys (pending until enrolled,
 * then bound to the host id they announced) and enrollment tokens (one use each, kept as a hash). `sync()` reads the
 * announcements in Redis, verifying only new or changed ones, enrolls keys that proved a valid
 * token, and writes the approvals of enrolled keys back to Redis for their agents (again at
 * start, so a Redis that lost its data has them).
 *
 * The collector asks `enrolled(key)` for every report: a map in memory, so verifying a report
 * costs one Ed25519 verification and no query.
 */
import { createPublicKey, randomBytes, type KeyObject } from 'node:crypto';
import { constants as fsConstants, promises as fs } from 'node:fs';
import path from 'node:path';
import type { RedisConnection } from '../../queue/redis.js';
import { z } from 'zod';
import { FsbenchError, errnoOf } from '../../contract/errors.js';
import {
  Announcement, AnnouncementEntry, ApprovalEntry, parseJson, proofMatches, reportMacKey, secretHash, tokenProof, type AgentKeyView, type Approval, type ReportKeyEntry,
} from '../../queue/enrollment.js';
import { agentApprovalsKey, agentKeysKey, reportKeyKey } from '../../queue/keys.js';
import { keyFingerprint, loadOrCreatePrivateKey, verifyText, type JobSigner } from '../../queue/signing.js';
import type { AgentKeyRow, AnnouncedKey, Store } from '../store/index.js';

/** Pending keys kept at most: announcements are free to write, the table must not grow with them. */
const MAX_PENDING = 10_000;
/** Most tokens one request may make: a fleet's worth. */
export const MAX_TOKENS_PER_REQUEST = 1000;

export interface EnrolledKey {
  readonly key: string;
  readonly publicKey: KeyObject;
  readonly reportKeyPem: string;
  readonly hostId: string;
  readonly machine: string;
  /** What this key's reports are authenticated with (queue/enrollment.ts reportMacKey). */
  readonly macKey: Buffer;
}

/** The coordinator's X25519 report key, in its data directory beside the job key (mode 0600). */
export const REPORT_KEY_FILE = 'report-key.pem';


export interface EnrollmentDeps {
  readonly store: Store;
  readonly redis: RedisConnection;
  readonly prefix: string;
  readonly signer: JobSigner;
  readonly log: (line: string) => void;
  /** FSBENCH_ENROLL_TOKEN_COPY: a file kept holding one unused token, for this machine's agents. */
  readonly tokenCopy?: string | undefined;
  /** The coordinator's X25519 report key (REPORT_KEY_FILE). */
  readonly reportKey: KeyObject;
}


export class Enrollment {
  private readonly byKey = new Map<string, EnrolledKey>();
  /** Announcement text last looked at, per key: an unchanged one is not verified again. */
  private readonly seen = new Map<string, string>();

  constructor(private readonly deps: EnrollmentDeps) {
    for (const row of deps.store.agentKeys.enrolledRows()) this.remember(row);
  }

  private remember(row: AgentKeyRow): void {
    // A key whose report key is not X25519 (a row edited by hand) cannot report: left out, never a crash at start.
    try {
      const theirs = createPublicKey(row.report_key);
      if (theirs.asymmetricKeyType !== 'x25519') return;
      this.byKey.set(row.key, {
        key: row.key,
        publicKey: createPublicKey(row.public_key),
        reportKeyPem: row.report_key,
        hostId: row.host_id,
        machine: row.machine,
        macKey: reportMacKey(this.deps.reportKey, theirs, row.key, row.host_id),
      });
    } catch {
      return;
    }
  }

  /** The enrolled key with this fingerprint, or undefined. */
  enrolled(key: string): EnrolledKey | undefined {
    return this.byKey.get(key);
  }

  /** Whether some enrolled key is bound to `hostId`: placements choose among those hosts only. */
  hostEnrolled(hostId: string): boolean {
    for (const k of this.byKey.values()) if (k.hostId === hostId) return true;
    return false;
  }

  /** How many keys are enrolled and how many wait: /metrics, at every scrape. */
  counts(): { enrolled: number; pending: number } {
    return this.deps.store.agentKeys.counts();
  }

  /** Every key, enrolled first, newest first within each. */
  list(limit = 1000): AgentKeyView[] {
    return this.deps.store.agentKeys.list(limit).map((r) => ({
      key: r.key,
      hostId: r.host_id,
      machine: r.machine,
      labels: z.array(z.string()).parse(JSON.parse(r.labels)),
      state: r.state,
      via: r.via,
      firstSeen: new Date(r.first_seen).toISOString(),
      enrolledAt: r.enrolled_at === null ? null : new Date(r.enrolled_at).toISOString(),
    }));
  }

  /** Writes the report key, every enrolled key's approval and the token copy: at start. */
  async start(): Promise<void> {
    const publicKey = createPublicKey(this.deps.reportKey).export({ type: 'spki', format: 'pem' }).toString();
    const entry: ReportKeyEntry = { publicKey, signature: this.deps.signer.signReportKey(publicKey) };
    await this.deps.redis.set(reportKeyKey(this.deps.prefix), JSON.stringify(entry));
    const pipe = this.deps.redis.pipeline();
    for (const k of this.byKey.values()) pipe.hset(agentApprovalsKey(this.deps.prefix), k.key, this.approvalOf(k));
    await pipe.exec();
    await this.refreshTokenCopy();
  }

  private approvalOf(k: EnrolledKey): string {
    const approval: Approval = { key: k.key, publicKey: k.publicKey.export({ type: 'spki', format: 'pem' }).toString(), reportKey: k.reportKeyPem, hostId: k.hostId, machine: k.machine };
    return JSON.stringify({ approval, signature: this.deps.signer.signApproval(approval) } satisfies ApprovalEntry);
  }

  /**
   * Reads the announcements in Redis: records new keys as pending, enrolls those with a valid
   * token proof, and takes in approvals signed with this coordinator's key that its database
   * lacks (another coordinator of the same key, or one restored from an older backup).
   */
  async sync(): Promise<void> {
    const [announced, approvals] = await Promise.all([
      this.deps.redis.hgetall(agentKeysKey(this.deps.prefix)),
      this.deps.redis.hgetall(agentApprovalsKey(this.deps.prefix)),
    ]);
    // An approval Redis lost (restarted empty, or a write that failed): written again.
    const missing = [...this.byKey.values()].filter((k) => approvals[k.key] === undefined);
    if (missing.length > 0) {
      const pipe = this.deps.redis.pipeline();
      for (const k of missing) pipe.hset(agentApprovalsKey(this.deps.prefix), k.key, this.approvalOf(k));
      await pipe.exec();
    }
    for (const [key, raw] of Object.entries(approvals)) {
      if (this.byKey.has(key)) continue;
      const entry = parseJson(ApprovalEntry, raw);
      if (!entry || entry.approval.key !== key || !this.deps.signer.verifier.verifyApproval(entry.approval, entry.signature)) continue;
      this.enroll({ ...entry.approval, labels: [] }, 'approval');
    }
    for (const [key, raw] of Object.entries(announced)) {
      if (this.seen.get(key) === raw) continue;
      if (this.seen.size >= 2 * MAX_PENDING) this.seen.clear();
      this.seen.set(key, raw);
      const a = this.verifiedAnnouncement(key, raw);
      if (!a || this.byKey.has(key)) continue;
      const announced: AnnouncedKey = { key, publicKey: a.publicKey, reportKey: a.reportKey, hostId: a.hostId, machine: a.machine, labels: a.labels };
      this.deps.store.agentKeys.recordPending(announced, MAX_PENDING);
      if (a.token && this.useToken(a.token.id, a.token.proof, key, a.hostId)) {
        this.enroll(announced, 'token');
        this.deps.log(`agent key ${key} of ${a.machine} (host ${a.hostId}) enrolled with token ${a.token.id}`);
        await this.deps.redis.hset(agentApprovalsKey(this.deps.prefix), key, this.approvalOf(this.enrolledOrThrow(key)));
        await this.refreshTokenCopy();
      }
    }
  }

  private enrolledOrThrow(key: string): EnrolledKey {
    const k = this.byKey.get(key);
    if (!k) throw new FsbenchError('INTERNAL', `agent key ${key} is not enrolled`);
    return k;
  }

  /** An announcement signed by the key it names, or null (logged nowhere: anyone can write junk there). */
  private verifiedAnnouncement(key: string, raw: string): Announcement | null {
    const entry = parseJson(AnnouncementEntry, raw);
    if (!entry) return null;
    const body = parseJson(Announcement, entry.body);
    if (!body) return null;
    let publicKey: KeyObject;
    try {
      publicKey = createPublicKey(body.publicKey);
    } catch {
      return null;
    }
    if (publicKey.asymmetricKeyType !== 'ed25519' || keyFingerprint(publicKey) !== key) return null;
    try {
      if (createPublicKey(body.reportKey).asymmetricKeyType !== 'x25519') return null;
    } catch {
      return null;
    }
    return verifyText(publicKey, 'announcement', entry.body, entry.signature) ? body : null;
  }

  /** Marks a token used by `key` when its proof matches and it is unused and unexpired. */
  private useToken(id: string, proof: string, key: string, hostId: string): boolean {
    const { agentKeys } = this.deps.store;
    const token = agentKeys.token(id);
    if (!token || token.usedBy !== null || token.expiresAt < Date.now()) return false;
    if (!proofMatches(tokenProof(token.secretHash, key, hostId), proof)) return false;
    return agentKeys.useToken(id, key);
  }

  private enroll(k: AnnouncedKey, via: 'approval' | 'token'): void {
    const row = this.deps.store.agentKeys.enroll(k, via);
    if (row) this.remember(row);
  }

  /**
   * Enrolls the pending key `selector` names: its fingerprint, its host id or its machine name.
   * One key only: a selector matching several is refused (CONFLICT), naming them.
   */
  async approve(selector: string): Promise<AgentKeyView> {
    await this.sync();
    const rows = this.deps.store.agentKeys.pendingNamed(selector);
    const [row, ...more] = rows;
    if (!row) {
      const enrolled = this.list().find((k) => k.state === 'enrolled' && (k.key === selector || k.hostId === selector || k.machine === selector));
      if (enrolled) return enrolled;
      throw new FsbenchError('NOT_FOUND', `no agent waiting for enrollment is called ${selector}: \`fsbench agents\` lists those waiting (their key, host and machine)`);
    }
    if (more.length > 0) {
      throw new FsbenchError('CONFLICT', `${selector} names ${rows.length} waiting agent keys (${rows.map((r) => `${r.key} on host ${r.host_id}`).join(', ')}): approve one by its key`);
    }
    this.enroll(
      { key: row.key, publicKey: row.public_key, reportKey: row.report_key, hostId: row.host_id, machine: row.machine, labels: z.array(z.string()).parse(JSON.parse(row.labels)) },
      'approval',
    );
    await this.deps.redis.hset(agentApprovalsKey(this.deps.prefix), row.key, this.approvalOf(this.enrolledOrThrow(row.key)));
    this.deps.log(`agent key ${row.key} of ${row.machine} (host ${row.host_id}) enrolled by approval`);
    const view = this.list().find((k) => k.key === row.key);
    if (!view) throw new FsbenchError('INTERNAL', `agent key ${row.key} vanished while being enrolled`);
    return view;
  }

  /** New one-time tokens, valid for `ttlMs`: `<id>.<secret>`, shown once; only the secret's hash is kept. */
  mintTokens(count: number, ttlMs: number, copy = false): { tokens: string[]; expiresAt: string } {
    const now = Date.now();
    const made = Array.from({ length: count }, () => ({ id: randomBytes(8).readBigUInt64BE().toString(36).padStart(10, '0').slice(-10), secret: randomBytes(32).toString('base64url') }));
    // Expired tokens are of no use to anyone: they go as new ones come.
    this.deps.store.agentKeys.addTokens(made.map((t) => ({ id: t.id, secretHash: secretHash(t.secret) })), now, now + ttlMs, copy);
    return { tokens: made.map((t) => `${t.id}.${t.secret}`), expiresAt: new Date(now + ttlMs).toISOString() };
  }

  /**
   * Keeps FSBENCH_ENROLL_TOKEN_COPY holding an unused token: made at start when the file's token
   * is missing or used, and again once an agent used it. Written to a new file renamed into place,
   * never through a symlink, mode 0640: readable by the coordinator's user and group only, which
   * compose gives the agents (`group_add`), whose root holds no CAP_DAC_OVERRIDE.
   */
  private async refreshTokenCopy(): Promise<void> {
    const file = this.deps.tokenCopy;
    if (file === undefined) return;
    const current = await fs.readFile(file, 'utf8').catch(() => '');
    const id = current.trim().split('.')[0] ?? '';
    if (this.deps.store.agentKeys.tokenUnused(id)) return;
    const { tokens } = this.mintTokens(1, 100 * 365 * 86_400_000, true);
    await fs.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
    const tmp = `${file}.${process.pid}.tmp`;
    const create = () => fs.open(tmp, fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_WRONLY | fsConstants.O_NOFOLLOW, 0o640);
    const handle = await create().catch(async (err: unknown) => {
      if (errnoOf(err) !== 'EEXIST') throw err;
      await fs.rm(tmp, { force: true });
      return create();
    });
    try {
      // The umask may have taken the group's read: put it back.
      await handle.chmod(0o640);
      await handle.writeFile(`${tokens[0] ?? ''}\n`);
    } finally {
      await handle.close();
    }
    await fs.rename(tmp, file);
  }
}

/** The coordinator's report key from its data directory, made on first start. */
export function loadOrCreateReportKey(dataDir: string): Promise<KeyObject> {
  return loadOrCreatePrivateKey(path.join(dataDir, REPORT_KEY_FILE), 'x25519', 'report key (agents then agree new report secrets at their next start)');
}
