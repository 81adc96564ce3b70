/**
 * Which agent keys the coordinator trusts, and for which host (see queue/enrollment.ts for the
 * protocol). It owns two tables: agent keys (pending until enrolled, then bound to the host id
 * they announced) and enrollment tokens (one use each, kept as a hash). `sync()` reads the
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
import type Database from 'better-sqlite3';
import type { RedisConnection } from '../queue/redis.js';
import { z } from 'zod';
import { FsbenchError, errnoOf } from '../contract/errors.js';
import {
  Announcement, AnnouncementEntry, ApprovalEntry, parseJson, proofMatches, reportMacKey, secretHash, tokenProof, type AgentKeyView, type Approval, type ReportKeyEntry,
} from '../queue/enrollment.js';
import { agentApprovalsKey, agentKeysKey, reportKeyKey } from '../queue/keys.js';
import { keyFingerprint, loadOrCreatePrivateKey, verifyText, type JobSigner } from '../queue/signing.js';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS agent_keys (
  key TEXT PRIMARY KEY, public_key TEXT NOT NULL, report_key TEXT NOT NULL, host_id TEXT NOT NULL, machine TEXT NOT NULL, labels TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('pending', 'enrolled')), via TEXT, first_seen INTEGER NOT NULL, enrolled_at INTEGER
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS enrollment_tokens (
  id TEXT PRIMARY KEY, secret_hash BLOB NOT NULL, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL,
  used_by TEXT, used_at INTEGER, copy INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
`;

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


interface KeyRow {
  key: string;
  public_key: string;
  report_key: string;
  host_id: string;
  machine: string;
  labels: string;
  state: 'pending' | 'enrolled';
  via: 'approval' | 'token' | null;
  first_seen: number;
  enrolled_at: number | null;
}

export interface EnrollmentDeps {
  readonly db: Database.Database;
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
    deps.db.exec(SCHEMA);
    for (const row of deps.db.prepare<[], KeyRow>("SELECT * FROM agent_keys WHERE state = 'enrolled'").all()) this.remember(row);
  }

  private remember(row: KeyRow): void {
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
    const rows = this.deps.db.prepare<[], { state: 'pending' | 'enrolled'; n: number }>('SELECT state, COUNT(*) AS n FROM agent_keys GROUP BY state').all();
    return { enrolled: rows.find((r) => r.state === 'enrolled')?.n ?? 0, pending: rows.find((r) => r.state === 'pending')?.n ?? 0 };
  }

  /** Every key, enrolled first, newest first within each. */
  list(limit = 1000): AgentKeyView[] {
    const rows = this.deps.db.prepare<[number], KeyRow>("SELECT * FROM agent_keys ORDER BY state = 'pending', COALESCE(enrolled_at, first_seen) DESC LIMIT ?").all(limit);
    return rows.map((r) => ({
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
      this.recordPending(key, a);
      if (a.token && this.useToken(a.token.id, a.token.proof, key, a.hostId)) {
        this.enroll({ key, publicKey: a.publicKey, reportKey: a.reportKey, hostId: a.hostId, machine: a.machine, labels: a.labels }, 'token');
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

  private recordPending(key: string, a: Announcement): void {
    const { db } = this.deps;
    const pending = db.prepare<[], { n: number }>("SELECT COUNT(*) AS n FROM agent_keys WHERE state = 'pending'").get()?.n ?? 0;
    if (pending >= MAX_PENDING) db.prepare("DELETE FROM agent_keys WHERE key IN (SELECT key FROM agent_keys WHERE state = 'pending' ORDER BY first_seen LIMIT 100)").run();
    db.prepare(
      `INSERT INTO agent_keys (key, public_key, report_key, host_id, machine, labels, state, first_seen) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?)
       ON CONFLICT (key) DO UPDATE SET report_key = excluded.report_key, host_id = excluded.host_id, machine = excluded.machine, labels = excluded.labels
       WHERE state = 'pending'`,
    ).run(key, a.publicKey, a.reportKey, a.hostId, a.machine, JSON.stringify(a.labels), Date.now());
  }

  /** Marks a token used by `key` when its proof matches and it is unused and unexpired. */
  private useToken(id: string, proof: string, key: string, hostId: string): boolean {
    const { db } = this.deps;
    const row = db.prepare<[string], { secret_hash: Buffer; expires_at: number; used_by: string | null }>('SELECT secret_hash, expires_at, used_by FROM enrollment_tokens WHERE id = ?').get(id);
    if (!row || row.used_by !== null || row.expires_at < Date.now()) return false;
    if (!proofMatches(tokenProof(row.secret_hash, key, hostId), proof)) return false;
    return db.prepare('UPDATE enrollment_tokens SET used_by = ?, used_at = ? WHERE id = ? AND used_by IS NULL').run(key, Date.now(), id).changes === 1;
  }

  private enroll(k: { key: string; publicKey: string; reportKey: string; hostId: string; machine: string; labels: readonly string[] }, via: 'approval' | 'token'): void {
    const now = Date.now();
    this.deps.db
      .prepare(
        `INSERT INTO agent_keys (key, public_key, report_key, host_id, machine, labels, state, via, first_seen, enrolled_at) VALUES (?, ?, ?, ?, ?, ?, 'enrolled', ?, ?, ?)
         ON CONFLICT (key) DO UPDATE SET state = 'enrolled', via = excluded.via, enrolled_at = excluded.enrolled_at, host_id = excluded.host_id,
           report_key = excluded.report_key`,
      )
      .run(k.key, k.publicKey, k.reportKey, k.hostId, k.machine, JSON.stringify(k.labels), via, now, now);
    const row = this.deps.db.prepare<[string], KeyRow>('SELECT * FROM agent_keys WHERE key = ?').get(k.key);
    if (row) this.remember(row);
  }

  /**
   * Enrolls the pending key `selector` names: its fingerprint, its host id or its machine name.
   * One key only: a selector matching several is refused (CONFLICT), naming them.
   */
  async approve(selector: string): Promise<AgentKeyView> {
    await this.sync();
    const rows = this.deps.db
      .prepare<[string, string, string], KeyRow>("SELECT * FROM agent_keys WHERE state = 'pending' AND (key = ? OR host_id = ? OR machine = ?)")
      .all(selector, selector, selector);
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
    const insert = this.deps.db.prepare('INSERT INTO enrollment_tokens (id, secret_hash, created_at, expires_at, copy) VALUES (?, ?, ?, ?, ?)');
    const tokens: string[] = [];
    this.deps.db.transaction(() => {
      // Expired tokens are of no use to anyone: they go as new ones come.
      this.deps.db.prepare('DELETE FROM enrollment_tokens WHERE expires_at < ?').run(now);
      for (let i = 0; i < count; i++) {
        const id = randomBytes(8).readBigUInt64BE().toString(36).padStart(10, '0').slice(-10);
        const secret = randomBytes(32).toString('base64url');
        insert.run(id, secretHash(secret), now, now + ttlMs, copy ? 1 : 0);
        tokens.push(`${id}.${secret}`);
      }
    })();
    return { tokens, expiresAt: new Date(now + ttlMs).toISOString() };
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
    const unused = this.deps.db.prepare<[string, number], { id: string }>('SELECT id FROM enrollment_tokens WHERE id = ? AND used_by IS NULL AND expires_at > ?').get(id, Date.now());
    if (unused) return;
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
