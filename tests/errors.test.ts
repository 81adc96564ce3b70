/**
 * One error catalog, used alike by the REST API, the CLI and stored runs: the statuses the API
 * answers are the catalog's, the real CLI (from dist/) prints the coordinator's code unchanged and
 * exits with the catalog's exit code, and a run the coordinator gives up is stored as ABANDONED.
 */
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { Worker } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { ZodError, z } from 'zod';
import { ERROR_CODE_LIST, ERRORS, EXIT_CODES, errorCodesMarkdown, exitCodesMarkdown, FsbenchError, isErrorCode, type ErrorCode } from '../contract/errors.js';
import { FailedRun } from '../contract/result.js';
import { CoordinatorClient } from '../cli/client.js';
import { describeError } from '../coordinator/http/index.js';
import type { CoordinatorSettings } from '../coordinator/server.js';
import { queueName } from '../queue/jobs.js';
import { freePort } from './fixtures/redis-server.js';
import { runCli, spawnCli, tempDir } from './helpers/local.js';
import { useCluster } from './helpers/cluster.js';

const TOKEN = 'a-test-token-0123456789';
const cluster = useCluster('errors');
/** Coordinators here guard writes with a token, so that a wrong one can be sent. */
const coordinator = (over: Partial<CoordinatorSettings> = {}) => cluster.coordinator({ token: TOKEN, ...over });

/** The CLI's error line ends with the code, printed once, and the process with the catalog's exit code. */
function expectCliError(r: { code: number | null; stderr: string }, code: ErrorCode): void {
  expect(r.stderr).toMatch(new RegExp(`^fsbench: .* \\[${code}\\]$`, 'm'));
  expect(r.stderr.split(code).length - 1).toBe(1);
  expect(r.stderr).not.toMatch(/\n\s+at /);
  expect(r.code).toBe(ERRORS[code].exit);
}

const noop = (extra: Record<string, unknown> = {}) =>
  JSON.stringify({ name: 'errors-test', workload: 'noop', repetitions: 1, warmup: 0, params: { value: 1 }, ...extra });

describe('the catalog', () => {
  it('gives every code an error status, a documented exit code and a meaning, in both tables of docs/reference.md', () => {
    const table = errorCodesMarkdown();
    for (const code of ERROR_CODE_LIST) {
      const e = ERRORS[code];
      expect(e.status).toBeGreaterThanOrEqual(400);
      expect(e.status).toBeLessThan(600);
      expect(Object.keys(EXIT_CODES)).toContain(String(e.exit));
      expect(e.doc.length).toBeGreaterThan(10);
      expect(e.doc).not.toContain('|');
      expect(table).toContain(`| \`${code}\` | ${e.status} | ${e.exit} | `);
    }
    for (const exit of Object.keys(EXIT_CODES)) expect(exitCodesMarkdown()).toContain(`| ${exit} | `);
    expect(isErrorCode('ABANDONED')).toBe(true);
    expect(isErrorCode('constructor')).toBe(false);
  });

  it('keeps the exit codes users rely on', () => {
    expect(ERRORS.MATRIX_INVALID.exit).toBe(2);
    expect(ERRORS.CONFIG_INVALID.exit).toBe(2);
    expect(ERRORS.PRIVILEGE_MISSING.exit).toBe(1);
    expect(ERRORS.INTERNAL.exit).toBe(1);
    expect(ERRORS.CANCELLED.exit).toBe(3);
    expect(ERRORS.ABANDONED.exit).toBe(3);
    expect(ERRORS.FORBIDDEN.exit).toBe(4);
    expect(ERRORS.NOT_FOUND.exit).toBe(5);
    expect(ERRORS.UNAVAILABLE.exit).toBe(75);
  });

  it('is what a RunResult may carry as its error code', () => {
    const error = FailedRun.shape.error;
    expect(error.parse({ code: 'ABANDONED', message: 'given up' })).toEqual({ code: 'ABANDONED', message: 'given up' });
    expect(error.safeParse({ code: 'NO_SUCH_CODE', message: 'x' }).success).toBe(false);
  });

  it('answers zod errors as 400 BODY_INVALID with issues, and anything unexpected as 500 INTERNAL without a stack', () => {
    const zod = describeError(z.object({ n: z.number() }).safeParse({ n: 'x' }).error ?? new ZodError([]));
    expect(zod).toMatchObject({ status: 400, body: { error: { code: 'BODY_INVALID', issues: [{ path: 'n' }] } }, unexpected: false });
    const bug = describeError(new TypeError('secret detail'));
    expect(bug).toMatchObject({ status: 500, body: { error: { code: 'INTERNAL' } }, unexpected: true });
    expect(JSON.stringify(bug.body)).not.toMatch(/secret detail|\n\s+at /);
    const full = describeError(new FsbenchError('QUEUE_FULL', 'try again later', [], { 'Retry-After': '60' }));
    expect(full).toMatchObject({ status: 503, headers: { 'Retry-After': '60' }, unexpected: false });
  });
});

