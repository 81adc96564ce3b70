/**
 * What the coordinator's database keeps of an enrollment token cannot enroll (real redis-server,
 * in-process coordinator and agents, the real CLI): a backup of the database, read for the
 * token's stored hash, presented sealed as the secret, leaves the key pending and the token
 * unused, which the real token then enrolls; and the data directory, the database, its WAL and
 * the backup are the owner's only from their first byte, under a umask that would leave them
 * readable to all.
 */
import { mkdir, mkdtemp, rm, stat } from 'node:fs/promises';
import { createPrivateKey } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { announcementOf, coordinatorReportKey, loadOrCreateAgentKey } from '../agent/identity.js';
import { agentKeysKey } from '../queue/keys.js';
import { JobSigner } from '../queue/signing.js';
import { enrollsItself, useCluster } from './helpers/cluster.js';
import { getJson as get, until } from './helpers/http.js';
import { runCli } from './helpers/local.js';

const cluster = useCluster('token-secrets');

const Keys = z.object({ keys: z.array(z.object({ key: z.string(), hostId: z.string(), state: z.string(), via: z.string().nullable() }).loose()) });
const mode = async (file: string) => (await stat(file)).mode & 0o777;

// A umask that leaves new files readable to all: what the coordinator must not rely on.
let umask = 0;
let set = -1;
beforeAll(() => {
  umask = process.umask(0o002);
  set = process.umask(0o002);
});
afterAll(() => {
  process.umask(umask);
});

describe('a copy of the database', () => {
  it("enrolls nothing with a token's stored hash; the files are 0600 and 0700 from the first byte", async () => {
    expect(set).toBe(0o002);
    const c = await cluster.coordinator();
    const token = await runCli(['agents', 'token', '--url', c.url]);
    expect(token.code, token.stderr).toBe(0);
    const [id = ''] = token.stdout.trim().split('.');

    expect(await mode(c.dataDir)).toBe(0o700);
    expect(await mode(path.join(c.dataDir, 'fsbench.db'))).toBe(0o600);
    expect(await mode(path.join(c.dataDir, 'fsbench.db-wal'))).toBe(0o600);
    const out = await mkdtemp(path.join(os.tmpdir(), 'fsbench-token-copy-'));
    cluster.cleanup(() => rm(out, { recursive: true, force: true }));
    const backup = path.join(out, 'copy.db');
    const made = await runCli(['backup', backup], { FSBENCH_DATA_DIR: c.dataDir });
    expect(made.code, made.stderr).toBe(0);
    expect(await mode(backup)).toBe(0o600);

    // What the copy says of the token: its id and the hash kept of its secret.
    const copy = new Database(backup, { readonly: true });
    const row = z.object({ secret_hash: z.instanceof(Buffer), used_by: z.null() }).parse(copy.prepare('SELECT secret_hash, used_by FROM enrollment_tokens WHERE id = ?').get(id));
    copy.close();
    expect(row.secret_hash).toHaveLength(32);

    // A key of the copy's reader, announcing that hash as the secret, sealed to the coordinator's real report key.
    const redis = new Redis(cluster.redis().url);
    cluster.cleanup(() => redis.quit().then(() => undefined));
    const theirs = await coordinatorReportKey(redis, c.prefix, new JobSigner(createPrivateKey(cluster.jobPrivateKey)).verifier);
    if (theirs === null) throw new Error('the coordinator published no report key');
    const readers: string[] = [];
    for (const [n, secret] of [row.secret_hash.toString('base64url'), row.secret_hash.toString('base64')].entries()) {
      const dir = path.join(out, `reader-${n}`);
      await mkdir(dir);
      const reader = await loadOrCreateAgentKey(dir);
      readers.push(reader.fingerprint);
      await redis.hset(agentKeysKey(c.prefix), reader.fingerprint, announcementOf(reader, `copy-host-${n}`, 'copy-reader', [], `${id}.${secret}`, theirs));
      // Listed in the same step that checks its token: once listed, it was judged.
      await until(`the coordinator to judge announcement ${n}`, async () => ((await get(`${c.url}/v1/agents`, Keys)).keys.some((k) => k.key === reader.fingerprint) ? true : undefined));
    }
    const listed = await get(`${c.url}/v1/agents`, Keys);
    expect(listed.keys.map((k) => [k.key, k.state]).sort()).toEqual(readers.map((r) => [r, 'pending']).sort());

    // The token itself, unused still, enrolls the agent it was given to.
    const agent = await cluster.agent(c.prefix, 'host-real', 'real', [], enrollsItself({ enrollToken: token.stdout.trim() }));
    await agent.enrolled;
    const after = await get(`${c.url}/v1/agents`, Keys);
    expect(after.keys.find((k) => k.key === agent.key)).toMatchObject({ state: 'enrolled', via: 'token' });
    expect(after.keys.filter((k) => readers.includes(k.key)).map((k) => k.state)).toEqual(['pending', 'pending']);
  });
});
