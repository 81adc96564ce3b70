/**
 * Copies of the results database, the record users rely on once history matters. A backup is
 * taken with `VACUUM INTO` while the coordinator keeps writing (WAL: its writes
 * never wait for the copy), and is checked before it gets its name. A restore refuses a file that
 * is not a sound fsbench database and a database a running coordinator has open, and keeps the
 * database it replaces.
 */
import { randomUUID } from 'node:crypto';
import { constants as fsc, createReadStream, createWriteStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import fs from 'node:fs/promises';
import path from 'node:path';
import Database from 'better-sqlite3';
import { FsbenchError, messageOf } from '../../contract/errors.js';
import { DATABASE_FILE, privately } from './schema.js';


/** Tables every fsbench database has; a file without them is not one. */
const REQUIRED_TABLES = ['matrices', 'cells', 'runs'] as const;

export interface DatabaseSummary {
  readonly matrices: number;
  readonly runs: number;
  readonly bytes: number;
}

/** Opens `file` read-only and checks it is a sound fsbench database; BACKUP_INVALID names what is wrong. */
async function verify(file: string): Promise<DatabaseSummary> {
  let db: Database.Database | undefined;
  try {
    db = new Database(file, { readonly: true, fileMustExist: true });
    const integrity = db.pragma('integrity_check', { simple: true });
    if (integrity !== 'ok') throw new FsbenchError('BACKUP_INVALID', `${file} fails SQLite's integrity check: ${String(integrity)}`);
    const tables = new Set(db.prepare<[], { name: string }>("SELECT name FROM sqlite_schema WHERE type = 'table'").all().map((r) => r.name));
    const missing = REQUIRED_TABLES.filter((t) => !tables.has(t));
    if (missing.length > 0) throw new FsbenchError('BACKUP_INVALID', `${file} is an SQLite database but not fsbench's: it has no ${missing.join(', ')} table`);
    const count = (table: string) => db?.prepare<[], { n: number }>(`SELECT count(*) AS n FROM ${table}`).get()?.n ?? 0;
    return { matrices: count('matrices'), runs: count('runs'), bytes: (await fs.stat(file)).size };
  } catch (err) {
    if (err instanceof FsbenchError) throw err;
    throw new FsbenchError('BACKUP_INVALID', `${file} cannot be read as an fsbench database: ${messageOf(err)}`);
  } finally {
    db?.close();
  }
}

async function refuseExisting(file: string): Promise<void> {
  try {
    await fs.lstat(file);
  } catch {
    return;
  }
  throw new FsbenchError('CONFIG_INVALID', `${file} exists already: name a new file (a backup never overwrites one)`);
}

/**
 * Copies the database of `dataDir` to `dest`, a new file, while the coordinator may be writing
 * to it. `VACUUM INTO` reads the database in one read transaction: a consistent point in time,
 * which a busy writer cannot restart (the online backup API starts over whenever another
 * process writes between its steps, and a collector storing runs every few milliseconds would
 * keep it from ever finishing). The copy is written under a temporary name beside `dest`,
 * checked, and only then renamed: a file named `dest` is always a complete, sound database.
 */
export async function backupDatabase(dataDir: string, dest: string): Promise<DatabaseSummary> {
  const source = path.join(dataDir, DATABASE_FILE);
  await refuseExisting(dest);
  let db: Database.Database;
  try {
    db = new Database(source, { readonly: true, fileMustExist: true });
  } catch (err) {
    throw new FsbenchError('CONFIG_INVALID', `there is no results database at ${source} (${messageOf(err)}): set FSBENCH_DATA_DIR to the coordinator's data directory`);
  }
  const partial = path.join(path.dirname(path.resolve(dest)), `.${path.basename(dest)}.${randomUUID()}.partial`);
  try {
    // 0600 from its first byte: a backup holds what the database does.
    privately(() => db.prepare('VACUUM INTO ?').run(partial));
    const summary = await verify(partial);
    await refuseExisting(dest);
    await fs.rename(partial, dest);
    return summary;
  } catch (err) {
    await fs.rm(partial, { force: true });
    if (err instanceof FsbenchError) throw err;
    throw new FsbenchError('CONFIG_INVALID', `cannot write the backup ${dest}: ${messageOf(err)}`);
  } finally {
    db.close();
  }
}

/** Whether a process has `file` open: in WAL mode every open connection blocks an exclusive lock. */
function assertUnused(file: string): void {
  let db: Database.Database | undefined;
  try {
    db = new Database(file, { fileMustExist: true, timeout: 0 });
    db.pragma('locking_mode = EXCLUSIVE');
    db.exec('BEGIN EXCLUSIVE');
    db.exec('COMMIT');
  } catch (err) {
    if (err instanceof Error && 'code' in err && err.code === 'SQLITE_BUSY') {
      throw new FsbenchError('DATABASE_IN_USE', `${file} is open in a running coordinator: stop it (docker compose stop coordinator), then restore`);
    }
    throw new FsbenchError('BACKUP_INVALID', `${file}, the database to replace, cannot be opened: ${messageOf(err)}`);
  } finally {
    // Closing the last connection checkpoints the WAL into the file and removes it.
    db?.close();
  }
}

/**
 * Puts the backup `from` in place as the database of `dataDir`, which no coordinator may have
 * open. The database it replaces is kept beside it as `fsbench.db.replaced-<time>`; its WAL
 * files go with it, so none is replayed onto the restored copy.
 */
export async function restoreDatabase(from: string, dataDir: string): Promise<DatabaseSummary & { readonly replaced: string | null }> {
  const summary = await verify(from);
  const target = path.join(dataDir, DATABASE_FILE);
  await fs.mkdir(dataDir, { recursive: true, mode: 0o700 });
  await fs.chmod(dataDir, 0o700);
  let exists = true;
  try {
    await fs.access(target, fsc.F_OK);
  } catch {
    exists = false;
  }
  const partial = path.join(dataDir, `.${DATABASE_FILE}.${randomUUID()}.partial`);
  // Created 0600 (never the backup's mode, nor the umask's), then filled.
  await pipeline(createReadStream(from), createWriteStream(partial, { flags: 'wx', mode: 0o600 }));
  let replaced: string | null = null;
  try {
    if (exists) {
      assertUnused(target);
      replaced = `${target}.replaced-${new Date().toISOString().replace(/[:.]/g, '-')}`;
      await fs.rename(target, replaced);
      for (const suffix of ['-wal', '-shm']) {
        await fs.rename(`${target}${suffix}`, `${replaced}${suffix}`).catch(() => undefined);
      }
    }
    await fs.rename(partial, target);
  } catch (err) {
    await fs.rm(partial, { force: true });
    throw err;
  }
  return { ...summary, replaced };
}
