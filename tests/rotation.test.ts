/**
 * Rotating an agent's key (real redis-server, in-process coordinator and agents, the real CLI):
 * after `fsbench agents rotate` the agent enrolls a new key for the same host and machine, signed
 * over by the old one, which the coordinator revokes in the same step; a report of the old key
 * replayed afterwards is dropped and counted as `revoked`; the next matrix is stored under the same
 * machine; `fsbench agents --history` lists the rotation. A rotation proof from a revoked or
 * unknown key, or one claiming another host or machine, enrolls nothing. An agent whose key is
 * older than FSBENCH_KEY_MAX_AGE rotates by itself.
 */
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { announcementOf, AGENT_KEY_FILE, hostStateDir, loadOrCreateAgentKey, type AgentIdentity } from '../agent/identity.js';
import { qualifiedQueueName, SignedRunReport } from '../queue/jobs.js';
import { agentKeysKey } from '../queue/keys.js';
import { enrollsItself, useCluster } from './helpers/cluster.js';
import { droppedReports as dropped } from './helpers/enroll.js';
import { getJson as get, submitMatrix as submit, until } from './helpers/http.js';
import { runCli } from './helpers/local.js';

const cluster = useCluster('rotation');

const Keys = z.object({ keys: z.array(z.object({ key: z.string(), hostId: z.string(), machine: z.string(), state: z.string(), via: z.string().nullable() }).loose()) });
const History = z.object({ changes: z.array(z.object({ action: z.string(), key: z.string(), actor: z.string(), detail: z.string(), machine: z.string(), hostId: z.string() }).loose()) });
const Matrix = z.object({ state: z.string(), progress: z.object({ stored: z.number(), expected: z.number() }).loose() }).loose();
const Runs = z.object({ runs: z.array(z.object({ machine: z.string(), state: z.string() }).loose()) });

const escaped = (s: string) => s.replace(/[+/]/g, '\\$&');

async function finished(url: string, id: string): Promise<z.infer<typeof Runs>['runs']> {
  await until(`matrix ${id} to finish`, async () => ((await get(`${url}/v1/matrices/${id}`, Matrix)).state === 'done' ? true : undefined));
  return (await get(`${url}/v1/matrices/${id}/results`, Runs)).runs;
}

