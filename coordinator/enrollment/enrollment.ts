/**
 * Which agent keys the coordinator trusts, and for which host (see queue/enrollment.ts for the
 * protocol), over two tables of the store (store/key-table.ts): agent keys (pending until enrolled,
 * then bound to the host id and machine they announced, revoked for good) and enrollment tokens
 * (tokens.ts). `sync()` reads the announcements in Redis, verifying only new or changed ones,
 * enrolls keys that proved a valid token, and writes the approvals of enrolled keys back to Redis
 * for their agents (approvals.ts: the database says which approval counts). Every change is one
 * log line and one audit row.
 *
 * The collector asks `enrolled(key)` for every report: a map in memory, so verifying a report
 * costs one HMAC and no query.
 */
import { createPublicKey, type KeyObject } from 'node:crypto';
import { FsbenchError } from '../../contract/errors.js';
import type { Log } from '../../log/index.js';
import { reportMacKey, rotationStatement, type AgentKeyView, type Approval, type AuditEntryView, type ReportKeyEntry } from '../../queue/enrollment.js';
import { agentApprovalsKey, agentKeysKey, reportKeyKey } from '../../queue/keys.js';
import type { RedisConnection } from '../../queue/redis.js';
import { verifyText, type JobSigner } from '../../queue/signing.js';
import type { AgentKeyRow, AnnouncedKey, ApprovalRecord, AuditAction, EnrolledVia, Store, TokenBinding } from '../store/index.js';
import { verifiedAnnouncement } from './announcements.js';
import { approvalText, judgeForeign, newApproval, renewalDue } from './approvals.js';
import { mintTokens, refreshTokenCopy, UNBOUND, useToken } from './tokens.js';
import { Labels, viewOf } from './views.js';

/** Pending keys kept at most: announcements are free to write, the table must not grow with them. */
const MAX_PENDING = 10_000;
/** New or changed announcements verified per sync (each an Ed25519 verification and a write). */
const NEW_PER_SYNC = 1000;
/** Pending keys of one host id at most: a host's agents share one key, so a few are plenty. */
const MAX_PENDING_PER_HOST = 4;

export interface EnrolledKey {
  readonly key: string;
  readonly publicKey: KeyObject;
  readonly reportKeyPem: string;
  readonly hostId: string;
  readonly machine: string;
  /** What this key's reports are authenticated with (queue/enrollment.ts reportMacKey). */
  readonly macKey: Buffer;
}

/** An enrolled key as this module holds it: with the approval the database holds for it, and its text as written to Redis. */
interface HeldKey extends EnrolledKey {
  readonly approval: ApprovalRecord;
  readonly approvalText: string;
}

export interface EnrollmentDeps {
  readonly store: Store;
  readonly redis: RedisConnection;
  readonly prefix: string;
  readonly signer: JobSigner;
  readonly log: Log;
  /** FSBENCH_ENROLL_TOKEN_COPY: a file kept holding one unused token, for this machine's agents. */
  readonly tokenCopy?: string | undefined;
  /** The coordinator's X25519 report key (views.ts REPORT_KEY_FILE). */
  readonly reportKey: KeyObject;
}

export class Enrollment {
  private readonly byKey = new Map<string, HeldKey>();
  /** Revoked keys: their reports are dropped as such, their approvals removed from Redis. */
  private readonly revoked = new Set<string>();
  /** Announcement text last looked at, per key: an unchanged one is not verified again. */
  private readonly seen = new Map<string, string>();
  /** Foreign approval text last judged to be left alone, per key: not verified again. */
  private readonly ignored = new Map<string, string>();
  /** Whether the last sync found the pending keys full (said once per episode). */
  private fullSaid = false;

  constructor(private readonly deps: EnrollmentDeps) {
    for (const row of deps.store.agentKeys.enrolledRows()) this.remember(row);
    for (const key of deps.store.agentKeys.revokedKeys()) this.revoked.add(key);
  }

