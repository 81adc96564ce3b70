/**
 * A corpus of hostile requests and matrices against a real coordinator (real redis-server, real
 * SQLite): each gets a clear 4xx with its code from the catalog, never a stack; the coordinator
 * keeps serving, its listing and /metrics still answer, and no job is left in Redis that its
 * store does not know.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { ErrorCode } from '../contract/errors.js';
import type { RunResult } from '../contract/result.js';
import { expandMatrix, parseMatrix } from '../contract/matrix.js';
import { Store } from '../coordinator/store/index.js';
import { queueName } from '../queue/jobs.js';
import { syntheticRuns } from './fixtures/synthetic.js';
import { useCluster } from './helpers/cluster.js';

const cluster = useCluster('hostile');

interface Hostile {
  readonly what: string;
  readonly method?: string;
  readonly path?: string;
  readonly headers?: Record<string, string>;
  readonly body?: string;
  readonly status: number;
  readonly code: ErrorCode;
}

const json = (value: unknown) => JSON.stringify(value);
const matrix = (extra: Record<string, unknown>) => json({ name: 'ok', workload: 'noop', params: { value: 1 }, ...extra });
const yaml = { 'content-type': 'application/yaml' };
const ndjson = { 'content-type': 'application/x-ndjson' };

/** A valid run from a laptop, with whatever a hostile uploader changes in it. */
function run(change: (r: Record<string, unknown>) => void): string {
  const [first] = syntheticRuns({ matrix: { name: 'up', workload: 'noop', repetitions: 1, params: { value: 1 } }, machine: { machine: 'laptop' } });
  const r = JSON.parse(JSON.stringify(first)) as Record<string, unknown>;
  change(r);
  return `${JSON.stringify(r)}\n`;
}
const fingerprintOf = (r: Record<string, unknown>) => z.record(z.string(), z.unknown()).parse(r['fingerprint']);

const BILLION_LAUGHS = [
  'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
  ...Array.from({ length: 8 }, (_, i) => `${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)}]`),
  'name: bomb',
  'workload: noop',
].join('\n');

