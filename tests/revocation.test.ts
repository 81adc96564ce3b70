/**
 * Revoking an agent key (real redis-server, in-process coordinator and agents, the real CLI): the
 * coordinator's database decides, so an approval saved from Redis while the key was enrolled and
 * written back after `fsbench agents revoke` enrolls nothing; the revoked agent takes no job; a
 * report it authenticates with its real key is dropped and counted as `revoked`; and every change
 * is in `fsbench agents --history`.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ApprovalEntry, parseJson } from '../queue/enrollment.js';
import { jobId, type RunReport } from '../queue/jobs.js';
import { agentApprovalsKey } from '../queue/keys.js';
import { signatureDigest } from '../queue/signing.js';
import { fingerprintHash } from '../contract/fingerprint.js';
import { enrollsItself, useCluster } from './helpers/cluster.js';
import { droppedReports as dropped, reportAsAgent } from './helpers/enroll.js';
import { getJson as get, submitMatrix as submit, until } from './helpers/http.js';
import { cellOf, runCli, runOnce } from './helpers/local.js';

const cluster = useCluster('revoke');

const Keys = z.object({
  agents: z.array(z.object({ hostId: z.string(), runsDone: z.number() }).loose()),
  keys: z.array(z.object({ key: z.string(), hostId: z.string(), state: z.string() }).loose()),
});
const Matrix = z.object({ state: z.string(), progress: z.object({ stored: z.number(), expected: z.number() }).loose() }).loose();
const Runs = z.object({ runs: z.array(z.object({ machine: z.string(), state: z.string() }).loose()) });


describe('a revoked agent key', () => {
  it('stays revoked when its saved approval is written back; its agent takes no job; its reports are dropped and counted; the history lists each change', async () => {
    const c = await cluster.coordinator();
    const redis = new Redis(cluster.redis().url);
    cluster.cleanup(() => redis.quit().then(() => undefined));
    const stateDir = await mkdtemp(path.join(os.tmpdir(), 'fsbench-revoke-state-'));
    cluster.cleanup(() => rm(stateDir, { recursive: true, force: true }));
    const token = await runCli(['agents', 'token', '--url', c.url]);
    expect(token.code, token.stderr).toBe(0);
    const revoked = await cluster.agent(c.prefix, 'host-revoked', 'box-revoked', [], enrollsItself({ enrollToken: token.stdout.trim(), stateDir }));
    await revoked.enrolled;

    // What an onlooker of Redis saves while the key is enrolled: the coordinator's real approval.
    const saved = await redis.hget(agentApprovalsKey(c.prefix), revoked.key);
    const entry = saved === null ? null : parseJson(ApprovalEntry, saved);
    expect(entry?.approval).toMatchObject({ key: revoked.key, hostId: 'host-revoked', machine: 'box-revoked' });
    expect(entry !== null && c.jobKey.verifyApproval(entry.approval, entry.signature)).toBe(true);

    const revoke = await runCli(['agents', 'revoke', 'box-revoked', '--url', c.url]);
    expect(revoke.code, revoke.stderr).toBe(0);
    expect(revoke.stderr).toContain(`revoked ${revoked.key} of box-revoked (host host-revoked)`);
    await until('the revoked agent to stop taking jobs', () => Promise.resolve(revoked.approved() ? undefined : true));

    // Written back: in Redis as saved, then removed by the coordinator, whose database says revoked.
    await redis.hset(agentApprovalsKey(c.prefix), revoked.key, saved ?? '');
    expect(await redis.hget(agentApprovalsKey(c.prefix), revoked.key)).toBe(saved);
    await until('the coordinator to remove the restored approval', async () => ((await redis.hget(agentApprovalsKey(c.prefix), revoked.key)) === null ? true : undefined));
    const listed = await get(`${c.url}/v1/agents`, Keys);
    expect(listed.keys.map((k) => `${k.hostId} ${k.state}`)).toEqual(['host-revoked revoked']);
    await until('the revoked agent to take no job again', () => Promise.resolve(revoked.approved() ? undefined : true));

    // Runs placed on any host: only the enrolled agent, started after they were queued, runs them.
    const id = await submit(c.url, { name: 'after-revoke', workload: 'noop', warmup: 0, repetitions: 3, params: { value: 1 } });
    await cluster.agent(c.prefix, 'host-honest', 'box-honest');
    const m = await until('the matrix to finish', async () => {
      const v = await get(`${c.url}/v1/matrices/${id}`, Matrix);
      return v.state === 'done' ? v : undefined;
    });
    expect(m.progress).toMatchObject({ stored: 3, expected: 3 });
    const { runs } = await get(`${c.url}/v1/matrices/${id}/results`, Runs);
    expect(runs.map((r) => `${r.machine} ${r.state}`)).toEqual(['box-honest ok', 'box-honest ok', 'box-honest ok']);
    const { agents } = await get(`${c.url}/v1/agents`, Keys);
    expect(agents.find((a) => a.hostId === 'host-revoked')?.runsDone).toBe(0);

    // A report authenticated with the revoked key's real MAC, for a run the coordinator issued.
    const cell = cellOf('noop', { value: 1 });
    const scratch = await mkdtemp(path.join(os.tmpdir(), 'fsbench-revoke-run-'));
    cluster.cleanup(() => rm(scratch, { recursive: true, force: true }));
    const { fingerprint, ...result } = await runOnce(cell, scratch);
    const report: RunReport = {
      matrixId: id, target: 'any', cellId: cell.id, repetition: 0, attempts: 1, fingerprint: fingerprintHash(JSON.stringify(fingerprint)),
      result: { ...result, matrix: id }, jobId: jobId(id, cell.id, 'any', 0), jobSignature: signatureDigest('x'), hostId: 'host-revoked',
    };
    expect(await dropped(c.url, 'revoked')).toBe(0);
    expect(await reportAsAgent(redis, c.prefix, c.jobKey, stateDir, 'any', report)).toBe(revoked.key);
    await until('the revoked key\'s report to be dropped', async () => ((await dropped(c.url, 'revoked')) === 1 ? true : undefined));
    expect((await get(`${c.url}/v1/matrices/${id}/results`, Runs)).runs).toHaveLength(3);

    // Each change, with who asked.
    const history = await runCli(['agents', '--history', '--url', c.url]);
    expect(history.code, history.stderr).toBe(0);
    const lines = history.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^WHEN\s+ACTION\s+KEY\s+MACHINE\s+HOST\s+WHO\s+DETAIL$/);
    expect(lines.slice(1).map((l) => l.split(/\s+/).slice(1, 5).join(' '))).toEqual([
      expect.stringMatching(/^import SHA256:\S+ box-honest host-honest$/),
      `revoke ${revoked.key} box-revoked host-revoked`,
      `enroll-token ${revoked.key} box-revoked host-revoked`,
    ]);
    expect(lines[1]).toMatch(/\bcoordinator\s+an approval this coordinator signed/);
    expect(lines[2]).toMatch(/\bapi \S+\s+was enrolled$/);
    expect(lines[3]).toMatch(new RegExp(`agent ${revoked.key.replace(/[+/]/g, '\\$&')}\\s+token [a-z0-9]{10}$`));
  });
});
