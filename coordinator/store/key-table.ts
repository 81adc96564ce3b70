/**
 * The enrollment tables: agent keys (pending until enrolled, then bound to the host id they
 * announced) and one-time enrollment tokens (kept as a hash of their secret). Who is enrolled,
 * and on what proof, enrollment/ decides; this module only reads and writes.
 */
import type Database from 'better-sqlite3';

export interface AgentKeyRow {
  key: string;
  public_key: string;
  report_key: string;
  host_id: string;
  machine: string;
  labels: string;
  state: 'pending' | 'enrolled' | 'revoked';
  via: EnrolledVia | null;
  first_seen: number;
  enrolled_at: number | null;
  /** The approval last signed for the key (queue/enrollment.ts Approval): only that one counts. */
  approval_id: string | null;
  approval_expires: number | null;
  revoked_at: number | null;
  /** Who asked this key's agent to rotate (`fsbench agents rotate`), until it did. */
  rotate_requested: string | null;
}

/** How a key came to be enrolled: an operator's approval, a token, an approval this coordinator signed that its database had no record of, or its agent's enrolled key handing over to it. */
export type EnrolledVia = 'approval' | 'token' | 'import' | 'rotate';

/** The approval signed for an enrolled key: its id and until when it holds. */
export interface ApprovalRecord {
  readonly id: string;
  readonly expiresAt: number;
}

/** One change to who is enrolled, as the audit keeps it. */
export interface AuditRow {
  readonly at: number;
  /** Who asked: `api <address>`, `agent <key>`, or `coordinator`. */
  readonly actor: string;
  readonly action: AuditAction;
  readonly key: string;
  readonly hostId: string;
  readonly machine: string;
  readonly detail: string;
}
export type AuditAction = 'enroll-token' | 'approve' | 'import' | 'revoke' | 'rotate' | 'rename';

/** What an enrollment token is bound to at creation: a machine, a host, and whether it may replace a host's live key. */
export interface TokenBinding {
  readonly machine: string | null;
  readonly hostId: string | null;
  readonly replace: boolean;
}

/** An agent key as announced: what a pending or enrolled row records of it. */
export interface AnnouncedKey {
  readonly key: string;
  readonly publicKey: string;
  readonly reportKey: string;
  readonly hostId: string;
  readonly machine: string;
  readonly labels: readonly string[];
}

export class AgentKeyTable {
  constructor(private readonly db: Database.Database) {}

  enrolledRows(): AgentKeyRow[] {
    return this.db.prepare<[], AgentKeyRow>("SELECT * FROM agent_keys WHERE state = 'enrolled'").all();
  }

  /** How many keys are enrolled and how many wait. */
  counts(): { enrolled: number; pending: number; revoked: number } {
    const rows = this.db.prepare<[], { state: AgentKeyRow['state']; n: number }>('SELECT state, COUNT(*) AS n FROM agent_keys GROUP BY state').all();
    const n = (state: AgentKeyRow['state']) => rows.find((r) => r.state === state)?.n ?? 0;
    return { enrolled: n('enrolled'), pending: n('pending'), revoked: n('revoked') };
  }

  /** A key's row, whatever its state. */
  row(key: string): AgentKeyRow | undefined {
    return this.db.prepare<[string], AgentKeyRow>('SELECT * FROM agent_keys WHERE key = ?').get(key);
  }

  /** The fingerprints of every revoked key: their reports are dropped as such. */
  revokedKeys(): string[] {
    return this.db.prepare<[], { key: string }>("SELECT key FROM agent_keys WHERE state = 'revoked'").all().map((r) => r.key);
  }

  /** Every key, enrolled first, then pending, then revoked, newest first within each. */
  list(limit: number): AgentKeyRow[] {
    return this.db.prepare<[number], AgentKeyRow>("SELECT * FROM agent_keys ORDER BY CASE state WHEN 'enrolled' THEN 0 WHEN 'pending' THEN 1 ELSE 2 END, COALESCE(enrolled_at, first_seen) DESC LIMIT ?").all(limit);
  }

