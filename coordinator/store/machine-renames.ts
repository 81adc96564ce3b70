/**
 * Renaming a machine (`fsbench agents rename`): the enrolled key's binding, the machine's stored
 * runs and the record of the rename change together, in one transaction, so results, compare
 * sides, history and the gate see one machine under its new name and nothing stored is lost. The
 * history's summaries of the matrices whose runs moved are dropped, to be made again from the
 * runs under the new name at the next read (history/ summarises what is not summarised), which
 * joins the old series with the new one whatever already stood under either name.
 */
import type Database from 'better-sqlite3';
import type { AgentKeyRow, AgentKeyTable, ApprovalRecord } from './key-table.js';

/** One rename: a machine called `from` is called `to` since `at` (ms since the epoch). */
export interface MachineRename {
  readonly from: string;
  readonly to: string;
  readonly at: number;
}

export interface RenamedKey {
  readonly row: AgentKeyRow;
  readonly from: string;
  /** How many stored runs moved to the new name. */
  readonly runs: number;
}

export class MachineRenameTable {
  constructor(
    private readonly db: Database.Database,
    private readonly keys: AgentKeyTable,
  ) {}

  /**
   * Binds the enrolled key `key` to machine `to` under a new approval, moves the runs stored under
   * its old name to the new one, and records and audits the rename, in one transaction; undefined
   * when the key is not enrolled. The runs that move are all of the old name's, or, while another
   * enrolled key is still bound to that name (two hosts under one name), only those this key signed.
   */
  rename(key: string, to: string, approval: ApprovalRecord, actor: string, now = Date.now()): RenamedKey | undefined {
    return this.db.transaction((): RenamedKey | undefined => {
      const row = this.keys.row(key);
      if (row?.state !== 'enrolled') return undefined;
      const from = row.machine;
      const shared =
        this.db.prepare<[string, string], { n: number }>("SELECT COUNT(*) AS n FROM agent_keys WHERE machine = ? AND state = 'enrolled' AND key <> ?").get(from, key)?.n ?? 0;
      const args = { from, to, key, all: shared === 0 ? 1 : 0 };
      const moving = 'SELECT DISTINCT matrix_id FROM runs WHERE machine = @from AND (@all = 1 OR signed_by = @key)';
      this.db.prepare(`DELETE FROM history_series_points WHERE matrix_id IN (${moving})`).run(args);
      this.db.prepare(`DELETE FROM history_summarised WHERE matrix_id IN (${moving})`).run(args);
      const runs = this.db.prepare('UPDATE runs SET machine = @to WHERE machine = @from AND (@all = 1 OR signed_by = @key)').run(args).changes;
      this.db
        .prepare('DELETE FROM history_series WHERE machine IN (@from, @to) AND NOT EXISTS (SELECT 1 FROM history_series_points p WHERE p.series_id = history_series.id)')
        .run({ from, to });
      this.db.prepare("UPDATE agent_keys SET machine = ?, approval_id = ?, approval_expires = ? WHERE key = ? AND state = 'enrolled'").run(to, approval.id, approval.expiresAt, key);
      this.db.prepare('INSERT INTO machine_renames (at, old, new, key) VALUES (?, ?, ?, ?)').run(now, from, to, key);
      this.keys.addAudit({ at: now, actor, action: 'rename', key, hostId: row.host_id, machine: to, detail: `from ${from} to ${to}` });
      const renamed = this.keys.row(key);
      return renamed && { row: renamed, from, runs };
    })();
  }

  /**
   * Where the runs of machine `name` went: the name at the end of its renames, each taken after
   * the one before (A -> B, B -> A, A -> C: B's runs are C's), and the first rename; undefined
   * when `name` was never renamed.
   */
  renamedTo(name: string): MachineRename | undefined {
    const next = this.db.prepare<[string, number], { id: number; at: number; new: string }>('SELECT id, at, new FROM machine_renames WHERE old = ? AND id > ? ORDER BY id LIMIT 1');
    const first = next.get(name, 0);
    if (!first) return undefined;
    let step = first;
    // Ids only grow along the chain, so it ends.
    for (let later = next.get(step.new, step.id); later; later = next.get(step.new, step.id)) step = later;
    return { from: name, to: step.new, at: first.at };
  }
}