  private remember(row: AgentKeyRow): void {
    // A key whose report key is not X25519 (a row edited by hand) cannot report: left out, never a crash at start.
    try {
      const theirs = createPublicKey(row.report_key);
      if (theirs.asymmetricKeyType !== 'x25519') return;
      // A row of a database older than approvals' ids gets its first one here (written to Redis by start()).
      let approval: ApprovalRecord | undefined = row.approval_id !== null && row.approval_expires !== null ? { id: row.approval_id, expiresAt: row.approval_expires } : undefined;
      if (approval === undefined) {
        approval = newApproval();
        this.deps.store.agentKeys.setApproval(row.key, approval);
      }
      const signed: Approval = {
        key: row.key, publicKey: row.public_key, reportKey: row.report_key, hostId: row.host_id, machine: row.machine, ...approval,
        ...(row.rotate_requested === null ? {} : { rotate: true as const }),
      };
      this.byKey.set(row.key, {
        key: row.key,
        publicKey: createPublicKey(row.public_key),
        reportKeyPem: row.report_key,
        hostId: row.host_id,
        machine: row.machine,
        macKey: reportMacKey(this.deps.reportKey, theirs, row.key, row.host_id),
        approval,
        approvalText: approvalText(this.deps.signer, signed),
      });
    } catch {
      return;
    }
  }

  /** The enrolled key with this fingerprint, or undefined. */
  enrolled(key: string): EnrolledKey | undefined {
    return this.byKey.get(key);
  }

  /** Whether the key with this fingerprint was revoked: its reports are dropped and counted as such. */
  isRevoked(key: string): boolean {
    return this.revoked.has(key);
  }

  /** Whether some enrolled key is bound to `hostId`: placements choose among those hosts only. */
  hostEnrolled(hostId: string): boolean {
    for (const k of this.byKey.values()) if (k.hostId === hostId) return true;
    return false;
  }

  /** How many keys are enrolled, wait or were revoked: /metrics, at every scrape. */
  counts(): { enrolled: number; pending: number; revoked: number } {
    return this.deps.store.agentKeys.counts();
  }

  /** Every key, enrolled first, then pending, then revoked, newest first within each. */
  list(limit = 1000): AgentKeyView[] {
    return this.deps.store.agentKeys.list(limit).map(viewOf);
  }

  /** Every change to who is enrolled, newest first. */
  history(limit = 1000): AuditEntryView[] {
    return this.deps.store.agentKeys.audit(limit).map((a) => ({ ...a, at: new Date(a.at).toISOString() }));
  }

  /** Writes the report key, every enrolled key's approval and the token copy: at start. */
  async start(): Promise<void> {
    const publicKey = createPublicKey(this.deps.reportKey).export({ type: 'spki', format: 'pem' }).toString();
    const entry: ReportKeyEntry = { publicKey, signature: this.deps.signer.signReportKey(publicKey) };
    await this.deps.redis.set(reportKeyKey(this.deps.prefix), JSON.stringify(entry));
    const pipe = this.deps.redis.pipeline();
    for (const k of this.byKey.values()) pipe.hset(agentApprovalsKey(this.deps.prefix), k.key, k.approvalText);
    for (const key of this.revoked) pipe.hdel(agentApprovalsKey(this.deps.prefix), key);
    await pipe.exec();
    await refreshTokenCopy(this.deps.store, this.deps.tokenCopy);
  }