const CORPUS: readonly Hostile[] = [
  // Parameters that walk the prototype, or are no parameter at all.
  { what: 'a parameter named constructor', body: matrix({ params: { constructor: 1 } }), status: 400, code: 'MATRIX_INVALID' },
  { what: 'an include entry naming toString', body: matrix({ include: [{ toString: 1 }] }), status: 400, code: 'MATRIX_INVALID' },
  { what: 'a parameter named __proto__', body: '{"name":"p","workload":"noop","params":{"__proto__":{"value":2}}}', status: 400, code: 'MATRIX_INVALID' },
  { what: 'an exclude entry naming __proto__', body: '{"name":"p","workload":"noop","exclude":[{"__proto__":1}]}', status: 400, code: 'MATRIX_INVALID' },
  { what: 'a parameter name with a dot-dot', body: matrix({ params: { 'container..storage': 'tmpfs' } }), status: 400, code: 'MATRIX_INVALID' },
  // Names.
  { what: 'a matrix name with spaces and punctuation', body: matrix({ name: 'not a valid name!' }), status: 400, code: 'MATRIX_INVALID' },
  { what: 'a matrix name of 4,000 characters', body: matrix({ name: 'x'.repeat(4000) }), status: 400, code: 'MATRIX_INVALID' },
  { what: 'a matrix name with a control character', body: matrix({ name: 'bell\u0007' }), status: 400, code: 'MATRIX_INVALID' },
  { what: 'a matrix name in another script', body: matrix({ name: '名前' }), status: 400, code: 'MATRIX_INVALID' },
  { what: 'a matrix name with a right-to-left override', body: matrix({ name: 'abc\u202Etxt' }), status: 400, code: 'MATRIX_INVALID' },
  { what: 'a description of 100,000 characters', body: matrix({ description: 'd'.repeat(100_000) }), status: 400, code: 'MATRIX_INVALID' },
  { what: 'an unknown workload', body: matrix({ workload: 'nope' }), status: 400, code: 'MATRIX_INVALID' },
  { what: 'an unknown top-level key', body: matrix({ priority: 'high' }), status: 400, code: 'MATRIX_INVALID' },
  // Absurd sizes and durations.
  { what: 'a billion repetitions', body: matrix({ repetitions: 1e9 }), status: 400, code: 'MATRIX_INVALID' },
  { what: 'negative repetitions', body: matrix({ repetitions: -1 }), status: 400, code: 'MATRIX_INVALID' },
  { what: 'a fractional warmup', body: matrix({ warmup: 1.5 }), status: 400, code: 'MATRIX_INVALID' },
  { what: 'a warmup of 101', body: matrix({ warmup: 101 }), status: 400, code: 'MATRIX_INVALID' },
  { what: 'a list of 5,000 values', body: matrix({ params: { value: Array.from({ length: 5000 }, (_, i) => i) } }), status: 400, code: 'MATRIX_INVALID' },
  {
    what: 'a cartesian product of ten billion cells',
    body: json({ name: 'big', workload: 'inotify', params: { writers: range(100), files: range(100), readerNice: range(40, -20), latencySampling: range(100), drainTimeout: range(100, 100) } }),
    status: 400,
    code: 'MATRIX_TOO_LARGE',
  },
  { what: 'a duration of a million hours', body: json({ name: 'long', workload: 'inotify', params: { duration: '1000000h' } }), status: 400, code: 'MATRIX_INVALID' },
  { what: 'a size in petabytes', body: json({ name: 'pb', workload: 'inotify', params: { bufferBytes: '1PiB' } }), status: 400, code: 'MATRIX_INVALID' },
  { what: 'a decimal size unit', body: json({ name: 'kb', workload: 'inotify', params: { bufferBytes: '4KB' } }), status: 400, code: 'MATRIX_INVALID' },
  { what: 'a sleep of 600 days in noop', body: matrix({ params: { sleep: '14400h' } }), status: 400, code: 'MATRIX_INVALID' },
  { what: 'a number as a string of 5,000 digits', body: matrix({ params: { value: '9'.repeat(5000) } }), status: 400, code: 'MATRIX_INVALID' },
  // Paths.
  { what: 'a relative target', body: json({ name: 't', workload: 'inotify', params: { target: '../etc' } }), status: 400, code: 'MATRIX_INVALID' },
  { what: 'a target with a .. segment', body: json({ name: 't', workload: 'inotify', params: { target: '/tmp/../etc' } }), status: 400, code: 'MATRIX_INVALID' },
  { what: 'a target with //', body: json({ name: 't', workload: 'inotify', params: { target: '/tmp//x' } }), status: 400, code: 'MATRIX_INVALID' },
  { what: 'a target with a NUL byte', body: json({ name: 't', workload: 'inotify', params: { target: '/tmp/x\u0000y' } }), status: 400, code: 'MATRIX_INVALID' },
  { what: 'a metadata target through /proc/..', body: json({ name: 't', workload: 'metadata', params: { fs: 'none', target: '/proc/sys/../../etc' } }), status: 400, code: 'MATRIX_INVALID' },
  // Placement.
  { what: 'an empty label list', body: matrix({ placement: { labels: [] } }), status: 400, code: 'MATRIX_INVALID' },
  { what: 'a label with a newline', body: matrix({ placement: { labels: ['ssd\nnvme'] } }), status: 400, code: 'MATRIX_INVALID' },
  { what: 'a placement that is not one', body: matrix({ placement: 'everywhere' }), status: 400, code: 'MATRIX_INVALID' },
  { what: 'placement all with no agent', body: matrix({ placement: 'all' }), status: 409, code: 'NO_MATCHING_AGENTS' },
  // Bodies.
  { what: 'a body that is not JSON', body: '{"name":', status: 400, code: 'BODY_INVALID' },
  { what: 'an empty JSON body', body: '', status: 400, code: 'MATRIX_INVALID' },
  { what: 'JSON null', body: 'null', status: 400, code: 'MATRIX_INVALID' },
  { what: 'a JSON array', body: '[1,2,3]', status: 400, code: 'MATRIX_INVALID' },
  { what: 'JSON nested 20,000 deep', body: `${'['.repeat(20_000)}${']'.repeat(20_000)}`, status: 400, code: 'MATRIX_INVALID' },
  { what: 'a YAML billion laughs', headers: yaml, body: BILLION_LAUGHS, status: 400, code: 'BODY_INVALID' },
  { what: 'YAML that is not YAML', headers: yaml, body: 'name: [unclosed', status: 400, code: 'BODY_INVALID' },
  // An unknown tag is a plain string to the YAML parser, never code; here it makes a bad name.
  { what: 'YAML with a custom tag', headers: yaml, body: 'name: !!js/function "() => 1"\nworkload: noop', status: 400, code: 'MATRIX_INVALID' },
  { what: 'a body larger than FSBENCH_MAX_BODY', body: matrix({ description: 'x'.repeat(200 * 1024) }), status: 413, code: 'PAYLOAD_TOO_LARGE' },
  { what: 'text/plain, as a cross-site form sends', headers: { 'content-type': 'text/plain' }, body: matrix({}), status: 415, code: 'UNSUPPORTED_MEDIA_TYPE' },
  { what: 'a form post', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'name=x', status: 415, code: 'UNSUPPORTED_MEDIA_TYPE' },
  { what: 'a charset nobody speaks', headers: { 'content-type': 'application/json; charset=klingon' }, body: matrix({}), status: 415, code: 'UNSUPPORTED_MEDIA_TYPE' },
  { what: 'a content encoding it does not take', headers: { 'content-type': 'application/json', 'content-encoding': 'br-bogus' }, body: matrix({}), status: 415, code: 'UNSUPPORTED_MEDIA_TYPE' },
  { what: 'an Idempotency-Key with a space', headers: { 'idempotency-key': 'a b' }, body: matrix({}), status: 400, code: 'BODY_INVALID' },
  // Who is asking.
  { what: 'a write naming another host (DNS rebinding)', headers: { host: 'evil.example' }, body: matrix({}), status: 403, code: 'FORBIDDEN' },
  { what: 'a write from a cross-site page', headers: { origin: 'http://evil.example' }, body: matrix({}), status: 403, code: 'FORBIDDEN' },
  { what: 'a write marked cross-site by the browser', headers: { 'sec-fetch-site': 'cross-site' }, body: matrix({}), status: 403, code: 'FORBIDDEN' },
  // Other routes.
  { what: 'a listing limit of 100,000', method: 'GET', path: '/v1/matrices?limit=100000', status: 400, code: 'BODY_INVALID' },
  { what: 'a listing state that is not one', method: 'GET', path: '/v1/matrices?state=%27%3B%20DROP', status: 400, code: 'BODY_INVALID' },
  { what: 'an id with a NUL byte', method: 'GET', path: '/v1/matrices/%00', status: 404, code: 'NOT_FOUND' },
  { what: 'results of an unknown matrix', method: 'GET', path: '/v1/matrices/nope/results', status: 404, code: 'NOT_FOUND' },
  { what: 'results in XML', method: 'GET', path: '/v1/matrices/nope/results?format=xml', status: 400, code: 'BODY_INVALID' },
  { what: 'cancelling an unknown matrix', method: 'DELETE', path: '/v1/matrices/nope', status: 404, code: 'NOT_FOUND' },
  { what: 'a compare without a baseline', method: 'GET', path: '/v1/compare', status: 400, code: 'BODY_INVALID' },
  { what: 'a compare at alpha 2', method: 'GET', path: '/v1/compare?baseline=x&alpha=2', status: 400, code: 'BODY_INVALID' },
  { what: 'a route that is not one', method: 'PUT', path: '/v1/matrices', status: 404, code: 'NOT_FOUND' },
  // Uploads.
  { what: 'an upload as JSON', path: '/v1/results', body: json({ runs: [] }), status: 415, code: 'UNSUPPORTED_MEDIA_TYPE' },
  { what: 'an upload as text/plain', path: '/v1/results', headers: { 'content-type': 'text/plain' }, body: run(() => undefined), status: 415, code: 'UNSUPPORTED_MEDIA_TYPE' },
  { what: 'an upload whose matrix name is not one', path: '/v1/results', headers: ndjson, body: run((r) => (r['matrix'] = 'not a valid name!')), status: 400, code: 'BODY_INVALID' },
  {
    what: 'an upload whose machine name has 4,000 characters',
    path: '/v1/results',
    headers: ndjson,
    body: run((r) => (r['fingerprint'] = { ...fingerprintOf(r), machine: 'm'.repeat(4000) })),
    status: 400,
    code: 'BODY_INVALID',
  },
  {
    what: 'an upload whose CPU model holds a newline',
    path: '/v1/results',
    headers: ndjson,
    body: run((r) => (r['fingerprint'] = { ...fingerprintOf(r), hostname: 'laptop\nINFO: forged log line' })),
    status: 400,
    code: 'BODY_INVALID',
  },
  { what: 'an upload with a parameter named constructor', path: '/v1/results', headers: ndjson, body: run((r) => (r['params'] = { constructor: 1 })), status: 400, code: 'BODY_INVALID' },
  { what: 'an upload of a line that is not JSON', path: '/v1/results', headers: ndjson, body: '{"matrix":\n', status: 400, code: 'BODY_INVALID' },
  { what: 'an upload with an error message of 100,000 characters', path: '/v1/results', headers: ndjson, body: run((r) => { r['state'] = 'failed'; delete r['metrics']; delete r['histograms']; delete r['info']; r['error'] = { code: 'INTERNAL', message: 'e'.repeat(100_000) }; }), status: 400, code: 'BODY_INVALID' },
  { what: 'an upload of nothing', path: '/v1/results', headers: ndjson, body: '\n\n', status: 400, code: 'BODY_INVALID' },
];