describe('the REST API', () => {
  it("answers each code with the catalog's status", async () => {
    const c = await coordinator();
    const auth = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    const answers: [ErrorCode, Response][] = [
      ['NOT_FOUND', await fetch(`${c.url}/v1/matrices/nosuchid`)],
      ['NOT_FOUND', await fetch(`${c.url}/v2/nothing`)],
      ['MATRIX_INVALID', await fetch(`${c.url}/v1/matrices`, { method: 'POST', headers: auth, body: noop({ params: { value: -5 } }) })],
      ['BODY_INVALID', await fetch(`${c.url}/v1/matrices`, { method: 'POST', headers: auth, body: '{"name": ' })],
      ['UNAUTHORIZED', await fetch(`${c.url}/v1/matrices`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: noop() })],
      ['FORBIDDEN', await fetch(`${c.url}/v1/matrices`, { method: 'POST', headers: { ...auth, authorization: 'Bearer wrong-token-0123456789' }, body: noop() })],
    ];
    const submitted = (await (await fetch(`${c.url}/v1/matrices`, { method: 'POST', headers: auth, body: noop() })).json()) as { id: string };
    expect((await fetch(`${c.url}/v1/matrices/${submitted.id}`, { method: 'DELETE', headers: auth })).status).toBe(200);
    answers.push(['CONFLICT', await fetch(`${c.url}/v1/matrices/${submitted.id}`, { method: 'DELETE', headers: auth })]);
    for (const [code, res] of answers) {
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect({ code: body.error.code, status: res.status }).toEqual({ code, status: ERRORS[code].status });
    }
    expect(answers[4]?.[1].headers.get('www-authenticate')).toMatch(/^Bearer/);
  });
});