  /**
   * Reads the announcements and approvals in Redis: signs again the approvals due, writes back
   * every enrolled key's approval that is missing or not the one the database holds, removes
   * revoked keys' and expired ones, takes in approvals of keys unknown here that this
   * coordinator signed, records new keys as pending and enrolls those with a valid token proof.
   */
  async sync(): Promise<void> {
    const [announced, approvals] = await Promise.all([
      this.deps.redis.hgetall(agentKeysKey(this.deps.prefix)),
      this.deps.redis.hgetall(agentApprovalsKey(this.deps.prefix)),
    ]);
    for (const k of [...this.byKey.values()]) if (renewalDue(k.approval)) this.renew(k);
    const pipe = this.deps.redis.pipeline();
    let writes = 0;
    for (const k of this.byKey.values()) {
      if (approvals[k.key] === k.approvalText) continue;
      pipe.hset(agentApprovalsKey(this.deps.prefix), k.key, k.approvalText);
      writes++;
    }
    for (const [key, raw] of Object.entries(approvals)) {
      if (this.byKey.has(key) || this.ignored.get(key) === raw) continue;
      const judged = judgeForeign(this.deps.signer, key, raw, this.deps.store.agentKeys.row(key));
      if (judged === 'remove') {
        pipe.hdel(agentApprovalsKey(this.deps.prefix), key);
        writes++;
        if (this.revoked.has(key)) this.deps.log(`an approval of the revoked agent key ${key} was found in Redis: removed, the key stays revoked`, { event: 'agent.revoked-approval-removed', key });
      } else if (judged === 'ignore') {
        if (this.ignored.size >= 2 * MAX_PENDING) this.ignored.clear();
        this.ignored.set(key, raw);
      } else {
        const a = judged.take;
        this.enroll({ key, publicKey: a.publicKey, reportKey: a.reportKey, hostId: a.hostId, machine: a.machine, labels: [] }, 'import', { id: a.id, expiresAt: a.expiresAt }, 'coordinator', 'an approval this coordinator signed, found in Redis while its database had no record of the key');
      }
    }
    if (writes > 0) await pipe.exec();
    let full = 0;
    let rotationsRefused = 0;
    // Counted once per look, not per announcement: a flood of them must not cost a scan each.
    let pending = this.deps.store.agentKeys.counts().pending;
    let looked = 0;
    for (const [key, raw] of Object.entries(announced)) {
      if (this.seen.get(key) === raw) continue;
      // A flood is taken in over several looks, the event loop free between them; the rest stay unseen till then.
      if (++looked > NEW_PER_SYNC) break;
      if (this.seen.size >= 2 * MAX_PENDING) this.seen.clear();
      this.seen.set(key, raw);
      const a = verifiedAnnouncement(key, raw);
      if (!a || this.byKey.has(key) || this.revoked.has(key)) continue;
      const announcedKey: AnnouncedKey = { key, publicKey: a.publicKey, reportKey: a.reportKey, hostId: a.hostId, machine: a.machine, labels: a.labels };
      if (a.rotatedFrom) {
        // A rotation enrolls in its old key's place or not at all: never a pending key an operator could approve in error.
        if (!(await this.rotate(announcedKey, a.rotatedFrom))) rotationsRefused++;
        continue;
      }
      // A token enrolls its key whether or not there is room to list it.
      const recorded = this.deps.store.agentKeys.recordPending(announcedKey, pending < MAX_PENDING, MAX_PENDING_PER_HOST);
      if (recorded === 'recorded') pending++;
      if (recorded === 'full' && !a.token) {
        // Looked at again at the next sync, once an operator made room (approved or revoked keys).
        this.seen.delete(key);
        full++;
        continue;
      }
      if (a.token) await this.enrollWithToken(announcedKey, a.token);
    }
    if (rotationsRefused > 0) {
      // Anyone may write announcements: one line per look, never one per forgery.
      this.deps.log(`${rotationsRefused} key rotation(s) refused: the key rotated from is not enrolled (revoked or unknown), its signature does not verify, or the new key claims another host or machine`, {
        event: 'agent.rotation-refused', refused: rotationsRefused,
      });
    }
    if (full > 0 && !this.fullSaid) {
      this.deps.log(`${full} announced agent key(s) not recorded: ${MAX_PENDING} keys wait already, or ${MAX_PENDING_PER_HOST} for their host: approve or revoke some (\`fsbench agents\`)`, { event: 'agent.pending-full', notRecorded: full });
    }
    this.fullSaid = full > 0;
  }

