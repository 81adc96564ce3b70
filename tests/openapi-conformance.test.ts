/**
 * Real answers of every route of a real coordinator (real redis-server, real SQLite), errors
 * included, held to the OpenAPI document that same coordinator serves at /openapi.json, with an
 * independent validator: Ajv (JSON Schema 2020-12, OpenAPI 3.1's dialect, formats checked), not
 * the zod schemas the document is generated from. An answer whose path, method, status or media
 * type the document does not list fails, and so does a JSON body or a documented header that
 * does not match its schema. Every operation of the document must be exercised.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { expandMatrix, parseMatrix } from '../contract/matrix.js';
import type { RunResult } from '../contract/result.js';
import { Store, type StoredRun } from '../coordinator/store/index.js';
import { startRedis } from './fixtures/redis-server.js';
import { syntheticRunStream, syntheticRuns } from './fixtures/synthetic.js';
import { useCluster, type Cluster } from './helpers/cluster.js';
import { announcementOf, loadOrCreateAgentKey } from '../agent/identity.js';
import { agentKeysKey } from '../queue/keys.js';

const cluster = useCluster('openapi');
const TOKEN = 'openapi-test-token-0123456789';
// ajv-formats is CommonJS: its default export arrives as the module object under NodeNext.
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

interface Answer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: string;
}

interface Send {
  readonly method?: string;
  readonly headers?: Record<string, string>;
  readonly body?: string;
  /** Only the status line and headers: the answer streams on (an event stream). */
  readonly headOnly?: boolean;
}

/** node:http rather than fetch: the test chooses the Host header, and may stop after the head. */
function send(base: string, target: string, o: Send = {}): Promise<Answer> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, method: o.method ?? 'GET', path: target, headers: o.headers ?? {} }, (res) => {
      const head = { status: res.statusCode ?? 0, headers: res.headers };
      if (o.headOnly === true) {
        res.destroy();
        resolve({ ...head, body: '' });
        return;
      }
      const chunks: Buffer[] = [];
      res.on('data', (d: Buffer) => chunks.push(d));
      res.on('end', () => {
        resolve({ ...head, body: Buffer.concat(chunks).toString('utf8') });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(o.body);
  });
}

const JsonObject = z.record(z.string(), z.unknown());
type JsonObject = z.infer<typeof JsonObject>;

/** JSON Pointer escaping (RFC 6901). */
const escape = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

/**
 * The served document, and what checking an answer against it takes: the operation its path and
 * method name, the response its status names (following a `$ref` to components.responses), the
 * media type, and the schemas of the body and headers, compiled by Ajv from the document itself.
 */
class Conformance {
  private readonly ajv = new Ajv2020({ strict: true, allErrors: true, allowUnionTypes: true });
  private readonly compiled = new Map<string, ValidateFunction>();
  /** `GET /v1/matrices/{id}` -> the statuses seen. */
  readonly seen = new Map<string, Set<number>>();

  constructor(readonly doc: JsonObject) {
    addFormats(this.ajv);
    // The document's own keys around its schemas; the schemas inside are checked strictly.
    this.ajv.addVocabulary(['openapi', 'info', 'paths', 'components', 'servers', 'security', 'tags']);
    this.ajv.addSchema(doc, 'openapi.json');
  }

  private at(pointer: string): unknown {
    let node: unknown = this.doc;
    for (const part of pointer.split('/').slice(1)) {
      const key = part.replace(/~1/g, '/').replace(/~0/g, '~');
      node = JsonObject.safeParse(node).data?.[key];
    }
    return node;
  }

  private validator(pointer: string): ValidateFunction {
    let v = this.compiled.get(pointer);
    if (!v) {
      v = this.ajv.compile({ $ref: `openapi.json#${pointer}` });
      this.compiled.set(pointer, v);
    }
    return v;
  }

  /** The document's path template that `path` (no query) matches. */
  private template(path: string): string | undefined {
    const paths = Object.keys(JsonObject.parse(this.doc['paths']));
    return paths.find((t) => new RegExp(`^${t.replace(/[.]/g, '\\.').replace(/\{[^}]+\}/g, '[^/]+')}$`).test(path));
  }