async function stateDir(): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'fsbench-rotation-state-'));
  cluster.cleanup(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function token(url: string): Promise<string> {
  const t = await runCli(['agents', 'token', '--url', url]);
  expect(t.code, t.stderr).toBe(0);
  return t.stdout.trim();
}

describe('fsbench agents rotate', () => {
  it('enrolls a new key for the same host and machine and revokes the old, whose replayed report is dropped as revoked; the history lists the rotation', async () => {
    const c = await cluster.coordinator();
    const redis = new Redis(cluster.redis().url);
    cluster.cleanup(() => redis.quit().then(() => undefined));
    const dir = await stateDir();
    const agent = await cluster.agent(c.prefix, 'host-rot', 'box-rot', [], enrollsItself({ enrollToken: await token(c.url), stateDir: dir }));
    await agent.enrolled;
    const old = agent.key;
    const matrix = { workload: 'noop', warmup: 0, repetitions: 2, params: { value: 1 } } as const;
    const before = await submit(c.url, { ...matrix, name: 'before-rotation' });
    expect((await finished(c.url, before)).map((r) => `${r.machine} ${r.state}`)).toEqual(['box-rot ok', 'box-rot ok']);

    // A report the old key really made, as its completion event carries it: what a replay sends again.
    const events = `${qualifiedQueueName(c.prefix, 'any')}:events`;
    const completed = (await redis.xrange(events, '-', '+')).map(([, fields]) => fields).filter((f) => f[f.indexOf('event') + 1] === 'completed');
    expect(completed).toHaveLength(2);
    const [saved = []] = completed;
    const envelope = SignedRunReport.parse(JSON.parse(saved[saved.indexOf('returnvalue') + 1] ?? ''));
    expect(envelope.key).toBe(old);

    const asked = await runCli(['agents', 'rotate', 'box-rot', '--url', c.url]);
    expect(asked.code, asked.stderr).toBe(0);
    expect(asked.stderr).toContain(`asked ${old} of box-rot (host host-rot) to rotate`);
    await until('the agent to take its new key', () => Promise.resolve(agent.key !== old && agent.approved() ? true : undefined));
    const rotated = agent.key;

    const { keys } = await get(`${c.url}/v1/agents`, Keys);
    expect(keys.map((k) => [k.key, k.state, k.via, k.hostId, k.machine])).toEqual([
      [rotated, 'enrolled', 'rotate', 'host-rot', 'box-rot'],
      [old, 'revoked', 'token', 'host-rot', 'box-rot'],
    ]);
    // The new key replaced the old in place, its owner's only, and nothing of the rotation is left beside it.
    const keyDir = hostStateDir(dir, 'host-rot');
    expect((await loadOrCreateAgentKey(keyDir)).fingerprint).toBe(rotated);
    expect((await stat(path.join(keyDir, AGENT_KEY_FILE))).mode & 0o777).toBe(0o600);
    expect((await readdir(keyDir)).filter((f) => f.endsWith('.pem')).sort()).toEqual(['agent-key.pem', 'agent-report-key.pem']);

    // The old key's real report, replayed: dropped as a revoked key's, nothing stored.
    expect(await dropped(c.url, 'revoked')).toBe(0);
    await redis.xadd(events, '*', ...saved);
    await until("the old key's replayed report to be dropped", async () => ((await dropped(c.url, 'revoked')) === 1 ? true : undefined));

    const after = await submit(c.url, { ...matrix, name: 'after-rotation' });
    expect((await finished(c.url, after)).map((r) => `${r.machine} ${r.state}`)).toEqual(['box-rot ok', 'box-rot ok']);
    expect((await get(`${c.url}/v1/matrices/${before}/results`, Runs)).runs).toHaveLength(2);

    const history = await runCli(['agents', '--history', '--url', c.url]);
    expect(history.code, history.stderr).toBe(0);
    const lines = history.stdout.trim().split('\n').slice(1);
    expect(lines.map((l) => l.split(/\s+/).slice(1, 5).join(' '))).toEqual([
      `revoke ${old} box-rot host-rot`,
      `rotate ${rotated} box-rot host-rot`,
      `enroll-token ${old} box-rot host-rot`,
    ]);
    expect(lines[0]).toMatch(new RegExp(`agent ${escaped(old)}\\s+rotated to ${escaped(rotated)}$`));
    expect(lines[1]).toMatch(new RegExp(`agent ${escaped(old)}\\s+rotated from ${escaped(old)}, asked by api \\S+$`));
  });

  it('enrolls nothing on a proof from a revoked or unknown key, or one claiming another host or machine', async () => {
    const c = await cluster.coordinator();
    const redis = new Redis(cluster.redis().url);
    cluster.cleanup(() => redis.quit().then(() => undefined));
    const dirA = await stateDir();
    const dirB = await stateDir();
    const a = await cluster.agent(c.prefix, 'host-a', 'box-a', [], enrollsItself({ enrollToken: await token(c.url), stateDir: dirA }));
    const b = await cluster.agent(c.prefix, 'host-b', 'box-b', [], enrollsItself({ enrollToken: await token(c.url), stateDir: dirB }));
    await Promise.all([a.enrolled, b.enrolled]);
    // The agents' real keys, read from their state directories as root on their hosts could.
    const keyA = await loadOrCreateAgentKey(hostStateDir(dirA, 'host-a'));
    const keyB = await loadOrCreateAgentKey(hostStateDir(dirB, 'host-b'));
    expect([keyA.fingerprint, keyB.fingerprint]).toEqual([a.key, b.key]);
    const revoke = await runCli(['agents', 'revoke', 'box-b', '--url', c.url]);
    expect(revoke.code, revoke.stderr).toBe(0);
    await b.stop();

    const scratch = await stateDir();
    const fresh = async (name: string): Promise<AgentIdentity> => loadOrCreateAgentKey(await mkdtemp(path.join(scratch, `${name}-`)));
    const unknown = await fresh('unknown');
    const announce = async (next: AgentIdentity, hostId: string, machine: string, from: AgentIdentity) => {
      await redis.hset(agentKeysKey(c.prefix), next.fingerprint, announcementOf(next, hostId, machine, [], undefined, undefined, from));
      return next.fingerprint;
    };
    const refused = [
      await announce(await fresh('from-unknown'), 'host-a', 'box-a', unknown),
      await announce(await fresh('from-revoked'), 'host-b', 'box-b', keyB),
      await announce(await fresh('other-host'), 'host-elsewhere', 'box-a', keyA),
      await announce(await fresh('other-machine'), 'host-a', 'box-elsewhere', keyA),
    ];
    expect(new Set(refused).size).toBe(4);
    // Announced after the others: once it is enrolled, the coordinator has judged them all.
    const honest = await announce(await fresh('honest'), 'host-a', 'box-a', keyA);
    await until('the honest rotation to be enrolled', async () => ((await get(`${c.url}/v1/agents`, Keys)).keys.some((k) => k.key === honest && k.state === 'enrolled') ? true : undefined));

    const { keys } = await get(`${c.url}/v1/agents`, Keys);
    expect(keys.map((k) => `${k.key} ${k.state} ${k.via ?? '-'}`).sort()).toEqual([`${honest} enrolled rotate`, `${keyA.fingerprint} revoked token`, `${keyB.fingerprint} revoked token`].sort());
    expect(keys.filter((k) => refused.includes(k.key))).toEqual([]);
    const { changes } = await get(`${c.url}/v1/agents/history`, History);
    expect(changes.filter((ch) => refused.includes(ch.key))).toEqual([]);
  });
});

describe('FSBENCH_KEY_MAX_AGE', () => {
  it('has an agent whose key is older rotate by itself, and a restarted agent runs under the new key', async () => {
    const c = await cluster.coordinator();
    const dir = await stateDir();
    const agent = await cluster.agent(c.prefix, 'host-aging', 'box-aging', [], enrollsItself({ enrollToken: await token(c.url), stateDir: dir, keyMaxAge: 4000 }));
    await agent.enrolled;
    const first = agent.key;
    const { changes } = await until('the agent to rotate by itself', async () => {
      const h = await get(`${c.url}/v1/agents/history`, History);
      return h.changes.some((ch) => ch.action === 'rotate') ? h : undefined;
    });
    const rotations = changes.filter((ch) => ch.action === 'rotate');
    expect(rotations.length).toBeGreaterThanOrEqual(1);
    const oldest = rotations[rotations.length - 1];
    expect(oldest).toMatchObject({ actor: `agent ${first}`, hostId: 'host-aging', machine: 'box-aging', detail: `rotated from ${first}, by the agent itself (its key reached FSBENCH_KEY_MAX_AGE)` });
    expect(changes.find((ch) => ch.action === 'revoke' && ch.key === first)).toMatchObject({ actor: `agent ${first}`, detail: `rotated to ${oldest?.key ?? '?'}` });
    await until('the agent to take its new key', () => Promise.resolve(agent.key !== first && agent.approved() ? true : undefined));
    await agent.stop();

    // Restarted on the same state directory, never to rotate again: it runs under the key enrolled last.
    const restarted = await cluster.agent(c.prefix, 'host-aging', 'box-aging', [], enrollsItself({ stateDir: dir, keyMaxAge: 0 }));
    await restarted.enrolled;
    const { keys } = await get(`${c.url}/v1/agents`, Keys);
    expect(keys.filter((k) => k.state === 'enrolled').map((k) => [k.key, k.via, k.machine])).toEqual([[restarted.key, 'rotate', 'box-aging']]);
    expect(keys.find((k) => k.key === first)?.state).toBe('revoked');
    const id = await submit(c.url, { workload: 'noop', warmup: 0, repetitions: 2, params: { value: 1 }, name: 'aged' });
    expect((await finished(c.url, id)).map((r) => `${r.machine} ${r.state}`)).toEqual(['box-aging ok', 'box-aging ok']);
  });
});
