/**
 * Approving what the operator saw (real redis-server, in-process coordinator and agents, the real
 * CLI): `fsbench agents` lists each waiting key's fingerprint, which the agent logs at start;
 * `approve` by a name two keys announce is refused, naming both; `approve` by the fingerprint
 * enrolls that key; and a flood of announcements that fills the pending keys pushes out no key
 * announced before it.
 */
import { createPublicKey, generateKeyPairSync } from 'node:crypto';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { announcementOf, type AgentIdentity } from '../agent/identity.js';
import { agentKeysKey } from '../queue/keys.js';
import { keyFingerprint } from '../queue/signing.js';
import { enrollsItself, useCluster } from './helpers/cluster.js';
import { until } from './helpers/http.js';
import { runCli } from './helpers/local.js';

const cluster = useCluster('approval');

/** The coordinator's MAX_PENDING (coordinator/enrollment/enrollment.ts). */
const MAX_PENDING = 10_000;

/** A new agent key, with a report key shared among the flood's (the coordinator checks only its kind). */
function newIdentity(report: { privateKey: AgentIdentity['reportKey']; pem: string }): AgentIdentity {
  const { privateKey } = generateKeyPairSync('ed25519');
  const publicKey = createPublicKey(privateKey);
  return { privateKey, publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(), fingerprint: keyFingerprint(publicKey), reportKey: report.privateKey, reportKeyPem: report.pem };
}

/** `fsbench_agent_keys{state="pending"}`, or -1 while the coordinator is too busy to answer. */
async function pendingKeys(url: string): Promise<number> {
  try {
    const text = await (await fetch(`${url}/metrics`)).text();
    return Number(/^fsbench_agent_keys\{state="pending"\} (\d+)$/m.exec(text)?.[1] ?? 0);
  } catch {
    return -1;
  }
}

describe('approving a waiting key', () => {
  it('by an ambiguous name is refused, by its fingerprint works, and a flood of announcements does not push it out', async () => {
    const c = await cluster.coordinator();
    const redis = new Redis(cluster.redis().url);
    cluster.cleanup(() => redis.quit().then(() => undefined));
    const real = await cluster.agent(c.prefix, 'host-real', 'twin', [], enrollsItself({}));
    const reportKey = generateKeyPairSync('x25519').privateKey;
    const report = { privateKey: reportKey, pem: createPublicKey(reportKey).export({ type: 'spki', format: 'pem' }).toString() };
    const impostor = newIdentity(report);
    await redis.hset(agentKeysKey(c.prefix), impostor.fingerprint, announcementOf(impostor, 'host-impostor', 'twin', []));
    await until('both keys to be listed', async () => {
      const listed = await runCli(['agents', '--url', c.url]);
      return listed.stdout.includes(real.key) && listed.stdout.includes(impostor.fingerprint) ? true : undefined;
    });

    const ambiguous = await runCli(['agents', 'approve', 'twin', '--url', c.url]);
    expect(ambiguous.code).not.toBe(0);
    expect(ambiguous.stderr).toContain('twin names 2 waiting agent keys');
    expect(ambiguous.stderr).toContain(real.key);
    expect(ambiguous.stderr).toContain(impostor.fingerprint);

    // The flood: more valid announcements than the coordinator keeps waiting, each of a host of its own.
    const flood = Array.from({ length: MAX_PENDING }, () => newIdentity(report));
    const pipe = redis.pipeline();
    flood.forEach((f, i) => pipe.hset(agentKeysKey(c.prefix), f.fingerprint, announcementOf(f, `flood-${i}`, `flood-${i}`, [])));
    await pipe.exec();
    expect(await redis.hlen(agentKeysKey(c.prefix))).toBe(MAX_PENDING + 2);
    await until('the pending keys to be full', async () => ((await pendingKeys(c.url)) === MAX_PENDING ? true : undefined), { ms: 45_000, everyMs: 500 });

    // The key the operator saw before the flood is still there: its fingerprint enrolls it.
    const byKey = await runCli(['agents', 'approve', real.key, '--url', c.url]);
    expect(byKey.code, byKey.stderr).toBe(0);
    expect(byKey.stderr).toContain(`enrolled ${real.key} of twin (host host-real)`);
    await real.enrolled;
  });
});