describe('the CLI', () => {
  it("prints the coordinator's code unchanged and exits with the catalog's exit code", async () => {
    const c = await coordinator();
    const tmp = tempDir('fsbench-errors-cli-');
    cluster.cleanup(() => {
      tmp.remove();
      return Promise.resolve();
    });
    const missing = await runCli(['results', 'nosuchid', '--url', c.url]);
    expectCliError(missing, 'NOT_FOUND');
    expect(missing.stderr).toContain('no matrix nosuchid [NOT_FOUND]');
    expect(missing.stderr).not.toMatch(/HTTP 404|CONFIG_INVALID/);

    const good = path.join(tmp.dir, 'good.json');
    writeFileSync(good, noop());
    expectCliError(await runCli(['submit', good, '--url', c.url], { FSBENCH_TOKEN: 'wrong-token-0123456789' }), 'FORBIDDEN');

    const bad = path.join(tmp.dir, 'bad.yaml');
    writeFileSync(bad, 'name: bad\nworkload: noop\nrepetitions: 1\nparams:\n  value: -5\n');
    const invalid = await runCli(['submit', bad, '--url', c.url], { FSBENCH_TOKEN: TOKEN });
    expectCliError(invalid, 'MATRIX_INVALID');
    expect(invalid.stderr).toContain('params.value');
    expectCliError(await runCli(['submit', path.join(tmp.dir, 'nope.yaml'), '--url', c.url], { FSBENCH_TOKEN: TOKEN }), 'MATRIX_FILE_UNREADABLE');

    const unreachable = await runCli(['results', 'x', '--url', `http://127.0.0.1:${await freePort()}`]);
    expectCliError(unreachable, 'UNAVAILABLE');
    expect(unreachable.code).toBe(75);
  });

  it('exits 2 on a bad command line', async () => {
    const r = await runCli(['results']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("missing required argument 'id'");
  });

  it('keeps a code this fsbench does not know visible, as INTERNAL', async () => {
    const server: Server = createServer((_req, res) => {
      res.writeHead(418, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { code: 'FROM_THE_FUTURE', message: 'a newer coordinator says no' } }));
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    cluster.cleanup(
      () =>
        new Promise<void>((resolve) => {
          server.close(() => {
            resolve();
          });
        }),
    );
    const r = await runCli(['results', 'x', '--url', `http://127.0.0.1:${(server.address() as AddressInfo).port}`]);
    expectCliError(r, 'INTERNAL');
    expect(r.stderr).toContain('a newer coordinator says no');
    expect(r.stderr).toContain('FROM_THE_FUTURE');
  });

  it('exits 3 with CANCELLED when the matrix it waits for is cancelled', async () => {
    // No agent: the matrix waits in the queue until it is cancelled.
    const c = await coordinator();
    const tmp = tempDir('fsbench-errors-wait-');
    cluster.cleanup(() => {
      tmp.remove();
      return Promise.resolve();
    });
    const file = path.join(tmp.dir, 'wait.json');
    writeFileSync(file, noop());
    const child = spawnCli(['submit', file, '--wait', '--url', c.url], { FSBENCH_TOKEN: TOKEN });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
    const closed = once(child, 'close') as Promise<[number | null]>;
    for (let i = 0; i < 400 && !stdout.includes('\n'); i++) await new Promise((r) => setTimeout(r, 25));
    const id = stdout.trim();
    expect(id).toMatch(/^[0-9a-f]{16}$/);
    const client = new CoordinatorClient(c.url, TOKEN);
    await client.fetch('DELETE', `/v1/matrices/${id}`);
    const [code] = await closed;
    expectCliError({ code, stderr }, 'CANCELLED');
    expect(code).toBe(3);
    expect(stderr).toContain(`matrix ${id} was cancelled`);
  });
});

describe('a run the coordinator gives up', () => {
  it('is stored as failed with ABANDONED, saying why', async () => {
    const c = await coordinator({ maxAttempts: 1 });
    // An agent that abandons every run it takes, as one that is stopping or loses its host lock does.
    const worker = new Worker(
      queueName('any'),
      () => Promise.reject(new Error('abandoned: the agent is stopping and did not get the host lock')),
      { connection: { url: cluster.redis().url }, prefix: c.prefix },
    );
    cluster.cleanup(() => worker.close());
    const client = new CoordinatorClient(c.url, TOKEN);
    const { id } = (await client.json('POST', '/v1/matrices', JSON.parse(noop()))) as { id: string };
    let detail: { state: string; failures: { code: string }[] } = { state: '', failures: [] };
    for (let i = 0; i < 400 && detail.state !== 'done'; i++) {
      detail = (await client.json('GET', `/v1/matrices/${id}`)) as typeof detail;
      if (detail.state !== 'done') await new Promise((r) => setTimeout(r, 25));
    }
    expect(detail.state).toBe('done');
    expect(detail.failures).toEqual([expect.objectContaining({ code: 'ABANDONED' })]);
    const { runs } = (await client.json('GET', `/v1/matrices/${id}/results`)) as { runs: { state: string; error?: { code: string; message: string } }[] };
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({ state: 'failed', error: { code: 'ABANDONED' } });
    expect(runs[0]?.error?.message).toBe('the run was given up after 1 attempt(s) (0 by agents that died): abandoned: the agent is stopping and did not get the host lock');
  });
});