  /**
   * Enrolls `k` with the token its announcement presents, when the token is proven, unused and
   * what it is bound to; a token made to replace revokes the host's live keys in the same
   * transaction. A proven token refused for its binding is logged (its id, never its secret) and
   * stays unused.
   */
  private async enrollWithToken(k: AnnouncedKey, token: { readonly id: string; readonly sealed: string }): Promise<void> {
    const sealed = { id: token.id, sealed: token.sealed, key: k.key, hostId: k.hostId, machine: k.machine, agentReportKey: createPublicKey(k.reportKey), coordinatorKey: this.deps.reportKey };
    const replaced: AgentKeyRow[] = [];
    const use = this.deps.store.agentKeys.atomically(() => {
      const live = this.deps.store.agentKeys.enrolledOfHost(k.hostId);
      const u = useToken(this.deps.store, sealed);
      if (u.state !== 'used') return u;
      const detail = u.replaces && live.length > 0 ? `token ${token.id}, replacing ${live.map((r) => r.key).join(', ')}` : `token ${token.id}`;
      this.enroll(k, 'token', newApproval(), `agent ${k.key}`, detail);
      if (u.replaces) for (const old of live) if (this.revokeRow(old, `agent ${k.key}`, `replaced by ${k.key} (token ${token.id})`)) replaced.push(old);
      return u;
    });
    if (use.state === 'refused') {
      this.deps.log(`enrollment token ${token.id} refused for agent key ${k.key} of ${k.machine} (host ${k.hostId}): ${use.reason}; the token stays unused`, {
        event: 'agent.token-refused', tokenId: token.id, key: k.key, hostId: k.hostId, machine: k.machine, reason: use.reason,
      });
    }
    if (use.state !== 'used') return;
    const held = this.byKey.get(k.key);
    if (held) await this.deps.redis.hset(agentApprovalsKey(this.deps.prefix), k.key, held.approvalText);
    for (const old of replaced) await this.forgetInRedis(old.key);
    await refreshTokenCopy(this.deps.store, this.deps.tokenCopy);
  }

  /**
   * Enrolls `k` in the place of the enrolled key it rotates from, when that key signed the
   * hand-over (queue/enrollment.ts rotationStatement) and `k` claims the same host and machine;
   * the old key is revoked in the same transaction. False, enrolling nothing, otherwise.
   */
  private async rotate(k: AnnouncedKey, from: { readonly key: string; readonly signature: string }): Promise<boolean> {
    const old = this.byKey.get(from.key);
    if (!old || old.hostId !== k.hostId || old.machine !== k.machine) return false;
    if (!verifyText(old.publicKey, 'rotation', rotationStatement(old.key, k.key, k), from.signature)) return false;
    const askedBy = this.deps.store.agentKeys.row(old.key)?.rotate_requested ?? null;
    const actor = `agent ${old.key}`;
    const detail = `rotated from ${old.key}, ${askedBy === null ? 'by the agent itself (its key reached FSBENCH_KEY_MAX_AGE)' : `asked by ${askedBy}`}`;
    const row = this.deps.store.agentKeys.atomically(() => {
      const enrolled = this.deps.store.agentKeys.enroll(k, 'rotate', newApproval(), { actor, action: 'rotate', detail });
      if (enrolled) this.deps.store.agentKeys.revoke(old.key, { actor, action: 'revoke', detail: `rotated to ${k.key}` });
      return enrolled;
    });
    if (!row) return false;
    this.remember(row);
    this.byKey.delete(old.key);
    this.revoked.add(old.key);
    const held = this.byKey.get(k.key);
    if (held) await this.deps.redis.hset(agentApprovalsKey(this.deps.prefix), k.key, held.approvalText);
    await this.forgetInRedis(old.key);
    this.deps.log(`agent key ${k.key} of ${k.machine} (host ${k.hostId}) enrolled (rotate) by ${actor}: ${detail}; ${old.key} revoked`, {
      event: 'agent.enrollment', action: 'rotate', actor, key: k.key, hostId: k.hostId, machine: k.machine, detail, revoked: old.key,
    });
    return true;
  }

  /** Signs a new approval for an enrolled key, before its current one expires. */
  private renew(k: HeldKey): void {
    const row = this.deps.store.agentKeys.row(k.key);
    if (row?.state !== 'enrolled') return;
    this.deps.store.agentKeys.setApproval(k.key, newApproval());
    const renewed = this.deps.store.agentKeys.row(k.key);
    if (renewed) this.remember(renewed);
  }

