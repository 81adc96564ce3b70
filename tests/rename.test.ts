/**
 * Renaming a machine (real redis-server, coordinator and agent processes, the real CLI): after
 * `fsbench agents rename`, the agent reports under the new name, and the runs stored under the old
 * name and those after form one history series of the new name: in `GET /v1/history`, asked by
 * the old name too, and in compare's `history:NAME` side (the gate's baseline). A rename chain
 * and a rename back keep them joined; an ambiguous selector, a taken or invalid name and an
 * unknown agent are refused with their codes; `fsbench agents --history` lists each rename.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { JOB_KEY_FILE, JOB_PUBLIC_KEY_FILE, writeNewJobKey } from '../queue/signing.js';
import { startRedis, uniquePrefix, type TestRedis } from './fixtures/redis-server.js';
import { droppedReports, preEnroll } from './helpers/enroll.js';
import { getJson as get, submitMatrix as submit, until } from './helpers/http.js';
import { freshCli, runCli } from './helpers/local.js';
import { useCliProcesses } from './helpers/processes.js';

const { fsbench, tempDir } = useCliProcesses({ waitMs: 60_000 });
let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
  await freshCli();
}, 180_000);
afterAll(async () => {
  await redis.stop();
});

const Matrix = z.object({ state: z.string() }).loose();
const Runs = z.object({ runs: z.array(z.object({ machine: z.string(), state: z.string() }).loose()) });
const Keys = z.object({ keys: z.array(z.object({ key: z.string(), machine: z.string(), hostId: z.string(), state: z.string() }).loose()) });
const History = z.object({
  series: z.array(z.object({ machine: z.string(), metric: z.string(), points: z.array(z.object({ matrixId: z.string() }).loose()) }).loose()),
  renamed: z.object({ from: z.string(), to: z.string(), at: z.string() }).optional(),
});
const Compared = z.object({ rows: z.array(z.object({ baselineMachine: z.string(), candidateMachine: z.string(), baseline: z.object({ n: z.number() }).loose().nullable() }).loose()) }).loose();
const ErrorBody = z.object({ error: z.object({ code: z.string(), message: z.string() }).loose() });

/** Each history series as `machine metric: matrix ids in time order`. */
const seriesOf = (h: z.infer<typeof History>) => h.series.map((s) => `${s.machine} ${s.metric}: ${s.points.map((p) => p.matrixId).join(' ')}`);

