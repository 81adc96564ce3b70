/**
 * The agent's watchdog on progress (issue 21, item 4), with real processes and a real
 * redis-server. The agent reaches Redis through a TCP relay in this test that can make chosen
 * connections silent (what it reads or writes vanishes, nothing is closed): the state BullMQ's
 * failover bugs leave a worker in, a blocking read that never returns. CLIENT KILL of the
 * blocking connections and a Redis frozen longer than the drain delay are tried too: BullMQ
 * recovers from those by itself here, and the watchdog must then stay quiet.
 */
import { readFile } from 'node:fs/promises';
import { createServer, connect, type Server, type Socket } from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CoordinatorClient } from '../cli/client.js';
import { JOB_KEY_FILE, JOB_PUBLIC_KEY_FILE, writeNewJobKey } from '../queue/signing.js';
import { startRedis, uniquePrefix, type TestRedis } from './fixtures/redis-server.js';
import { preEnroll } from './helpers/enroll.js';
import { freshCli } from './helpers/local.js';
import { useCliProcesses, type Proc } from './helpers/processes.js';

/** A TCP relay to Redis whose connections can be made silent one by one. */
class Relay {
  private readonly pairs: { client: Socket; upstream: Socket; silent: boolean }[] = [];
  private server: Server | undefined;
  port = 0;

  async start(target: number): Promise<void> {
    const server = createServer((client) => {
      const upstream = connect(target, '127.0.0.1');
      const pair = { client, upstream, silent: false };
      this.pairs.push(pair);
      client.on('data', (d) => {
        if (!pair.silent) upstream.write(d);
      });
      upstream.on('data', (d) => {
        if (!pair.silent) client.write(d);
      });
      const end = () => {
        client.destroy();
        upstream.destroy();
      };
      for (const s of [client, upstream]) s.on('close', end).on('error', end);
    });
    this.server = server;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const a = server.address();
    this.port = typeof a === 'object' && a !== null ? a.port : 0;
  }

  /** Makes the connections Redis sees coming from these local ports silent; how many it found. */
  silence(upstreamPorts: ReadonlySet<number>): number {
    let n = 0;
    for (const p of this.pairs) {
      if (p.upstream.localPort !== undefined && upstreamPorts.has(p.upstream.localPort)) {
        p.silent = true;
        n++;
      }
    }
    return n;
  }

  /** Makes every connection open now silent; how many. */
  silenceAll(): number {
    for (const p of this.pairs) p.silent = true;
    return this.pairs.length;
  }

  async stop(): Promise<void> {
    for (const p of this.pairs) {
      p.client.destroy();
      p.upstream.destroy();
    }
    await new Promise<void>((resolve) => {
      if (this.server) {
        this.server.close(() => {
          resolve();
        });
      } else resolve();
    });
  }
}

let redis: TestRedis;
const cleanups: (() => Promise<void>)[] = [];

const { fsbench, tempDir } = useCliProcesses();

beforeAll(async () => {
  await freshCli();
  redis = await startRedis();
}, 180_000);
afterAll(async () => {
  await redis.stop();
});
afterEach(async () => {
  redis.resume();
  for (const c of cleanups.splice(0).reverse()) await c();
});

interface Stack {
  readonly agent: Proc;
  readonly client: CoordinatorClient;
  readonly admin: Redis;
}

/**
 * A coordinator and an agent, one of them (`via`, the agent unless said) reaching Redis through
 * `relay` (stall timeout 2 s: the agent watchdog's bound is 10 s, as is the collector's).
 */
