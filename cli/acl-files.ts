/**
 * The files of one Redis ACL user as `fsbench agents acl` writes them: `<user>.acl`, its rule
 * line with the password only as its SHA-256, and `<user>.password` (0600), which is kept when it
 * exists, so running the command again rewrites the rules without changing the password.
 */
import { readFile, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { FsbenchError } from '../contract/errors.js';
import { writeOwnFile } from '../host/safe-dir.js';
import { aclFileLine, newAclPassword } from '../queue/acl.js';

/** The password kept in `<user>.password`, or a new one written there (0600, never through a symlink). */
async function passwordOf(dir: string, user: string): Promise<{ password: string; created: boolean }> {
  const name = `${user}.password`;
  const fresh = newAclPassword();
  await writeOwnFile(dir, name, `${fresh}\n`, 0o600);
  const kept = (await readFile(path.join(dir, name), 'utf8')).replace(/\r?\n$/, '');
  if (!/^[\x21-\x7e]{16,}$/.test(kept)) throw new FsbenchError('CONFIG_INVALID', `${path.join(dir, name)} holds no usable password (16 or more printable characters): remove it to have a new one made`);
  return { password: kept, created: kept === fresh };
}

/** `dir/name` replaced whole by `text`: written beside it, never through a symlink, then renamed over it. */
export async function replaceFile(dir: string, name: string, text: string, mode: number): Promise<void> {
  await rm(path.join(dir, `${name}.new`), { force: true });
  await writeOwnFile(dir, `${name}.new`, text, mode);
  await rename(path.join(dir, `${name}.new`), path.join(dir, name));
}

export interface UserFiles {
  readonly password: string;
  /** Whether the password was made now (else it was kept). */
  readonly created: boolean;
  /** The rule line, `user NAME on #HASH RULES...`. */
  readonly line: string;
}

/** Writes `<user>.acl` and, when missing, `<user>.password` in `dir`. */
export async function writeUserFiles(dir: string, user: string, rules: readonly string[]): Promise<UserFiles> {
  const { password, created } = await passwordOf(dir, user);
  const line = aclFileLine(user, password, rules);
  await replaceFile(dir, `${user}.acl`, `${line}\n`, 0o644);
  return { password, created, line };
}