  /** Every problem of one answer; empty when it conforms. */
  problems(method: string, target: string, a: Answer): string[] {
    const path = target.split('?')[0] ?? target;
    const template = this.template(path);
    if (template === undefined) return [`${method} ${path}: no such path in the document`];
    const opPointer = `/paths/${escape(template)}/${method.toLowerCase()}`;
    const op = `${method} ${template}`;
    if (this.at(opPointer) === undefined) return [`${op}: no such operation in the document`];
    const seen = this.seen.get(op) ?? new Set<number>();
    seen.add(a.status);
    this.seen.set(op, seen);
    let responsePointer = `${opPointer}/responses/${a.status}`;
    const response = JsonObject.safeParse(this.at(responsePointer)).data;
    if (!response) return [`${op} answered ${a.status}, a status the document does not list`];
    const refTo = response['$ref'];
    if (typeof refTo === 'string') responsePointer = refTo.replace(/^#/, '');
    const problems: string[] = [];
    const type = String(a.headers['content-type'] ?? '').split(';')[0]?.trim() ?? '';
    const mediaPointer = `${responsePointer}/content/${escape(type)}`;
    if (this.at(mediaPointer) === undefined) {
      problems.push(`${op} ${a.status}: media type ${JSON.stringify(type)} is not in the document`);
    } else if (type === 'application/json') {
      const check = this.validator(`${mediaPointer}/schema`);
      let body: unknown;
      try {
        body = JSON.parse(a.body);
      } catch {
        body = Symbol('not JSON');
      }
      if (!check(body)) problems.push(`${op} ${a.status}: the body does not match: ${this.ajv.errorsText(check.errors)}; body ${a.body.slice(0, 300)}`);
    } else if (this.at(`${mediaPointer}/schema`) !== undefined && !this.validator(`${mediaPointer}/schema`)(a.body)) {
      problems.push(`${op} ${a.status}: the body does not match its ${type} schema`);
    }
    const headers = JsonObject.safeParse(this.at(`${responsePointer}/headers`)).data ?? {};
    for (const name of Object.keys(headers)) {
      const value = a.headers[name.toLowerCase()];
      if (typeof value !== 'string') continue;
      const check = this.validator(`${responsePointer}/headers/${escape(name)}/schema`);
      if (!check(value)) problems.push(`${op} ${a.status}: header ${name} ${JSON.stringify(value)} does not match: ${this.ajv.errorsText(check.errors)}`);
    }
    return problems;
  }

  /** `GET /v1/agents 404` for every status of every operation of the document. */
  answers(): string[] {
    return this.operations().flatMap((op) => {
      const [method = '', template = ''] = op.split(' ');
      const responses = JsonObject.parse(this.at(`/paths/${escape(template)}/${method.toLowerCase()}/responses`));
      return Object.keys(responses).map((status) => `${op} ${status}`);
    });
  }

  /** `GET /v1/agents` for every operation of the document. */
  operations(): string[] {
    const methods = new Set(['get', 'put', 'post', 'delete', 'patch', 'head', 'options']);
    return Object.entries(JsonObject.parse(this.doc['paths'])).flatMap(([template, item]) =>
      Object.keys(JsonObject.parse(item))
        .filter((m) => methods.has(m))
        .map((m) => `${m.toUpperCase()} ${template}`),
    );
  }
}

/** Sends a request and checks its answer against the document; expects `status`. */
async function exchange(conf: Conformance, base: string, target: string, status: number, o: Send = {}): Promise<Answer> {
  const method = o.method ?? 'GET';
  if (process.env['DEBUG_CONF']) process.stderr.write(`> ${method} ${target}\n`);
  const a = await send(base, target, o);
  expect(conf.problems(method, target, a), `${method} ${target}`).toEqual([]);
  expect(a.status, `${method} ${target}: ${a.body.slice(0, 300)}`).toBe(status);
  return a;
}

const jsonType = { 'content-type': 'application/json' };
const ndjsonType = { 'content-type': 'application/x-ndjson' };
const matrixJson = (extra: Record<string, unknown> = {}) => JSON.stringify({ name: 'conf', workload: 'noop', repetitions: 1, warmup: 0, params: { value: 1 }, ...extra });
const Id = z.object({ id: z.string() }).loose();
const Upload = z.object({ matrices: z.array(z.object({ id: z.string() }).loose()) }).loose();

/** A run's common part, to make a failed or skipped run of the same cell. */
function common(r: RunResult) {
  const { matrix, cellId, workload, repetition, params, startedAt, finishedAt, fingerprint, limits } = r;
  return { matrix, cellId, workload, repetition, params, startedAt, finishedAt, fingerprint, limits };
}

/** An uploaded machine's runs: ok ones, one failed and one skipped, with free text in their messages. */
function uploadBody(machine: string, matrix = 'uploaded'): string {
  const runs = syntheticRuns({ matrix: { name: matrix, workload: 'inotify', repetitions: 3, params: { files: [64, 128] } }, machine: { machine } });
  const changed = runs.map((r, i): RunResult => {
    if (i === 1) return { ...common(r), state: 'failed', error: { code: 'MOUNT_FAILED', message: 'mount: /x: wrong fs type' } };
    if (i === 2) return { ...common(r), state: 'skipped', reason: 'not on this kernel' };
    return r;
  });
  return `${changed.map((r) => JSON.stringify(r)).join('\n')}\n`;
}

/** A finished matrix of wide runs written into a coordinator's database (as its collector would): far more than a socket buffers. */
function storeHeavyMatrix(dataDir: string, id: string): void {
  const store = Store.open(dataDir);
  try {
    const cells = expandMatrix(parseMatrix({ name: id, workload: 'inotify', repetitions: 1, warmup: 0, params: { files: Array.from({ length: 100 }, (_, i) => 64 * (i + 1)) } }));
    store.createMatrix({ id, spec: parseMatrix({ name: id, workload: 'inotify', repetitions: 4, warmup: 0 }), targets: [{ target: 'any', machine: null }], cells, expectedRuns: cells.length * 4, estimatedMs: 0 });
    store.markEnqueued(id);
    const buckets = Array.from({ length: 4000 }, (_, i): [number, number, number] => [1000 * (i + 1), 1000 * (i + 2), 1 + (i % 7)]);
    const batch: StoredRun[] = [...syntheticRunStream(cells, 4, { matrixId: id, machine: { machine: 'heavy' } })].map((r) => ({
      kind: 'result',
      matrixId: id,
      target: 'any',
      result: r.state === 'ok' ? { ...r, histograms: { writeToEventLatency: { unit: 'ns', buckets } } } : r,
      attempts: 1,
    }));
    store.storeRuns(batch);
  } finally {
    store.close();
  }
}

async function conformance(c: { url: string }): Promise<Conformance> {
  const a = await send(c.url, '/openapi.json');
  expect(a.status).toBe(200);
  return new Conformance(JsonObject.parse(JSON.parse(a.body)));
}

async function uploadTo(conf: Conformance, base: string, body: string, status: 201 | 200 = 201, headers: Record<string, string> = {}): Promise<string> {
  const a = await exchange(conf, base, '/v1/results', status, { method: 'POST', headers: { ...ndjsonType, ...headers }, body });
  const [m] = Upload.parse(JSON.parse(a.body)).matrices;
  if (!m) throw new Error('the upload stored no matrix');
  return m.id;
}

describe('the OpenAPI document', () => {
  it('lists every answer of every route, errors included, and each body and header matches its schema', async () => {
    const open = await cluster.coordinator({ maxDownloads: 1, maxStreams: 1 });
    const conf = await conformance(open);
    const base = open.url;
    const rebound = { host: 'rebind.example' };

    // Probes, and the document itself.
    await exchange(conf, base, '/healthz', 200, { headers: rebound });
    await exchange(conf, base, '/livez', 200, { headers: rebound });
    await exchange(conf, base, '/readyz', 200);
    await exchange(conf, base, '/openapi.json', 200);
    await exchange(conf, base, '/openapi.json', 403, { headers: rebound });
    await exchange(conf, base, '/metrics', 200);
    await exchange(conf, base, '/metrics', 403, { headers: rebound });

    // Agents: a live one, so that its whole status (and its key) is checked; then stopped, so that
    // the matrices below stay queued (a stream to follow, a matrix to cancel).
    const agent = await cluster.agent(open.prefix, 'openapi-host', 'openapi-machine', ['conf']);
    const Listed = z.object({ agents: z.array(z.unknown()) }).loose();
    for (let i = 0; i < 100 && Listed.parse(JSON.parse((await send(base, '/v1/agents')).body)).agents.length === 0; i++) await new Promise((r) => setTimeout(r, 50));
    const listed = await exchange(conf, base, '/v1/agents', 200);
    expect(Listed.parse(JSON.parse(listed.body)).agents).toHaveLength(1);
    await exchange(conf, base, '/v1/agents', 403, { headers: rebound });
    await agent.stop();

    // Enrollment: three keys announced (two on one machine name), one approved, tokens made.
    const redis = new Redis(cluster.redis().url);
    try {
      for (const [hostId, machine] of [['twin-1', 'twin'], ['twin-2', 'twin'], ['solo-1', 'solo']] as const) {
        const dir = await mkdtemp(path.join(os.tmpdir(), 'fsbench-conf-key-'));
        cluster.cleanup(() => rm(dir, { recursive: true, force: true }));
        const identity = await loadOrCreateAgentKey(dir);
        await redis.hset(agentKeysKey(open.prefix), identity.fingerprint, announcementOf(identity, hostId, machine, []));
      }
    } finally {
      redis.disconnect();
    }
    const approve = (body: string, status: number, headers: Record<string, string> = jsonType) =>
      exchange(conf, base, '/v1/agents/approve', status, { method: 'POST', headers, body });
    await approve(JSON.stringify({ agent: 'solo' }), 200);
    await approve(JSON.stringify({ agent: 'twin' }), 409);
    await approve(JSON.stringify({ agent: 'nobody' }), 404);
    await approve(JSON.stringify({ name: 'solo' }), 400);
    await approve(JSON.stringify({ agent: 'x'.repeat(100_000) }), 413);
    await approve('agent=solo', 415, { 'content-type': 'application/x-www-form-urlencoded' });
    await approve(JSON.stringify({ agent: 'twin' }), 403, { ...jsonType, 'x-forwarded-proto': 'https' });
    const minted = await exchange(conf, base, '/v1/agents/tokens', 201, { method: 'POST', headers: jsonType, body: JSON.stringify({ count: 2, ttl: '10m' }) });
    expect(z.object({ tokens: z.array(z.string()) }).loose().parse(JSON.parse(minted.body)).tokens).toHaveLength(2);
    await exchange(conf, base, '/v1/agents/tokens', 400, { method: 'POST', headers: jsonType, body: JSON.stringify({ count: 0 }) });
    await exchange(conf, base, '/v1/agents/tokens', 413, { method: 'POST', headers: jsonType, body: JSON.stringify({ ttl: 'x'.repeat(100_000) }) });
    await exchange(conf, base, '/v1/agents/tokens', 415, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{}' });
    await exchange(conf, base, '/v1/agents/tokens', 403, { method: 'POST', headers: { ...jsonType, via: '1.1 proxy' }, body: '{}' });
    const keys = z.object({ keys: z.array(z.object({ machine: z.string(), state: z.string() }).loose()) }).loose().parse(JSON.parse((await exchange(conf, base, '/v1/agents', 200)).body)).keys;
    expect(keys.map((k) => `${k.machine} ${k.state}`).sort()).toEqual(['openapi-machine enrolled', 'solo enrolled', 'twin pending', 'twin pending']);
    const revoke = (body: string, status: number, headers: Record<string, string> = jsonType) =>
      exchange(conf, base, '/v1/agents/revoke', status, { method: 'POST', headers, body });
    await revoke(JSON.stringify({ agent: 'solo' }), 200);
    await revoke(JSON.stringify({ agent: 'twin' }), 409);
    await revoke(JSON.stringify({ agent: 'nobody' }), 404);
    await revoke(JSON.stringify({ name: 'solo' }), 400);
    await revoke(JSON.stringify({ agent: 'x'.repeat(100_000) }), 413);
    await revoke('agent=solo', 415, { 'content-type': 'application/x-www-form-urlencoded' });
    await revoke(JSON.stringify({ agent: 'twin' }), 403, { ...jsonType, 'x-forwarded-proto': 'https' });
    const history = z.object({ changes: z.array(z.object({ action: z.string(), machine: z.string() }).loose()) }).parse(JSON.parse((await exchange(conf, base, '/v1/agents/history', 200)).body));
    expect(history.changes.map((h) => `${h.action} ${h.machine}`)).toEqual(['revoke solo', 'approve solo', 'import openapi-machine']);
    await exchange(conf, base, '/v1/agents/history', 403, { headers: rebound });
    // Rotation: the two keys on one machine name enrolled, so that name is ambiguous.
    await approve(JSON.stringify({ agent: 'twin-1' }), 200);
    await approve(JSON.stringify({ agent: 'twin-2' }), 200);
    const rotate = (body: string, status: number, headers: Record<string, string> = jsonType) =>
      exchange(conf, base, '/v1/agents/rotate', status, { method: 'POST', headers, body });
    await rotate(JSON.stringify({ agent: 'openapi-machine' }), 200);
    await rotate(JSON.stringify({ agent: 'twin' }), 409);
    await rotate(JSON.stringify({ agent: 'solo' }), 404);
    await rotate(JSON.stringify({ name: 'twin-1' }), 400);
    await rotate(JSON.stringify({ agent: 'x'.repeat(100_000) }), 413);
    await rotate('agent=twin-1', 415, { 'content-type': 'application/x-www-form-urlencoded' });
    await rotate(JSON.stringify({ agent: 'twin-1' }), 403, { ...jsonType, 'x-forwarded-proto': 'https' });
    // Renaming: the twins' shared name is ambiguous, a revoked key is no enrolled one, a name with a space no machine name.
    const rename = (body: unknown, status: number, headers: Record<string, string> = jsonType) =>
      exchange(conf, base, '/v1/agents/rename', status, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
    await rename({ agent: 'twin', machine: 'twin-a' }, 409);
    await rename({ agent: 'twin-1', machine: 'twin-a' }, 200);
    await rename({ agent: 'solo', machine: 'solo-a' }, 404);
    await rename({ agent: 'twin-2', machine: 'twin a' }, 400);
    await rename({ agent: 'twin-2', machine: 'x'.repeat(100_000) }, 413);
    await rename('agent=twin-2', 415, { 'content-type': 'application/x-www-form-urlencoded' });
    await rename({ agent: 'twin-2', machine: 'twin-b' }, 403, { ...jsonType, 'x-forwarded-proto': 'https' });

    // Submissions.
    const submitted = await exchange(conf, base, '/v1/matrices', 202, { method: 'POST', headers: { ...jsonType, 'idempotency-key': 'conf-1' }, body: matrixJson() });
    const { id } = Id.parse(JSON.parse(submitted.body));
    await exchange(conf, base, '/v1/matrices', 202, { method: 'POST', headers: { 'content-type': 'application/yaml' }, body: 'name: conf-yaml\nworkload: noop\nrepetitions: auto\nwarmup: 0\nparams:\n  value: 1\n' });
    await exchange(conf, base, '/v1/matrices', 409, { method: 'POST', headers: { ...jsonType, 'idempotency-key': 'conf-1' }, body: matrixJson({ name: 'other' }) });
    await exchange(conf, base, '/v1/matrices', 409, { method: 'POST', headers: jsonType, body: matrixJson({ placement: { labels: ['nobody-has-this'] } }) });
    await exchange(conf, base, '/v1/matrices', 400, { method: 'POST', headers: jsonType, body: matrixJson({ repetitions: -1 }) });
    await exchange(conf, base, '/v1/matrices', 400, { method: 'POST', headers: jsonType, body: '{"name": ' });
    await exchange(conf, base, '/v1/matrices', 413, { method: 'POST', headers: jsonType, body: matrixJson({ description: 'd'.repeat(100_000) }) });
    await exchange(conf, base, '/v1/matrices', 415, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: matrixJson() });
    await exchange(conf, base, '/v1/matrices', 422, { method: 'POST', headers: jsonType, body: matrixJson({ repetitions: 1000, params: { value: [1, 2], sleep: '60s' } }) });
    await exchange(conf, base, '/v1/matrices', 403, { method: 'POST', headers: { ...jsonType, 'x-forwarded-for': '198.51.100.7' }, body: matrixJson() });

    // Reads of matrices.
    await exchange(conf, base, '/v1/matrices', 200);
    await exchange(conf, base, '/v1/matrices?state=running&limit=5', 200);
    await exchange(conf, base, '/v1/matrices?state=bogus', 400);
    await exchange(conf, base, '/v1/matrices', 403, { headers: rebound });
    await exchange(conf, base, `/v1/matrices/${id}`, 200);
    await exchange(conf, base, '/v1/matrices/no-such-matrix', 404);
    await exchange(conf, base, `/v1/matrices/${id}`, 403, { headers: rebound });

    // Uploaded runs (ok, failed, skipped), their results in every format, and compare.
    const laptop = await uploadTo(conf, base, uploadBody('laptop'));
    await uploadTo(conf, base, uploadBody('laptop'), 200);
    const server = await uploadTo(conf, base, uploadBody('server'));
    await exchange(conf, base, `/v1/matrices/${laptop}`, 200);
    await exchange(conf, base, '/v1/results', 400, { method: 'POST', headers: ndjsonType, body: '{"not": "a run"}\n' });
    await exchange(conf, base, '/v1/results', 415, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: uploadBody('x') });
    // Over the upload limit (64 MiB). The whole body is sent: the coordinator reads and drops it
    // before it answers, so that the connection stays usable.
    await exchange(conf, base, '/v1/results', 413, { method: 'POST', headers: ndjsonType, body: 'x'.repeat(64 * 1024 ** 2 + 1) });
    await exchange(conf, base, '/v1/results', 403, { method: 'POST', headers: { ...ndjsonType, via: '1.1 proxy' }, body: uploadBody('x') });
    for (const q of ['', '?histograms=1&limit=2', '?format=csv', '?format=csv&table=runs', '?format=md', '?format=table', '?format=json']) {
      await exchange(conf, base, `/v1/matrices/${laptop}/results${q}`, 200);
    }
    await exchange(conf, base, `/v1/matrices/${laptop}/results?cursor=not-a-cursor`, 400);
    await exchange(conf, base, '/v1/matrices/no-such-matrix/results', 404);
    await exchange(conf, base, `/v1/matrices/${laptop}/results`, 403, { headers: rebound });
    await exchange(conf, base, `/v1/matrices/${laptop}/report.html`, 200);
    await exchange(conf, base, '/v1/matrices/no-such-matrix/report.html', 404);
    await exchange(conf, base, `/v1/matrices/${laptop}/report.html`, 403, { headers: rebound });
    await exchange(conf, base, `/v1/matrices/${laptop}/document`, 200);
    await exchange(conf, base, '/v1/matrices/no-such-matrix/document', 404);
    await exchange(conf, base, `/v1/matrices/${laptop}/document`, 403, { headers: rebound });
    for (const format of ['json', 'csv', 'md', 'table', 'document']) {
      await exchange(conf, base, `/v1/compare?baseline=${laptop}&candidate=${server}&format=${format}`, 200);
    }
    await exchange(conf, base, '/v1/compare', 400);
    await exchange(conf, base, `/v1/compare?baseline=${laptop}&candidate=no-such-matrix`, 404);
    await exchange(conf, base, `/v1/compare?baseline=${laptop}&candidate=${server}`, 403, { headers: rebound });
    for (const format of ['json', 'csv', 'md', 'table', 'document', 'junit', 'bencher', 'benchmark-action-bigger', 'benchmark-action-smaller']) {
      await exchange(conf, base, `/v1/gate?baseline=${laptop}&candidate=${server}&maxRegression=5%25&limit=eventsPerSec%3D10%25&excludeFlagged=true&format=${format}`, 200);
    }
    await exchange(conf, base, `/v1/gate?baseline=${laptop}&candidate=${server}&maxRegression=lots`, 400);
    await exchange(conf, base, `/v1/gate?baseline=${laptop}&candidate=no-such-matrix`, 404);
    await exchange(conf, base, `/v1/gate?baseline=${laptop}&candidate=${server}`, 403, { headers: rebound });
    for (const q of ['', '&metric=eventsPerSec&param=files%3D64&points=true&format=md', '&format=table', '&format=csv', '&format=document', '&limit=1']) {
      await exchange(conf, base, `/v1/history?name=uploaded${q}`, 200);
    }
    await exchange(conf, base, '/v1/history', 400);
    await exchange(conf, base, '/v1/history?name=uploaded', 403, { headers: rebound });

    // Downloads beyond FSBENCH_MAX_DOWNLOADS, while a client that stopped reading holds the only slot.
    storeHeavyMatrix(open.dataDir, 'heavy');
    const stalled = await stalledRead(open.port, '/v1/matrices/heavy/results?histograms=1&limit=400');
    try {
      await exchange(conf, base, `/v1/matrices/${laptop}/results`, 503);
      await exchange(conf, base, `/v1/matrices/${laptop}/report.html`, 503);
      await exchange(conf, base, `/v1/matrices/${laptop}/document`, 503);
    } finally {
      stalled.destroy();
    }

    // Event streams: one open, the next beyond FSBENCH_MAX_STREAMS.
    const streaming = await streamHead(open.url, `/v1/matrices/${id}/events`);
    try {
      expect(conf.problems('GET', `/v1/matrices/${id}/events`, streaming.answer)).toEqual([]);
      expect(streaming.answer.status).toBe(200);
      await exchange(conf, base, `/v1/matrices/${id}/events`, 503);
    } finally {
      streaming.close();
    }
    await exchange(conf, base, '/v1/matrices/no-such-matrix/events', 404);
    await exchange(conf, base, `/v1/matrices/${id}/events`, 403, { headers: rebound });

    // Cancellation.
    await exchange(conf, base, `/v1/matrices/${id}`, 200, { method: 'DELETE' });
    await exchange(conf, base, `/v1/matrices/${id}`, 409, { method: 'DELETE' });
    await exchange(conf, base, '/v1/matrices/no-such-matrix', 404, { method: 'DELETE' });
    await exchange(conf, base, `/v1/matrices/${laptop}`, 403, { method: 'DELETE', headers: { forwarded: 'for=198.51.100.7' } });

    await tokenAnswers(conf);
    await limitAnswers(conf);
    await redisAwayAnswers(conf, cluster);

    const missing = conf.operations().filter((op) => !conf.seen.has(op));
    expect(missing).toEqual([]);
    // Every documented answer was seen too, but a bug's 500, which no request should be able to cause.
    const unseen = conf.answers().filter((a) => {
      const [method = '', template = '', status = ''] = a.split(' ');
      return status !== '500' && !(conf.seen.get(`${method} ${template}`)?.has(Number(status)) ?? false);
    });
    expect(unseen).toEqual([]);
    expect(conf.operations().length).toBeGreaterThanOrEqual(14);
  }, 60_000);
});

/** A GET whose answer the client stops reading after its head: the coordinator's writes fill the socket. */
async function stalledRead(port: number, target: string): Promise<{ destroy: () => void }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: target }, (res) => {
      expect(res.statusCode).toBe(200);
      res.pause();
      resolve({ destroy: () => req.destroy() });
    });
    req.on('error', (err) => {
      if (!req.destroyed) reject(err);
    });
    req.end();
  });
}