  /**
   * Records an announced key as pending, as it was first announced: a pending key's host and
   * machine never change after it is listed, so what an operator approves is what they saw. No
   * pending key is ever pushed out by another: without `room` (the caller counts the keys
   * waiting), or with `maxPerHost` waiting for its host id, a new one is not recorded ('full'),
   * and is looked at again later.
   */
  recordPending(k: AnnouncedKey, room: boolean, maxPerHost: number): 'recorded' | 'known' | 'full' {
    if (this.row(k.key) !== undefined) return 'known';
    if (!room) return 'full';
    const sameHost = this.db.prepare<[string], { n: number }>("SELECT COUNT(*) AS n FROM agent_keys WHERE host_id = ? AND state = 'pending'").get(k.hostId)?.n ?? 0;
    if (sameHost >= maxPerHost) return 'full';
    this.db
      .prepare("INSERT INTO agent_keys (key, public_key, report_key, host_id, machine, labels, state, first_seen) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?)")
      .run(k.key, k.publicKey, k.reportKey, k.hostId, k.machine, JSON.stringify(k.labels), Date.now());
    return 'recorded';
  }

  /**
   * Enrolls a key (pending or not yet seen) under the approval `approval`, and audits it, in one
   * transaction; returns its row as written. A revoked key stays revoked: undefined.
   */
  enroll(k: AnnouncedKey, via: EnrolledVia, approval: ApprovalRecord, audit: Omit<AuditRow, 'key' | 'hostId' | 'machine' | 'at'>): AgentKeyRow | undefined {
    const now = Date.now();
    return this.db.transaction(() => {
      const changed = this.db
        .prepare(
          `INSERT INTO agent_keys (key, public_key, report_key, host_id, machine, labels, state, via, first_seen, enrolled_at, approval_id, approval_expires)
           VALUES (?, ?, ?, ?, ?, ?, 'enrolled', ?, ?, ?, ?, ?)
           ON CONFLICT (key) DO UPDATE SET state = 'enrolled', via = excluded.via, enrolled_at = excluded.enrolled_at, host_id = excluded.host_id,
             report_key = excluded.report_key, machine = excluded.machine, approval_id = excluded.approval_id, approval_expires = excluded.approval_expires
           WHERE state != 'revoked'`,
        )
        .run(k.key, k.publicKey, k.reportKey, k.hostId, k.machine, JSON.stringify(k.labels), via, now, now, approval.id, approval.expiresAt).changes;
      if (changed !== 1) return undefined;
      this.addAudit({ ...audit, at: now, key: k.key, hostId: k.hostId, machine: k.machine });
      return this.row(k.key);
    })();
  }

  /** Records the approval signed anew for an enrolled key (renewed before it expires). */
  setApproval(key: string, approval: ApprovalRecord): void {
    this.db.prepare("UPDATE agent_keys SET approval_id = ?, approval_expires = ? WHERE key = ? AND state = 'enrolled'").run(approval.id, approval.expiresAt, key);
  }

  /** Records that `actor` asked an enrolled key's agent to rotate, with the approval that says so; false when the key is not enrolled. */
  requestRotation(key: string, actor: string, approval: ApprovalRecord): boolean {
    return this.db
      .prepare("UPDATE agent_keys SET rotate_requested = ?, approval_id = ?, approval_expires = ? WHERE key = ? AND state = 'enrolled'")
      .run(actor, approval.id, approval.expiresAt, key).changes === 1;
  }

  /** The keys enrolled for `hostId`. */
  enrolledOfHost(hostId: string): AgentKeyRow[] {
    return this.db.prepare<[string], AgentKeyRow>("SELECT * FROM agent_keys WHERE host_id = ? AND state = 'enrolled'").all(hostId);
  }

  /** Runs `fn` in one transaction (nested ones are savepoints): an enrollment and the revocations it implies, all or none. */
  atomically<T>(fn: () => T): T {
    return this.db.transaction(fn)();
  }