/**
 * One request as a client sends it, by node:http rather than fetch: fetch will not send a Host
 * header of the caller's choosing, and DNS rebinding is exactly that.
 */
function send(port: number, h: Hostile): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const headers = { ...(h.body === undefined ? {} : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(h.body)) }), ...h.headers };
    const req = request({ host: '127.0.0.1', port, method: h.method ?? 'POST', path: h.path ?? '/v1/matrices', headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, text });
      });
    });
    req.on('error', reject);
    req.end(h.body);
  });
}

function range(n: number, from = 1): number[] {
  return Array.from({ length: n }, (_, i) => from + i);
}

const ErrorBody = z.object({ error: z.object({ code: z.string(), message: z.string().min(1) }).loose() }).loose();

describe('hostile requests', () => {
  it(`each of ${CORPUS.length} gets its 4xx and code, and the coordinator keeps serving`, async () => {
    expect(CORPUS.length).toBeGreaterThanOrEqual(40);
    const c = await cluster.coordinator({ maxBody: 128 * 1024 });
    const answers: { what: string; status: number; code: string; stack: boolean }[] = [];
    for (const h of CORPUS) {
      const { status, text } = await send(c.port, h);
      const parsed = ErrorBody.safeParse(JSON.parse(text));
      answers.push({ what: h.what, status, code: parsed.success ? parsed.data.error.code : `(no error body: ${text.slice(0, 80)})`, stack: /\n\s+at /.test(text) });
      // Between any two of them, the coordinator still answers.
      expect((await fetch(`${c.url}/healthz`)).status).toBe(200);
    }
    expect(answers).toHaveLength(CORPUS.length);
    // Only the ones answered otherwise than expected, each with what it got: an empty list passes.
    const wrong = answers.flatMap((a, i) => {
      const h = CORPUS[i];
      return h && (a.status !== h.status || a.code !== h.code || a.stack) ? [{ ...a, expected: `${h.status} ${h.code}` }] : [];
    });
    expect(wrong).toEqual([]);

    // Listings and metrics still answer, and nothing hostile was stored or queued.
    const listing = await fetch(`${c.url}/v1/matrices`);
    expect(listing.status).toBe(200);
    expect(z.object({ matrices: z.array(z.unknown()) }).parse(await listing.json()).matrices).toEqual([]);
    const metrics = await fetch(`${c.url}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain('fsbench_matrices');
    const q = new Queue(queueName('any'), { connection: { url: cluster.redis().url }, prefix: c.prefix });
    try {
      expect(await q.getJobCounts('wait', 'delayed', 'prioritized', 'active')).toEqual({ wait: 0, delayed: 0, prioritized: 0, active: 0 });
    } finally {
      await q.close();
    }
  }, 120_000);

  it('a valid submission and upload still go through after all of them, every job known to the store', async () => {
    const c = await cluster.coordinator();
    const sub = await fetch(`${c.url}/v1/matrices`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: matrix({ params: { value: [1, 2] } }) });
    expect(sub.status).toBe(202);
    const runs: RunResult[] = syntheticRuns({ matrix: { name: 'up', workload: 'noop', repetitions: 2, params: { value: 1 } }, machine: { machine: 'laptop' } });
    const up = await fetch(`${c.url}/v1/results`, { method: 'POST', headers: ndjson, body: runs.map((r) => JSON.stringify(r)).join('\n') });
    expect(up.status).toBe(201);
    const { matrices } = z.object({ matrices: z.array(z.object({ id: z.string() }).loose()) }).parse(await (await fetch(`${c.url}/v1/matrices`)).json());
    expect(matrices).toHaveLength(2);
    const q = new Queue(queueName('any'), { connection: { url: cluster.redis().url }, prefix: c.prefix });
    try {
      const jobs = await q.getJobs(['wait']);
      expect(jobs).toHaveLength(10);
      const known = new Set(matrices.map((m) => m.id));
      for (const j of jobs) expect(known.has(z.object({ matrixId: z.string() }).loose().parse(j.data).matrixId)).toBe(true);
    } finally {
      await q.close();
    }
  });

  it('a stored row this version cannot read is skipped by the listings, reported once, and the rest still answer', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'fsbench-hostile-db-'));
    cluster.cleanup(() => rm(dataDir, { recursive: true, force: true }));
    const spec = (name: string) => parseMatrix({ name, workload: 'noop', params: { value: 1 } });
    const seed = Store.open(dataDir);
    for (const [id, name] of [['0000000000000001', 'good'], ['0000000000000002', 'bad']] as const) {
      seed.createMatrix({ id, spec: spec(name), targets: [], cells: expandMatrix(spec(name)), expectedRuns: 1, estimatedMs: 1 });
    }
    seed.close();
    // What an older version, or a hand edit, could have left: a name the contract refuses.
    const db = new Database(path.join(dataDir, 'fsbench.db'));
    db.prepare("UPDATE matrices SET spec = json_set(spec, '$.name', 'not a valid name!') WHERE id = ?").run('0000000000000002');
    db.close();

    const warnings: string[] = [];
    const store = Store.open(dataDir, (line) => warnings.push(line));
    try {
      expect(store.listMatrices(100).map((m) => m.id)).toEqual(['0000000000000001']);
      expect(store.listMatrices(100).map((m) => m.id)).toEqual(['0000000000000001']);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(/matrix 0000000000000002 .* cannot be read and is left out of listings \(name: /);
    } finally {
      store.close();
    }

    const c = await cluster.coordinator({ dataDir });
    const listing = await fetch(`${c.url}/v1/matrices`);
    expect(listing.status).toBe(200);
    const { matrices } = z.object({ matrices: z.array(z.object({ id: z.string() }).loose()) }).parse(await listing.json());
    expect(matrices.map((m) => m.id)).toEqual(['0000000000000001']);
    // Started although the unreadable matrix was one to finish enqueueing; to the API it is not there.
    expect((await fetch(`${c.url}/v1/matrices/0000000000000002`)).status).toBe(404);
    expect((await fetch(`${c.url}/v1/matrices/0000000000000001`)).status).toBe(200);
    expect((await fetch(`${c.url}/metrics`)).status).toBe(200);
    expect((await fetch(`${c.url}/`)).status).toBe(200);
  });
});