/** An event stream's head, with the stream held open until close(). */
async function streamHead(base: string, target: string): Promise<{ answer: Answer; close: () => void }> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, path: target, headers: { accept: 'text/event-stream' } }, (res) => {
      res.once('data', () => {
        resolve({ answer: { status: res.statusCode ?? 0, headers: res.headers, body: '' }, close: () => req.destroy() });
      });
    });
    req.on('error', (err) => {
      if (!req.destroyed) reject(err);
    });
    req.end();
  });
}

/** With FSBENCH_TOKEN and FSBENCH_READ_AUTH=token: 401 without the token and 403 with a wrong one, on every guarded operation. */
async function tokenAnswers(conf: Conformance): Promise<void> {
  const c = await cluster.coordinator({ token: TOKEN, readAuth: 'token' });
  const base = c.url;
  const good = { authorization: `Bearer ${TOKEN}` };
  const wrong = { authorization: 'Bearer wrong-token-0123456789' };
  const { id } = Id.parse(JSON.parse((await exchange(conf, base, '/v1/matrices', 202, { method: 'POST', headers: { ...jsonType, ...good }, body: matrixJson() })).body));
  // No agent on this coordinator's queues: nothing can take a run placed on every host.
  await exchange(conf, base, '/v1/matrices', 409, { method: 'POST', headers: { ...jsonType, ...good }, body: matrixJson({ placement: 'all' }) });
  const reads = ['/openapi.json', '/metrics', '/v1/agents', '/v1/matrices', `/v1/matrices/${id}`, `/v1/matrices/${id}/results`, `/v1/matrices/${id}/report.html`, `/v1/matrices/${id}/document`, `/v1/matrices/${id}/events`, `/v1/compare?baseline=${id}`, `/v1/gate?baseline=${id}`, '/v1/history?name=x', '/v1/agents/history'];
  for (const target of reads) {
    await exchange(conf, base, target, 401);
    await exchange(conf, base, target, 403, { headers: wrong });
  }
  const writes = [['POST', '/v1/matrices', jsonType], ['POST', '/v1/results', ndjsonType], ['DELETE', `/v1/matrices/${id}`, {}], ['POST', '/v1/agents/approve', jsonType], ['POST', '/v1/agents/revoke', jsonType], ['POST', '/v1/agents/rotate', jsonType], ['POST', '/v1/agents/rename', jsonType], ['POST', '/v1/agents/tokens', jsonType]] as const;
  for (const [method, target, type] of writes) {
    await exchange(conf, base, target, 401, { method, headers: type, body: method === 'DELETE' ? undefined : '{}' });
    await exchange(conf, base, target, 403, { method, headers: { ...type, ...wrong }, body: method === 'DELETE' ? undefined : '{}' });
  }
}