async function stack(name: string, relay: Relay, via: 'agent' | 'coordinator' = 'agent'): Promise<Stack & { coordinator: Proc }> {
  const dataDir = await tempDir('data');
  await writeNewJobKey(dataDir);
  const scratch = await tempDir('scratch');
  const prefix = uniquePrefix(name);
  const env = {
    FSBENCH_JOB_KEY: path.join(dataDir, JOB_PUBLIC_KEY_FILE),
    REDIS_URL: redis.url,
    FSBENCH_QUEUE_PREFIX: prefix,
    FSBENCH_DATA_DIR: dataDir,
    FSBENCH_PORT: '0',
    FSBENCH_HEARTBEAT: '200ms',
    FSBENCH_STALL_TIMEOUT: '2s',
    FSBENCH_SCRATCH: scratch,
  };
  const relayed = `redis://127.0.0.1:${String(relay.port)}`;
  const coordinator = fsbench(['coordinator'], via === 'coordinator' ? { ...env, REDIS_URL: relayed } : env);
  const url = (await coordinator.waitFor(/listening on (http:\/\/[^\s;"]+)/))[1] ?? '';
  const stateDir = path.join(scratch, 'state');
  await preEnroll(redis.url, prefix, await readFile(path.join(dataDir, JOB_KEY_FILE), 'utf8'), stateDir, 'host-1', 'm1');
  const agent = fsbench(['agent'], { ...env, ...(via === 'agent' ? { REDIS_URL: relayed } : {}), FSBENCH_MACHINE: 'm1', FSBENCH_HOST_ID: 'host-1', FSBENCH_STATE_DIR: stateDir });
  await agent.waitFor(/waiting for runs/);
  const admin = new Redis(redis.url);
  cleanups.push(() => {
    admin.disconnect();
    return Promise.resolve();
  });
  return { agent, coordinator, client: new CoordinatorClient(url), admin };
}

/** The client ports (as Redis sees them) of the connections whose last command is `cmd`: blocking reads. */
async function portsBlockingIn(admin: Redis, cmd: string): Promise<Set<number>> {
  const ports = new Set<number>();
  const re = new RegExp(`\\baddr=127\\.0\\.0\\.1:(\\d+)\\b.*\\bcmd=${cmd}\\b`);
  for (const line of String(await admin.client('LIST')).split('\n')) {
    const m = re.exec(line);
    if (m) ports.add(Number(m[1]));
  }
  return ports;
}

/**
 * The `n` connections blocking in `cmd` (an agent's two workers each block in BZPOPMIN, the
 * collector in XREAD), waiting up to 5 s for them; fewer is a failure, so that a fault aimed at
 * them is never aimed at nothing.
 */
async function blockingPorts(admin: Redis, cmd = 'bzpopmin', n = 2): Promise<Set<number>> {
  let ports = new Set<number>();
  for (let i = 0; i < 50 && ports.size < n; i++) {
    ports = await portsBlockingIn(admin, cmd);
    if (ports.size < n) await sleep(100);
  }
  expect(ports.size, `connections blocking in ${cmd}`).toBe(n);
  return ports;
}

/** Submits `runs` no-op runs and waits for the matrix; how long it took. */
async function matrixTime(c: CoordinatorClient, name: string, runs: number, ms = 60_000): Promise<number> {
  const t = Date.now();
  const { id } = (await c.json('POST', '/v1/matrices', { name, workload: 'noop', repetitions: 1, warmup: 0, params: { value: Array.from({ length: runs }, (_, i) => i), sleep: '10ms' } })) as { id: string };
  for (;;) {
    const m = (await c.json('GET', `/v1/matrices/${id}`)) as { state: string; progress: { stored: number } };
    if (m.state === 'done') {
      expect(m.progress.stored).toBe(runs);
      return Date.now() - t;
    }
    if (Date.now() - t > ms) throw new Error(`matrix ${name} not done after ${ms} ms: ${JSON.stringify(m)}`);
    await sleep(100);
  }
}

const restarts = (p: Proc) => p.output.split('\n').filter((l) => l.includes('"event":"agent.watchdog-restart"'));

async function relayTo(): Promise<Relay> {
  const relay = new Relay();
  await relay.start(redis.port);
  cleanups.push(() => relay.stop());
  return relay;
}

describe("an agent's watchdog on progress", () => {
  it('re-makes the connections and workers when all of them fall silent (packets dropped, nothing closed), logs why, counts it in /metrics', async () => {
    const relay = await relayTo();
    const s = await stack('silent', relay);
    await matrixTime(s.client, 'before', 3);
    expect(relay.silenceAll()).toBeGreaterThanOrEqual(3);
    const took = await matrixTime(s.client, 'silent', 5);
    const lines = restarts(s.agent);
    console.log(`all agent connections silent: 5 runs done after ${took} ms, ${lines.length} watchdog restart(s): ${lines[0]?.slice(0, 400) ?? ''}`);
    expect(lines.length).toBeGreaterThanOrEqual(1);
    // PING unanswered 5 s (lost), then the bound (10 s) and a check interval.
    expect(took).toBeGreaterThanOrEqual(10_000);
    expect(took).toBeLessThan(30_000);
    expect(lines[0]).toMatch(/Redis answered nothing for 1\d s on connections still open: recreating the workers and their connections/);
    const metrics = await s.client.text('/metrics');
    expect(metrics).toMatch(/^fsbench_agent_worker_restarts [1-9]\d*$/m);
  }, 90_000);

  it('stays quiet when an agent idle past its bound takes runs late: frozen while they were queued, it takes them on waking, its workers kept', async () => {
    const relay = await relayTo();
    const s = await stack('late', relay);
    await matrixTime(s.client, 'before', 3);
    // Idle past the bound (10 s), as an agent between two matrices is.
    await sleep(11_000);
    const { pid } = s.agent.child;
    if (pid === undefined) throw new Error('the agent has no pid');
    // Stopped, as a starved or suspended process is, past a check interval (1 s) with runs waiting:
    // on waking its watchdog's check and its workers' wake-up come at once.
    process.kill(pid, 'SIGSTOP');
    const t = Date.now();
    let id: string;
    try {
      ({ id } = (await s.client.json('POST', '/v1/matrices', { name: 'late', workload: 'noop', repetitions: 1, warmup: 0, params: { value: [1, 2, 3] } })) as { id: string });
      await sleep(2_500);
      const waiting = await s.admin.keys('*:wait');
      // The runs did wait, on the host's queue, while the agent was stopped.
      expect(await Promise.all(waiting.map((k) => s.admin.llen(k)))).toContain(3);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    let m: { state: string; progress: { stored: number } } | undefined;
    while (m?.state !== 'done' && Date.now() - t < 30_000) {
      m = (await s.client.json('GET', `/v1/matrices/${id}`)) as typeof m;
      await sleep(100);
    }
    console.log(`runs queued to a stopped agent idle past its bound: stored ${Date.now() - t} ms after, 2.5 s of it stopped; watchdog restarts: ${restarts(s.agent).length}`);
    expect(m?.progress.stored).toBe(3);
    expect(restarts(s.agent)).toEqual([]);
  }, 90_000);

  it('stays quiet where BullMQ recovers by itself: CLIENT KILL of the blocking connections, Redis frozen longer than the drain delay', async () => {
    const relay = await relayTo();
    const s = await stack('quiet', relay);
    await matrixTime(s.client, 'before', 3);
    // Both faults are shown to have happened: the killed connections gone from Redis, and Redis
    // answering nothing while frozen.
    const killed = await blockingPorts(s.admin);
    for (const port of killed) expect(await s.admin.client('KILL', `127.0.0.1:${port}`)).toBe('OK');
    const left = String(await s.admin.client('LIST'));
    for (const port of killed) expect(left).not.toContain(`addr=127.0.0.1:${port} `);
    const afterKill = await matrixTime(s.client, 'killed', 5);
    redis.pause();
    const pinged = s.admin.ping();
    expect(await Promise.race([pinged, sleep(1_000, 'no answer')])).toBe('no answer');
    await sleep(7_000);
    redis.resume();
    expect(await pinged).toBe('PONG');
    const afterFreeze = await matrixTime(s.client, 'frozen', 5);
    console.log(`CLIENT KILL: 5 runs after ${afterKill} ms; frozen 8 s: 5 runs after ${afterFreeze} ms; watchdog restarts: ${restarts(s.agent).length}`);
    expect(afterKill).toBeLessThan(5_000);
    expect(afterFreeze).toBeLessThan(8_000);
    expect(restarts(s.agent)).toEqual([]);
  }, 90_000);
});

describe("the coordinator's watchdog on its collector", () => {
  it('re-makes the reading connection when its blocking read falls silent while Redis answers, logs why, counts it in /metrics', async () => {
    const relay = await relayTo();
    const s = await stack('collector', relay, 'coordinator');
    await matrixTime(s.client, 'before', 3);
    // The collector's reader: the one connection of the coordinator's that blocks in XREAD.
    const readers = await blockingPorts(s.admin, 'xread', 1);
    expect(relay.silence(readers)).toBe(1);
    const took = await matrixTime(s.client, 'silent', 5);
    const lines = s.coordinator.output.split('\n').filter((l) => l.includes('re-making its connection'));
    console.log(`collector's reader silent: 5 runs stored after ${String(took)} ms, ${String(lines.length)} restart(s): ${lines[0]?.slice(0, 300) ?? ''}`);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/collector: no read of the results finished for 1\d s while Redis answers: re-making its connection/);
    // The runs were made at once; storing them waited for the bound (10 s).
    expect(took).toBeGreaterThanOrEqual(9_000);
    expect(took).toBeLessThan(30_000);
    expect(await s.client.text('/metrics')).toMatch(/^fsbench_collector_restarts_total 1$/m);
  }, 90_000);
});

describe("the coordinator's main Redis connection", () => {
  it('is re-made when it falls silent (packets dropped, nothing closed): /healthz says why meanwhile, then runs are queued and stored again, counted in /metrics', async () => {
    const relay = await relayTo();
    const s = await stack('main', relay, 'coordinator');
    await matrixTime(s.client, 'before', 3);
    // The coordinator's connections carry its name; the collector's reader is the one blocking in XREAD.
    const ports = new Set<number>();
    for (const line of String(await s.admin.client('LIST')).split('\n')) {
      const m = /\baddr=127\.0\.0\.1:(\d+)\b.*\bname=fsbench-coordinator\b.*\bcmd=(\S+)/.exec(line);
      if (m && m[2] !== 'xread') ports.add(Number(m[1]));
    }
    expect(ports.size).toBe(1);
    const silencedAt = Date.now();
    expect(relay.silence(ports)).toBe(1);
    let unhealthy: { status: number; body: string } | undefined;
    for (let i = 0; i < 200 && unhealthy === undefined; i++) {
      const res = await fetch(new URL('/healthz', s.client.baseUrl));
      if (res.status === 503) unhealthy = { status: res.status, body: await res.text() };
      else await sleep(100);
    }
    console.log(`main connection silent: /healthz ${String(unhealthy?.status)} after ${String(Date.now() - silencedAt)} ms: ${unhealthy?.body ?? ''}`);
    expect(unhealthy?.body).toMatch(/no answer to PING/);
    const line = await s.coordinator.waitFor(/"event":"redis\.silent-reconnect"[^\n]*/, 30_000);
    const reconnectedAfter = Date.now() - silencedAt;
    const took = await matrixTime(s.client, 'after', 5);
    console.log(`re-made ${String(reconnectedAfter)} ms after the silence began; 5 runs then stored in ${String(took)} ms: ${line[0].slice(0, 300)}`);
    expect(reconnectedAfter).toBeGreaterThanOrEqual(9_000);
    expect(reconnectedAfter).toBeLessThan(30_000);
    expect((await fetch(new URL('/healthz', s.client.baseUrl))).status).toBe(200);
    expect(await s.client.text('/metrics')).toMatch(/^fsbench_redis_silent_reconnects_total 1$/m);
    // The collector's reader was never silenced: its watchdog had nothing to do.
    expect(await s.client.text('/metrics')).toMatch(/^fsbench_collector_restarts_total 0$/m);
  }, 90_000);
});
