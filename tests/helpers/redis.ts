/**
 * A real redis-server for one test file: a free port, a temporary directory, append-only
 * persistence (as in production, so a restart keeps the queues), stopped and removed afterwards.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';

export interface TestRedis {
  readonly url: string;
  readonly port: number;
  readonly dir: string;
  /** Shuts it down (SIGTERM: Redis syncs the append-only file) and starts it again on the same port and data. */
  restart(downMs?: number): Promise<void>;
  /** Stops the server, keeping its data. */
  stopServer(): Promise<void>;
  /** Starts it again after stopServer(). */
  startServer(): Promise<void>;
  /** Stops it and deletes its directory. */
  stop(): Promise<void>;
}

/** A port nothing listens on right now (the OS picks it). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      srv.close(() => {
        resolve(port);
      });
    });
  });
}

async function waitForPing(port: number, child: ChildProcess): Promise<void> {
  const client = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => undefined);
  try {
    for (let i = 0; i < 100; i++) {
      if (child.exitCode !== null) throw new Error(`redis-server exited with code ${child.exitCode}`);
      try {
        if (client.status !== 'ready') await client.connect();
        await client.ping();
        return;
      } catch {
        client.disconnect();
        await sleep(50);
      }
    }
    throw new Error(`redis-server on port ${port} did not answer PING`);
  } finally {
    client.disconnect();
  }
}

function launch(port: number, dir: string): ChildProcess {
  return spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--appendonly', 'yes', '--save', '', '--daemonize', 'no', '--loglevel', 'warning'],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
}

async function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  await new Promise<void>((resolve) => {
    child.once('exit', () => {
      resolve();
    });
  });
}

export async function startRedis(): Promise<TestRedis> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'fsbench-redis-'));
  let port = 0;
  let child: ChildProcess | undefined;
  // Another process may take the free port before redis binds it: try a few.
  for (let attempt = 0; attempt < 5 && !child; attempt++) {
    port = await freePort();
    const c = launch(port, dir);
    try {
      await waitForPing(port, c);
      child = c;
    } catch {
      c.kill('SIGKILL');
      await exited(c);
    }
  }
  if (!child) throw new Error('could not start redis-server (is it installed? apt-get install redis-server)');
  let current: ChildProcess = child;

  const stopServer = async () => {
    current.kill('SIGTERM');
    await exited(current);
  };
  const startServer = async () => {
    current = launch(port, dir);
    await waitForPing(port, current);
  };
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    dir,
    stopServer,
    startServer,
    restart: async (downMs = 500) => {
      await stopServer();
      await sleep(downMs);
      await startServer();
    },
    stop: async () => {
      await stopServer();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** A key prefix no other test uses, so tests can share one server without seeing each other's queues. */
export function uniquePrefix(name: string): string {
  return `t${process.pid}-${name.replace(/[^A-Za-z0-9_-]/g, '').slice(0, 12)}-${Math.random().toString(36).slice(2, 8)}`;
}