  /** Enrolls a key, audits and logs it; undefined when it was revoked (it stays so). */
  private enroll(k: AnnouncedKey, via: EnrolledVia, approval: ApprovalRecord, actor: string, detail: string): HeldKey | undefined {
    const action: AuditAction = via === 'token' ? 'enroll-token' : via === 'import' ? 'import' : 'approve';
    const row = this.deps.store.agentKeys.enroll(k, via, approval, { actor, action, detail });
    if (!row) return undefined;
    this.remember(row);
    this.deps.log(`agent key ${k.key} of ${k.machine} (host ${k.hostId}) enrolled (${action}) by ${actor}: ${detail}`, {
      event: 'agent.enrollment', action, actor, key: k.key, hostId: k.hostId, machine: k.machine, detail,
    });
    return this.byKey.get(k.key);
  }

  /**
   * Enrolls the pending key `selector` names: its fingerprint, its host id or its machine name.
   * One key only: a selector matching several is refused (CONFLICT), naming them.
   */
  async approve(selector: string, actor = 'operator'): Promise<AgentKeyView> {
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
    const k = this.enroll(
      { key: row.key, publicKey: row.public_key, reportKey: row.report_key, hostId: row.host_id, machine: row.machine, labels: Labels.parse(JSON.parse(row.labels)) },
      'approval',
      newApproval(),
      actor,
      'approved by an operator',
    );
    if (!k) throw new FsbenchError('CONFLICT', `agent key ${row.key} was revoked meanwhile`);
    await this.deps.redis.hset(agentApprovalsKey(this.deps.prefix), row.key, k.approvalText);
    return this.view(row.key);
  }

  /**
   * Revokes the key `selector` names (its fingerprint, or the host id or machine name of exactly
   * one enrolled or pending key), for good: its approval goes from Redis, its reports are dropped,
   * and nothing in Redis enrolls it again. A host that is to work again enrolls a new key.
   */
  revoke(selector: string, actor = 'operator'): AgentKeyView {
    const row = this.oneKeyNamed(selector, ['enrolled', 'pending'], 'revoke');
    this.revokeRow(row, actor, `was ${row.state}`);
    void this.forgetInRedis(row.key);
    return this.view(row.key);
  }

  /**
   * Asks the agent of the enrolled key `selector` names to rotate: its approval, signed anew, says
   * so, and the agent makes a new key when idle between runs and hands its enrollment over to it
   * (rotate() above), after which this key is revoked. The database decided; Redis is told when it
   * answers (sync() writes back an approval that is not the one the database holds).
   */
  requestRotation(selector: string, actor = 'operator'): AgentKeyView {
    const row = this.oneKeyNamed(selector, ['enrolled'], 'rotate');
    if (!this.deps.store.agentKeys.requestRotation(row.key, actor, newApproval())) throw new FsbenchError('CONFLICT', `agent key ${row.key} was revoked meanwhile`);
    const asked = this.deps.store.agentKeys.row(row.key);
    if (asked) this.remember(asked);
    const held = this.byKey.get(row.key);
    if (held) this.deps.redis.hset(agentApprovalsKey(this.deps.prefix), row.key, held.approvalText).catch(() => undefined);
    this.deps.log(`agent key ${row.key} of ${row.machine} (host ${row.host_id}) asked to rotate by ${actor}`, {
      event: 'agent.rotation-requested', actor, key: row.key, hostId: row.host_id, machine: row.machine,
    });
    return this.view(row.key);
  }

  /** The one key in `states` that `selector` names (its fingerprint, host id or machine name); NOT_FOUND or CONFLICT otherwise. */
  private oneKeyNamed(selector: string, states: readonly AgentKeyRow['state'][], verb: string): AgentKeyRow {
    const rows = this.deps.store.agentKeys.list(MAX_PENDING * 2).filter((r) => states.includes(r.state) && (r.key === selector || r.host_id === selector || r.machine === selector));
    const [row, ...more] = rows;
    if (!row) throw new FsbenchError('NOT_FOUND', `no ${states.join(' or ')} agent key is called ${selector}: \`fsbench agents\` lists them (key, host and machine)`);
    if (more.length > 0) {
      throw new FsbenchError('CONFLICT', `${selector} names ${rows.length} agent keys (${rows.map((r) => `${r.key} on host ${r.host_id}, ${r.state}`).join(', ')}): ${verb} one by its key`);
    }
    return row;
  }