describe('fsbench agents rename', () => {
  it('moves the machine and its stored runs to the new name: the agent reports under it, history and compare\'s history: side join the runs before and after, a chain and a rename back too; refusals carry their codes', async () => {
    const prefix = uniquePrefix('rename');
    const dataDir = await tempDir('rename-data');
    await writeNewJobKey(dataDir);
    const jobPrivateKey = await readFile(path.join(dataDir, JOB_KEY_FILE), 'utf8');
    const scratch = await tempDir('rename-scratch');
    const stateDir = path.join(scratch, 'state');
    const base = {
      REDIS_URL: redis.url, FSBENCH_QUEUE_PREFIX: prefix, FSBENCH_JOB_KEY: path.join(dataDir, JOB_PUBLIC_KEY_FILE), FSBENCH_DATA_DIR: dataDir,
      FSBENCH_PORT: '0', FSBENCH_HEARTBEAT: '200ms', FSBENCH_STALL_TIMEOUT: '2s', FSBENCH_SCRATCH: scratch,
    };
    // The agent that runs, another machine's key (a taken name), and two hosts both called twin (an ambiguous selector).
    const agentKey = await preEnroll(redis.url, prefix, jobPrivateKey, stateDir, 'host-r', 'box-a');
    const other = await preEnroll(redis.url, prefix, jobPrivateKey, path.join(scratch, 'other'), 'host-o', 'box-other');
    const twins = [
      await preEnroll(redis.url, prefix, jobPrivateKey, path.join(scratch, 'twin1'), 'host-t1', 'twin'),
      await preEnroll(redis.url, prefix, jobPrivateKey, path.join(scratch, 'twin2'), 'host-t2', 'twin'),
    ];
    const coordinator = fsbench(['coordinator'], base);
    const url = (await coordinator.waitFor(/listening on (http:\/\/\S+);/))[1] ?? '';
    await until('the four keys to be enrolled', async () => ((await get(`${url}/v1/agents`, Keys)).keys.filter((k) => k.state === 'enrolled').length === 4 ? true : undefined));
    const agent = fsbench(['agent'], { ...base, FSBENCH_MACHINE: 'box-a', FSBENCH_HOST_ID: 'host-r', FSBENCH_STATE_DIR: stateDir });
    await agent.waitFor(/waiting for runs/);

    const matrix = { name: 'nightly', workload: 'noop', warmup: 0, repetitions: 3, placement: 'all', params: { value: [1, 2] } } as const;
    const finished = async (): Promise<{ id: string; machines: string[] }> => {
      const id = await submit(url, matrix);
      await until(`matrix ${id} to finish`, async () => ((await get(`${url}/v1/matrices/${id}`, Matrix)).state === 'done' ? true : undefined), { ms: 60_000 });
      const { runs } = await get(`${url}/v1/matrices/${id}/results`, Runs);
      return { id, machines: [...new Set(runs.map((r) => `${r.machine} ${r.state} x${runs.filter((o) => o.machine === r.machine).length}`))] };
    };
    const history = (machine?: string) => get(`${url}/v1/history?name=nightly${machine === undefined ? '' : `&machine=${machine}`}`, History);
    const rename = (agentName: string, machine: string) => fetch(`${url}/v1/agents/rename`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ agent: agentName, machine }) });
    const refused = async (agentName: string, machine: string) => {
      const res = await rename(agentName, machine);
      return { status: res.status, ...ErrorBody.parse(await res.json()).error };
    };

    const first = await finished();
    expect(first.machines).toEqual(['box-a ok x6']);
    expect(seriesOf(await history())).toEqual([`box-a value: ${first.id}`, `box-a value: ${first.id}`]);

    // The rename, by the CLI as an operator types it.
    const cli = await runCli(['agents', 'rename', 'box-a', 'box-b', '--url', url]);
    expect(cli.code, cli.stderr).toBe(0);
    expect(cli.stderr).toContain(`box-a is now machine box-b (key ${agentKey.key}, host host-r)`);
    await agent.waitFor(/renamed by the operator, from box-a to box-b/);
    await coordinator.waitFor(/machine box-a \(agent key \S+, host host-r\) renamed box-b by api \S+, with its 6 stored runs/);
    expect(coordinator.output.match(/renamed box-b by api/g)).toHaveLength(1);

    // The agent's next runs are stored under the new name, none dropped.
    const second = await finished();
    expect(second.machines).toEqual(['box-b ok x6']);
    expect(await droppedReports(url, 'wrong-machine')).toBe(0);
    // One series per cell under the new name, with the runs before and after the rename.
    const joined = [`box-b value: ${first.id} ${second.id}`, `box-b value: ${first.id} ${second.id}`];
    expect(seriesOf(await history())).toEqual(joined);
    expect(seriesOf(await history('box-b'))).toEqual(joined);
    // Asked by the old name: the new name's series, saying so.
    const byOld = await history('box-a');
    expect(seriesOf(byOld)).toEqual(joined);
    expect(byOld.renamed).toMatchObject({ from: 'box-a', to: 'box-b' });
    const table = await (await fetch(`${url}/v1/history?name=nightly&machine=box-a&format=table`)).text();
    expect(table).toMatch(/machine box-a was renamed \(first on \d{4}-\d\d-\d\d\): these are the series of box-b, which hold its runs/);
    // The `history:nightly` side (the gate's baseline, read by the same code) is the first matrix,
    // run as box-a, now box-b's: one row per cell, both sides box-b.
    const compared = Compared.parse(await (await fetch(`${url}/v1/compare?baseline=history:nightly&candidate=latest:nightly&metric=value`)).json());
    expect(compared.rows.map((r) => `${r.baselineMachine} -> ${r.candidateMachine} n=${String(r.baseline?.n)}`)).toEqual(['box-b -> box-b n=3', 'box-b -> box-b n=3']);

    // Refusals, each with its code, changing nothing.
    const taken = await refused('box-b', 'box-other');
    expect(taken).toMatchObject({ status: 409, code: 'CONFLICT' });
    expect(taken.message).toContain(`machine name box-other is bound to the enrolled agent key ${other.key} on host host-o`);
    const ambiguous = await refused('twin', 'single');
    expect(ambiguous).toMatchObject({ status: 409, code: 'CONFLICT' });
    twins.forEach((t, i) => {
      expect(ambiguous.message).toContain(`${t.key} on host host-t${String(i + 1)}`);
    });
    expect(await refused('nobody', 'box-z')).toMatchObject({ status: 404, code: 'NOT_FOUND' });
    expect(await refused('box-b', 'box b')).toMatchObject({ status: 400, code: 'BODY_INVALID' });
    const unknownCli = await runCli(['agents', 'rename', 'nobody', 'box-z', '--url', url]);
    expect([unknownCli.code, unknownCli.stderr]).toEqual([5, expect.stringMatching(/no enrolled agent key is called nobody.*\[NOT_FOUND\]/)]);
    expect((await get(`${url}/v1/agents`, Keys)).keys.filter((k) => k.state === 'enrolled').map((k) => k.machine).sort()).toEqual(['box-b', 'box-other', 'twin', 'twin']);

    // A chain, then back to the first name: every run follows, and the old names point to the current one.
    expect((await rename(agentKey.key, 'box-c')).status).toBe(200);
    await agent.waitFor(/renamed by the operator, from box-b to box-c/);
    expect((await rename('host-r', 'box-a')).status).toBe(200);
    await agent.waitFor(/renamed by the operator, from box-c to box-a/);
    const third = await finished();
    expect(third.machines).toEqual(['box-a ok x6']);
    const back = [`box-a value: ${first.id} ${second.id} ${third.id}`, `box-a value: ${first.id} ${second.id} ${third.id}`];
    expect(seriesOf(await history())).toEqual(back);
    const byB = await history('box-b');
    expect(seriesOf(byB)).toEqual(back);
    expect(byB.renamed).toMatchObject({ from: 'box-b', to: 'box-a' });
    expect(await droppedReports(url, 'wrong-machine')).toBe(0);

    // The audit lists each rename, newest first.
    const audit = await runCli(['agents', '--history', '--url', url]);
    expect(audit.code, audit.stderr).toBe(0);
    const renames = audit.stdout.split('\n').filter((l) => /\brename\b/.test(l));
    expect(renames).toHaveLength(3);
    expect(renames.map((l) => /from \S+ to \S+/.exec(l)?.[0])).toEqual(['from box-c to box-a', 'from box-b to box-c', 'from box-a to box-b']);
    for (const l of renames) expect(l).toContain(agentKey.key);
  }, 240_000);
});