/** FSBENCH_WRITE_LIMIT (429 on every write) and FSBENCH_MAX_QUEUED (503 on a submission). */
async function limitAnswers(conf: Conformance): Promise<void> {
  const limited = await cluster.coordinator({ writeLimit: 1 });
  const { id } = Id.parse(JSON.parse((await exchange(conf, limited.url, '/v1/matrices', 202, { method: 'POST', headers: jsonType, body: matrixJson() })).body));
  await exchange(conf, limited.url, '/v1/matrices', 429, { method: 'POST', headers: jsonType, body: matrixJson() });
  await exchange(conf, limited.url, '/v1/results', 429, { method: 'POST', headers: ndjsonType, body: uploadBody('x') });
  await exchange(conf, limited.url, `/v1/matrices/${id}`, 429, { method: 'DELETE' });
  await exchange(conf, limited.url, '/v1/agents/approve', 429, { method: 'POST', headers: jsonType, body: JSON.stringify({ agent: 'x' }) });
  await exchange(conf, limited.url, '/v1/agents/revoke', 429, { method: 'POST', headers: jsonType, body: JSON.stringify({ agent: 'x' }) });
  await exchange(conf, limited.url, '/v1/agents/rotate', 429, { method: 'POST', headers: jsonType, body: JSON.stringify({ agent: 'x' }) });
  await exchange(conf, limited.url, '/v1/agents/rename', 429, { method: 'POST', headers: jsonType, body: JSON.stringify({ agent: 'x', machine: 'y' }) });
  await exchange(conf, limited.url, '/v1/agents/tokens', 429, { method: 'POST', headers: jsonType, body: '{}' });

  // Comparisons, gates and history: past FSBENCH_MAX_READ_RUNS, then past FSBENCH_READ_LIMIT.
  const reads = await cluster.coordinator({ readLimit: 3, maxReadRuns: 1 });
  const sides = await Promise.all(['left', 'right'].map(async (name) => {
    const answer = await exchange(conf, reads.url, '/v1/results', 201, { method: 'POST', headers: ndjsonType, body: uploadBody('lab', name) });
    return Upload.parse(JSON.parse(answer.body)).matrices[0]?.id ?? '';
  }));
  const pair = `baseline=${sides[0] ?? ''}&candidate=${sides[1] ?? ''}`;
  await exchange(conf, reads.url, `/v1/compare?${pair}`, 422);
  await exchange(conf, reads.url, `/v1/gate?${pair}`, 422);
  await exchange(conf, reads.url, '/v1/history?name=left', 200);
  await exchange(conf, reads.url, `/v1/compare?${pair}`, 429);
  await exchange(conf, reads.url, `/v1/gate?${pair}`, 429);
  await exchange(conf, reads.url, '/v1/history?name=left', 429);

  const full = await cluster.coordinator({ maxQueued: 1 });
  await exchange(conf, full.url, '/v1/matrices', 503, { method: 'POST', headers: jsonType, body: matrixJson({ params: { value: [1, 2] } }) });
}