  /** Revokes a key in the database and in memory, logged; false when it was revoked already. */
  private revokeRow(row: AgentKeyRow, actor: string, detail: string): boolean {
    if (!this.deps.store.agentKeys.revoke(row.key, { actor, action: 'revoke', detail })) return false;
    this.byKey.delete(row.key);
    this.revoked.add(row.key);
    this.deps.log(`agent key ${row.key} of ${row.machine} (host ${row.host_id}) revoked by ${actor}`, {
      event: 'agent.enrollment', action: 'revoke', actor, key: row.key, hostId: row.host_id, machine: row.machine, detail,
    });
    return true;
  }

  /**
   * Removes a revoked key's approval and announcement from Redis. The database decided; Redis is
   * told when it answers (sync() removes the approval otherwise).
   */
  private async forgetInRedis(key: string): Promise<void> {
    await this.deps.redis.multi().hdel(agentApprovalsKey(this.deps.prefix), key).hdel(agentKeysKey(this.deps.prefix), key).exec().catch(() => undefined);
  }

  /**
   * Renames the machine of the one enrolled key `selector` names (its fingerprint, host id or
   * machine name), with its stored runs (store/machine-renames.ts): a new approval binds the key
   * to `machine`, and its agent reports under that name from its next look at the approval. A
   * name another enrolled key is bound to is refused; a rename to the name it has changes nothing.
   */
  rename(selector: string, machine: string, actor = 'operator'): AgentKeyView {
    const held = [...this.byKey.values()];
    const named = held.filter((k) => k.key === selector || k.hostId === selector || k.machine === selector);
    const [k, ...others] = named;
    if (!k) throw new FsbenchError('NOT_FOUND', `no enrolled agent key is called ${selector}: \`fsbench agents\` lists them (key, host and machine); a waiting key is approved under the name it announced`);
    if (others.length > 0) {
      const which = named.map((n) => `${n.key} on host ${n.hostId} (${n.machine})`).join(', ');
      throw new FsbenchError('CONFLICT', `${selector} names ${named.length} enrolled agent keys (${which}): rename one by its key`);
    }
    if (k.machine === machine) return this.view(k.key);
    const holder = held.find((h) => h.machine === machine);
    if (holder) {
      throw new FsbenchError('CONFLICT', `machine name ${machine} is bound to the enrolled agent key ${holder.key} on host ${holder.hostId}: choose another name, or rename or revoke that key first`);
    }
    const renamed = this.deps.store.renames.rename(k.key, machine, newApproval(), actor);
    if (!renamed) throw new FsbenchError('CONFLICT', `agent key ${k.key} was revoked meanwhile`);
    this.remember(renamed.row);
    const now = this.byKey.get(k.key);
    // The database decided; a Redis that does not answer now gets the approval from sync().
    if (now) this.deps.redis.hset(agentApprovalsKey(this.deps.prefix), k.key, now.approvalText).catch(() => undefined);
    const detail = `from ${renamed.from} to ${machine}`;
    this.deps.log(`machine ${renamed.from} (agent key ${k.key}, host ${k.hostId}) renamed ${machine} by ${actor}, with its ${renamed.runs} stored runs`, {
      event: 'agent.enrollment', action: 'rename', actor, key: k.key, hostId: k.hostId, machine, detail, runs: renamed.runs,
    });
    return viewOf(renamed.row);
  }

  private view(key: string): AgentKeyView {
    const row = this.deps.store.agentKeys.row(key);
    if (!row) throw new FsbenchError('INTERNAL', `agent key ${key} vanished`);
    return viewOf(row);
  }

  /** New one-time tokens, valid for `ttlMs`, bound to `binding`: `<id>.<secret>`, shown once; only the secret's hash is kept. */
  mintTokens(count: number, ttlMs: number, binding: TokenBinding = UNBOUND): { tokens: string[]; expiresAt: string } {
    return mintTokens(this.deps.store, count, ttlMs, binding);
  }
}
