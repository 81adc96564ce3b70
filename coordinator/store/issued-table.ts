/**
 * The `issued_jobs` table: each job the coordinator signed, by the run it is (matrix, cell,
 * target, repetition) and the SHA-256 of its signature (queue/signing.ts signatureDigest), which
 * is what a report names to say which job it answers. Written before the job reaches Redis, so no
 * report can arrive for a job not recorded yet; kept on disk, so jobs in flight across a restart
 * of the coordinator are still known. A run queued again (recovery) is issued again with a new
 * signature while the job already queued keeps its own: a run may have several rows, and a report
 * naming any of them answers it. Rows go with their matrix.
 *
 * `unbound_matrices` lists the matrices that existed when the database gained `issued_jobs`: their
 * jobs were signed by an older coordinator that recorded none, so their reports cannot be bound.
 */
import type Database from 'better-sqlite3';
import { preparedOnce } from './schema.js';

/** One job as issued: which run, and the digest of the signature it carries. */
export interface IssuedJob {
  readonly matrixId: string;
  readonly cellId: string;
  readonly target: string;
  readonly repetition: number;
  readonly digest: string;
}

export class IssuedJobTable {
  /** Read once: the list only ever shrinks (its matrices deleted), and it is asked per report. */
  private readonly unbound: ReadonlySet<string>;

  constructor(private readonly db: Database.Database) {
    this.unbound = new Set(db.prepare<[], { matrix_id: string }>('SELECT matrix_id FROM unbound_matrices').all().map((r) => r.matrix_id));
  }

  /** Prepared once: the collector asks for every report it stores. */
  private readonly s = preparedOnce(() => ({
    insert: this.db.prepare<[string, string, string, number, string]>(
      'INSERT OR IGNORE INTO issued_jobs (matrix_id, cell_id, target, repetition, digest) VALUES (?, ?, ?, ?, ?)',
    ),
    has: this.db.prepare<[string, string, string, number, string], { one: number }>(
      'SELECT 1 AS one FROM issued_jobs WHERE matrix_id = ? AND cell_id = ? AND target = ? AND repetition = ? AND digest = ?',
    ),
  }));

  /** Records jobs about to be queued, in one transaction. */
  record(jobs: readonly IssuedJob[]): void {
    if (jobs.length === 0) return;
    const { insert } = this.s();
    this.db.transaction(() => {
      for (const j of jobs) insert.run(j.matrixId, j.cellId, j.target, j.repetition, j.digest);
    })();
  }

  /** Whether this coordinator issued the run a job with a signature of this digest. */
  issued(j: IssuedJob): boolean {
    return this.s().has.get(j.matrixId, j.cellId, j.target, j.repetition, j.digest) !== undefined;
  }

  /** Whether a matrix's jobs were issued before jobs were recorded (see the module's comment). */
  unboundMatrix(matrixId: string): boolean {
    return this.unbound.has(matrixId);
  }
}
