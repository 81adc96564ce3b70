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
  state: 'pending' | 'enrolled';
  via: 'approval' | 'token' | null;
  first_seen: number;
  enrolled_at: number | null;
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

/** Pending keys dropped at once, oldest first, when there are too many. */
const PENDING_DROPPED = 100;

export class AgentKeyTable {
  constructor(private readonly db: Database.Database) {}

  enrolledRows(): AgentKeyRow[] {
    return this.db.prepare<[], AgentKeyRow>("SELECT * FROM agent_keys WHERE state = 'enrolled'").all();
  }

  /** How many keys are enrolled and how many wait. */
  counts(): { enrolled: number; pending: number } {
    const rows = this.db.prepare<[], { state: 'pending' | 'enrolled'; n: number }>('SELECT state, COUNT(*) AS n FROM agent_keys GROUP BY state').all();
    return { enrolled: rows.find((r) => r.state === 'enrolled')?.n ?? 0, pending: rows.find((r) => r.state === 'pending')?.n ?? 0 };
  }

  /** Every key, enrolled first, newest first within each. */
  list(limit: number): AgentKeyRow[] {
    return this.db.prepare<[number], AgentKeyRow>("SELECT * FROM agent_keys ORDER BY state = 'pending', COALESCE(enrolled_at, first_seen) DESC LIMIT ?").all(limit);
  }

  /**
   * Records an announced key as pending, or updates a pending one; an enrolled key stays as it
   * was. With `maxPending` keys waiting already, the oldest go first: announcements are free to
   * write, and the table must not grow with them.
   */
  recordPending(k: AnnouncedKey, maxPending: number): void {
    const pending = this.db.prepare<[], { n: number }>("SELECT COUNT(*) AS n FROM agent_keys WHERE state = 'pending'").get()?.n ?? 0;
    if (pending >= maxPending) {
      this.db
        .prepare<[number]>("DELETE FROM agent_keys WHERE key IN (SELECT key FROM agent_keys WHERE state = 'pending' ORDER BY first_seen LIMIT ?)")
        .run(PENDING_DROPPED);
    }
    this.db
      .prepare(
        `INSERT INTO agent_keys (key, public_key, report_key, host_id, machine, labels, state, first_seen) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?)
         ON CONFLICT (key) DO UPDATE SET report_key = excluded.report_key, host_id = excluded.host_id, machine = excluded.machine, labels = excluded.labels
         WHERE state = 'pending'`,
      )
      .run(k.key, k.publicKey, k.reportKey, k.hostId, k.machine, JSON.stringify(k.labels), Date.now());
  }

  /** Enrolls a key (pending or not yet seen); returns its row as written. */
  enroll(k: AnnouncedKey, via: 'approval' | 'token'): AgentKeyRow | undefined {
    const now = Date.now();
    this.db
      .prepare(
        `INSERT INTO agent_keys (key, public_key, report_key, host_id, machine, labels, state, via, first_seen, enrolled_at) VALUES (?, ?, ?, ?, ?, ?, 'enrolled', ?, ?, ?)
         ON CONFLICT (key) DO UPDATE SET state = 'enrolled', via = excluded.via, enrolled_at = excluded.enrolled_at, host_id = excluded.host_id,
           report_key = excluded.report_key`,
      )
      .run(k.key, k.publicKey, k.reportKey, k.hostId, k.machine, JSON.stringify(k.labels), via, now, now);
    return this.db.prepare<[string], AgentKeyRow>('SELECT * FROM agent_keys WHERE key = ?').get(k.key);
  }

  /** The pending keys `selector` names: by their fingerprint, host id or machine name. */
  pendingNamed(selector: string): AgentKeyRow[] {
    return this.db
      .prepare<[string, string, string], AgentKeyRow>("SELECT * FROM agent_keys WHERE state = 'pending' AND (key = ? OR host_id = ? OR machine = ?)")
      .all(selector, selector, selector);
  }

  /** An enrollment token by its id. */
  token(id: string): { secretHash: Buffer; expiresAt: number; usedBy: string | null } | undefined {
    const row = this.db
      .prepare<[string], { secret_hash: Buffer; expires_at: number; used_by: string | null }>('SELECT secret_hash, expires_at, used_by FROM enrollment_tokens WHERE id = ?')
      .get(id);
    return row && { secretHash: row.secret_hash, expiresAt: row.expires_at, usedBy: row.used_by };
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
  addTokens(tokens: readonly { readonly id: string; readonly secretHash: Buffer }[], now: number, expiresAt: number, copy: boolean): void {
    const insert = this.db.prepare('INSERT INTO enrollment_tokens (id, secret_hash, created_at, expires_at, copy) VALUES (?, ?, ?, ?, ?)');
    this.db.transaction(() => {
      this.db.prepare('DELETE FROM enrollment_tokens WHERE expires_at < ?').run(now);
      for (const t of tokens) insert.run(t.id, t.secretHash, now, expiresAt, copy ? 1 : 0);
    })();
  }
}
