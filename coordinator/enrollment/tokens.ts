/**
 * One-time enrollment tokens: made by an operator (`fsbench agents token`), shown once, kept only
 * as a hash; and the token copy a coordinator keeps for the agents of its own machine
 * (FSBENCH_ENROLL_TOKEN_COPY).
 */
import { randomBytes, timingSafeEqual, type KeyObject } from 'node:crypto';
import { constants as fsConstants, promises as fs } from 'node:fs';
import path from 'node:path';
import { errnoOf } from '../../contract/errors.js';
import { openToken, secretHash } from '../../queue/enrollment.js';
import type { Store, TokenBinding } from '../store/index.js';

/** Most tokens one request may make: a fleet's worth. */
export const MAX_TOKENS_PER_REQUEST = 1000;

/** A token bound to nothing: any machine, any host without a live key. */
export const UNBOUND: TokenBinding = { machine: null, hostId: null, replace: false };

/**
 * New one-time tokens, valid for `ttlMs`: `<id>.<secret>`, shown once; only the secret's hash is
 * kept, with what `binding` binds them to.
 */
export function mintTokens(store: Store, count: number, ttlMs: number, binding: TokenBinding, copy = false): { tokens: string[]; expiresAt: string } {
  const now = Date.now();
  const made = Array.from({ length: count }, () => ({ id: randomBytes(8).readBigUInt64BE().toString(36).padStart(10, '0').slice(-10), secret: randomBytes(32).toString('base64url') }));
  // Expired tokens are of no use to anyone: they go as new ones come.
  store.agentKeys.addTokens(made.map((t) => ({ id: t.id, secretHash: secretHash(t.secret) })), now, now + ttlMs, copy, binding);
  return { tokens: made.map((t) => `${t.id}.${t.secret}`), expiresAt: new Date(now + ttlMs).toISOString() };
}

/**
 * What became of a token an announcement presents: used (`replaces`: it may take a host's live
 * key's place), not proven (nothing to say: anyone can write junk), or proven but refused for
 * what the token is bound to, and left unused.
 */
export type TokenUse = { readonly state: 'used'; readonly replaces: boolean } | { readonly state: 'unproven' } | { readonly state: 'refused'; readonly reason: string };

/**
 * Marks a token used by `key` when the secret sealed in its announcement opens with this
 * coordinator's report key, hashes to what the database keeps, the token is unused and unexpired,
 * and the announcement is what the token is bound to: its machine and host when it names them,
 * and a host with no live key unless the token was made to replace it. The database's hash alone
 * opens nothing: it is compared with, never used as, a key.
 */
export function useToken(store: Store, t: SealedToken): TokenUse {
  const token = store.agentKeys.token(t.id);
  if (!token || token.usedBy !== null || token.expiresAt < Date.now()) return { state: 'unproven' };
  const secret = openToken(t.sealed, t.coordinatorKey, t.agentReportKey, t.id, t.key, t.hostId);
  if (secret === null) return { state: 'unproven' };
  const hash = secretHash(secret);
  if (hash.length !== token.secretHash.length || !timingSafeEqual(hash, token.secretHash)) return { state: 'unproven' };
  const b = token.binding;
  if (b.machine !== null && b.machine !== t.machine) return { state: 'refused', reason: `it is bound to machine ${b.machine}, not ${t.machine}` };
  if (b.hostId !== null && b.hostId !== t.hostId) return { state: 'refused', reason: `it is bound to host ${b.hostId}, not ${t.hostId}` };
  const live = store.agentKeys.enrolledOfHost(t.hostId);
  if (live.length > 0 && !b.replace) {
    return { state: 'refused', reason: `host ${t.hostId} has a live key (${live.map((r) => r.key).join(', ')}): a token made with --replace enrolls a new key in its place` };
  }
  return store.agentKeys.useToken(t.id, t.key) ? { state: 'used', replaces: b.replace } : { state: 'unproven' };
}

/** A token as an announcement presents it, with what opens it. */
export interface SealedToken {
  readonly id: string;
  readonly sealed: string;
  /** The announcing key's fingerprint, its host and machine, and its X25519 report key (from the signed announcement). */
  readonly key: string;
  readonly hostId: string;
  readonly machine: string;
  readonly agentReportKey: KeyObject;
  /** This coordinator's X25519 report key (private). */
  readonly coordinatorKey: KeyObject;
}

/**
 * Keeps `file` (FSBENCH_ENROLL_TOKEN_COPY) holding an unused token: made at start when the file's
 * token is missing or used, and again once an agent used it. Written to a new file renamed into
 * place, never through a symlink, mode 0640: readable by the coordinator's user and group only,
 * which compose gives the agents (`group_add`), whose root holds no CAP_DAC_OVERRIDE.
 */
export async function refreshTokenCopy(store: Store, file: string | undefined): Promise<void> {
  if (file === undefined) return;
  const current = await fs.readFile(file, 'utf8').catch(() => '');
  const id = current.trim().split('.')[0] ?? '';
  if (store.agentKeys.tokenUnused(id)) return;
  const { tokens } = mintTokens(store, 1, 100 * 365 * 86_400_000, UNBOUND, true);
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
