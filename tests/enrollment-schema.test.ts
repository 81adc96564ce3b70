/**
 * A database made before agent keys could be revoked (its agent_keys table as fsbench first
 * released it, whose CHECK allows no 'revoked') opens with its keys as they were, and they can
 * then be revoked and audited.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { Store } from '../coordinator/store/index.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

/** The table as the first release made it. */
const OLD_AGENT_KEYS = `CREATE TABLE agent_keys (
  key TEXT PRIMARY KEY, public_key TEXT NOT NULL, report_key TEXT NOT NULL, host_id TEXT NOT NULL, machine TEXT NOT NULL, labels TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('pending', 'enrolled')), via TEXT, first_seen INTEGER NOT NULL, enrolled_at INTEGER
) WITHOUT ROWID`;

describe('an agent_keys table of an older fsbench', () => {
  it('is upgraded in place: its keys kept, revocable and audited afterwards', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'fsbench-old-keys-'));
    dirs.push(dir);
    const old = new Database(path.join(dir, 'fsbench.db'));
    old.exec(OLD_AGENT_KEYS);
    const insert = old.prepare("INSERT INTO agent_keys VALUES (?, 'pk', 'rk', ?, ?, '[]', ?, ?, 1000, ?)");
    insert.run('SHA256:enrolled', 'host-1', 'box-1', 'enrolled', 'token', 2000);
    insert.run('SHA256:pending', 'host-2', 'box-2', 'pending', null, null);
    // The old CHECK is what the upgrade must lift.
    expect(() => old.prepare("UPDATE agent_keys SET state = 'revoked' WHERE key = 'SHA256:enrolled'").run()).toThrow(/CHECK constraint failed/);
    old.close();

    const store = Store.open(dir);
    try {
      expect(store.agentKeys.list(10).map((r) => [r.key, r.state, r.via, r.enrolled_at, r.approval_id])).toEqual([
        ['SHA256:enrolled', 'enrolled', 'token', 2000, null],
        ['SHA256:pending', 'pending', null, null, null],
      ]);
      expect(store.agentKeys.revoke('SHA256:enrolled', { actor: 'test', action: 'revoke', detail: 'was enrolled' })).toBe(true);
      expect(store.agentKeys.row('SHA256:enrolled')?.state).toBe('revoked');
      expect(store.agentKeys.audit(10).map((a) => [a.action, a.key, a.hostId, a.machine])).toEqual([['revoke', 'SHA256:enrolled', 'host-1', 'box-1']]);
    } finally {
      store.close();
    }
    // Opened again: upgraded once, nothing lost.
    const again = Store.open(dir);
    try {
      expect(again.agentKeys.counts()).toEqual({ enrolled: 0, pending: 1, revoked: 1 });
    } finally {
      again.close();
    }
  });
});
