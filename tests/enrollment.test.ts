/**
 * Enrolling agents (real redis-server, in-process coordinator and agents, the real CLI): an agent
 * waits, unlisted, until its key is enrolled, either by a one-time token or by `fsbench agents
 * approve`; a used token enrolls nothing more; and a matrix placed on `all` runs on the enrolled
 * hosts only, each run stored once.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { enrollsItself, useCluster } from './helpers/cluster.js';
import { getJson as get, submitMatrix as submit, until } from './helpers/http.js';
import { runCli } from './helpers/local.js';

const cluster = useCluster('enroll');

const Keys = z.object({
  agents: z.array(z.object({ hostId: z.string() }).loose()),
  keys: z.array(z.object({ key: z.string(), hostId: z.string(), machine: z.string(), state: z.string(), via: z.string().nullable() }).loose()),
});
const Matrix = z.object({ state: z.string(), progress: z.object({ stored: z.number(), expected: z.number() }).loose() }).loose();
const Runs = z.object({ runs: z.array(z.object({ machine: z.string(), cellId: z.string(), repetition: z.number(), state: z.string() }).loose()) });

describe('enrolling agents', () => {
  it('one by token and one by `fsbench agents approve`; a used token enrolls nothing more; `all` runs on both, each run stored once', async () => {
    const c = await cluster.coordinator();
    const token = await runCli(['agents', 'token', '--count', '2', '--url', c.url]);
    expect(token.code, token.stderr).toBe(0);
    const [first, second] = token.stdout.trim().split('\n');
    expect(first).toMatch(/^[a-z0-9]{10}\.[A-Za-z0-9_-]{43}$/);
    expect(token.stderr).toMatch(/2 one-time token\(s\), valid until/);

    // By token: enrolled within a sync, without anyone approving it.
    const byToken = await cluster.agent(c.prefix, 'host-token', 'by-token', [], enrollsItself({ enrollToken: first }));
    await byToken.enrolled;
    // The same token again, from another host's key: it stays pending.
    const reuser = await cluster.agent(c.prefix, 'host-reuse', 'reuser', [], enrollsItself({ enrollToken: first }));
    // No token: it waits, listed as pending and not live, until approved.
    const waiting = await cluster.agent(c.prefix, 'host-approve', 'by-approval', [], enrollsItself({}));
    const pending = await until('both waiting keys to be listed', async () => {
      const v = await get(`${c.url}/v1/agents`, Keys);
      return v.keys.filter((k) => k.state === 'pending').length === 2 ? v : undefined;
    });
    expect(pending.agents.map((a) => a.hostId)).toEqual(['host-token']);
    expect(pending.keys.find((k) => k.hostId === 'host-token')).toMatchObject({ state: 'enrolled', via: 'token', key: byToken.key });
    const listed = await runCli(['agents', '--url', c.url]);
    expect(listed.stdout).toMatch(new RegExp(`${waiting.key.replace(/[+/]/g, '\\$&')}\\s+PENDING\\s+by-approval\\s+host-approve`));
    expect(listed.stderr).toMatch(/2 agent\(s\) wait for approval: fsbench agents approve/);

    // One command enrolls it.
    const approved = await runCli(['agents', 'approve', 'by-approval', '--url', c.url]);
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stderr).toContain(`enrolled ${waiting.key} of by-approval (host host-approve)`);
    await waiting.enrolled;
    // An unknown name is refused, saying where to look.
    const unknown = await runCli(['agents', 'approve', 'nobody', '--url', c.url]);
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toMatch(/no agent waiting for enrollment is called nobody: `fsbench agents` lists those waiting.*NOT_FOUND/s);

    await until('both enrolled agents to be live', async () => ((await get(`${c.url}/v1/agents`, Keys)).agents.length === 2 ? true : undefined));
    const id = await submit(c.url, { name: 'two-hosts', workload: 'noop', warmup: 0, repetitions: 3, placement: 'all', params: { value: [1, 2] } });
    const m = await until('the matrix to finish', async () => {
      const v = await get(`${c.url}/v1/matrices/${id}`, Matrix);
      return v.state === 'done' ? v : undefined;
    });
    expect(m.progress).toMatchObject({ stored: 12, expected: 12 });
    const { runs } = await get(`${c.url}/v1/matrices/${id}/results`, Runs);
    const keys = runs.map((r) => `${r.machine} ${r.cellId} ${r.repetition}`);
    expect(new Set(keys).size).toBe(12);
    expect(runs.filter((r) => r.machine === 'by-token')).toHaveLength(6);
    expect(runs.filter((r) => r.machine === 'by-approval')).toHaveLength(6);
    expect(runs.every((r) => r.state === 'ok')).toBe(true);

    // The reused token never enrolled the third key; the second token is still unused.
    const after = await get(`${c.url}/v1/agents`, Keys);
    expect(after.keys.find((k) => k.hostId === 'host-reuse')?.state).toBe('pending');
    expect(after.agents.map((a) => a.hostId).sort()).toEqual(['host-approve', 'host-token']);
    expect(second).toBeDefined();
    await reuser.stop();
  });
});