/** A coordinator whose Redis is gone: not ready, no agents to list, a cancellation that cannot reach the queues. */
async function redisAwayAnswers(conf: Conformance, c: Cluster): Promise<void> {
  const redis = await startRedis();
  try {
    const coordinator = await c.coordinator({ redisUrl: redis.url });
    const { id } = Id.parse(JSON.parse((await exchange(conf, coordinator.url, '/v1/matrices', 202, { method: 'POST', headers: jsonType, body: matrixJson() })).body));
    await redis.stopServer();
    try {
      // Each waits for its deadline (10 s for the queues): side by side.
      await Promise.all([
        exchange(conf, coordinator.url, '/readyz', 503),
        exchange(conf, coordinator.url, '/v1/agents', 503),
        exchange(conf, coordinator.url, `/v1/matrices/${id}`, 503, { method: 'DELETE' }),
        exchange(conf, coordinator.url, '/v1/agents/approve', 503, { method: 'POST', headers: jsonType, body: JSON.stringify({ agent: 'someone' }) }),
      ]);
      // Unhealthy too by now, saying why (the state follows the connection's events), yet alive.
      await exchange(conf, coordinator.url, '/healthz', 503);
      await exchange(conf, coordinator.url, '/livez', 200);
    } finally {
      await redis.startServer();
    }
    await coordinator.stop();
  } finally {
    await redis.stop();
  }
}