  /** Revokes a key for good and audits it, in one transaction; false when it was revoked already. */
  revoke(key: string, audit: Omit<AuditRow, 'key' | 'hostId' | 'machine' | 'at'>): boolean {
    const now = Date.now();
    return this.db.transaction(() => {
      const row = this.row(key);
      if (!row || row.state === 'revoked') return false;
      this.db.prepare("UPDATE agent_keys SET state = 'revoked', revoked_at = ?, approval_id = NULL, approval_expires = NULL WHERE key = ?").run(now, key);
      this.addAudit({ ...audit, at: now, key, hostId: row.host_id, machine: row.machine });
      return true;
    })();
  }

  /** Adds one row to the audit. */
  addAudit(a: AuditRow): void {
    this.db
      .prepare('INSERT INTO enrollment_audit (at, actor, action, key, host_id, machine, detail) VALUES (?, ?, ?, ?, ?, ?, ?)')
      .run(a.at, a.actor, a.action, a.key, a.hostId, a.machine, a.detail);
  }

  /** The audit, newest first. */
  audit(limit: number): AuditRow[] {
    return this.db
      .prepare<[number], { at: number; actor: string; action: AuditAction; key: string; host_id: string; machine: string; detail: string }>(
        'SELECT at, actor, action, key, host_id, machine, detail FROM enrollment_audit ORDER BY id DESC LIMIT ?',
      )
      .all(limit)
      .map((r) => ({ at: r.at, actor: r.actor, action: r.action, key: r.key, hostId: r.host_id, machine: r.machine, detail: r.detail }));
  }

  /** The pending keys `selector` names: by their fingerprint, host id or machine name. */
  pendingNamed(selector: string): AgentKeyRow[] {
    return this.db
      .prepare<[string, string, string], AgentKeyRow>("SELECT * FROM agent_keys WHERE state = 'pending' AND (key = ? OR host_id = ? OR machine = ?)")
      .all(selector, selector, selector);
  }

  /** An enrollment token by its id. */
  token(id: string): { secretHash: Buffer; expiresAt: number; usedBy: string | null; binding: TokenBinding } | undefined {
    const row = this.db
      .prepare<[string], { secret_hash: Buffer; expires_at: number; used_by: string | null; machine: string | null; host_id: string | null; replace_live: number }>(
        'SELECT secret_hash, expires_at, used_by, machine, host_id, replace_live FROM enrollment_tokens WHERE id = ?',
      )
      .get(id);
    return row && { secretHash: row.secret_hash, expiresAt: row.expires_at, usedBy: row.used_by, binding: { machine: row.machine, hostId: row.host_id, replace: row.replace_live === 1 } };
  }

  /** Marks a token used by `key`; false when another used it first. */
  useToken(id: string, key: string): boolean {
    return this.db.prepare('UPDATE enrollment_tokens SET used_by = ?, used_at = ? WHERE id = ? AND used_by IS NULL').run(key, Date.now(), id).changes === 1;
  }

  /** Whether the token `id` is unused and not expired. */
  tokenUnused(id: string): boolean {
    return this.db.prepare<[string, number], { id: string }>('SELECT id FROM enrollment_tokens WHERE id = ? AND used_by IS NULL AND expires_at > ?').get(id, Date.now()) !== undefined;
  }

  /** Stores new tokens, each valid until `expiresAt`, and forgets the expired ones, in one transaction. */
  addTokens(tokens: readonly { readonly id: string; readonly secretHash: Buffer }[], now: number, expiresAt: number, copy: boolean, binding: TokenBinding): void {
    const insert = this.db.prepare('INSERT INTO enrollment_tokens (id, secret_hash, created_at, expires_at, copy, machine, host_id, replace_live) VALUES (?, ?, ?, ?, ?, ?, ?, ?)');
    this.db.transaction(() => {
      this.db.prepare('DELETE FROM enrollment_tokens WHERE expires_at < ?').run(now);
      for (const t of tokens) insert.run(t.id, t.secretHash, now, expiresAt, copy ? 1 : 0, binding.machine, binding.hostId, binding.replace ? 1 : 0);
    })();
  }
}
