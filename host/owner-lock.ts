/**
 * Who is still alive among a journal's writers, by a lock the kernel keeps: each open Journal
 * holds an exclusive flock on a file of its own in `<journal>/owners/`, and names that file in
 * every entry it writes. Whoever can take that lock knows the writer is gone, whatever Redis,
 * pids or pid namespaces say: the kernel drops a flock only when every process holding the file
 * open has exited. flock works across containers that share the journal's volume (one kernel),
 * where pids do not. A second lock, `<journal>/recovery.lock`, lets one recovery at a time undo
 * entries.
 *
 * Node has no flock(2): a small native holder (`hostfs hold`/`serial`, native/hostfs.c) takes a lock and
 * keeps it while its stdin stays open. It dies with its parent (PR_SET_PDEATHSIG, and the pipe's
 * EOF), so a SIGKILLed agent's lock is free at once, and it never keeps Node alive (unref'd).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { Socket } from 'node:net';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { z } from 'zod';
import { FsbenchError } from '../contract/errors.js';
import { runHostfs } from './hostfs.js';
import { nativeProgram } from './native.js';

/** The directory of owner lock files, inside the (verified) journal directory. */
export const OWNERS_DIR = 'owners';

/** An owner's id: what its entries name, and its lock file's name without `.lock`. */
export const OwnerId = z.uuid();

const Ready = z.object({ ready: z.literal(true) }).strict();
const HostfsError = z.object({ error: z.object({ code: z.string(), message: z.string() }) });
const Held = z.object({ held: z.array(z.boolean()) }).strict();

const READY_TIMEOUT_MS = 10_000;
/** The recovery lock's file in the journal directory, `recovery.lock`. */
export const RECOVERY_LOCK = 'recovery';
/**
 * How long a recovery waits for another one to finish: undoing a few mounts, loop devices and
 * limits takes a second or two; far longer means the other is stuck, and this one says so.
 */
const RECOVERY_WAIT_MS = 60_000;

/** The first line the holder prints: ready, or why it is not. */
async function readyOf(child: ChildProcess, timeoutMs: number): Promise<void> {
  const { stdout } = child;
  if (stdout === null) throw new FsbenchError('INTERNAL', 'the lock holder has no stdout');
  const lines = createInterface({ input: stdout });
  let timer: NodeJS.Timeout | undefined;
  try {
    const first = await Promise.race([
      new Promise<string | null>((resolve) => {
        lines.once('line', resolve);
        lines.once('close', () => {
          resolve(null);
        });
      }),
      new Promise<never>((_, reject) => {
        child.once('error', reject);
      }),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          reject(new FsbenchError('INTERNAL', `the lock holder did not get its lock within ${timeoutMs / 1000} s`));
        }, timeoutMs);
      }),
    ]);
    let json: unknown;
    try {
      json = JSON.parse(first ?? '');
    } catch {
      json = undefined;
    }
    if (Ready.safeParse(json).success) return;
    const failed = HostfsError.safeParse(json);
    throw new FsbenchError('INTERNAL', `cannot hold a lock of the journal: ${failed.success ? failed.data.error.message : `the holder said ${JSON.stringify(first)}`}`);
  } finally {
    clearTimeout(timer);
    lines.close();
  }
}

/**
 * A native holder (`hostfs hold` or `hostfs serial`) that has its lock: held until `release()`
 * or this process's death. It never keeps this process alive.
 */
class Holder {
  private released: Promise<void> | undefined;

  private constructor(private readonly child: ChildProcess) {}

  static async spawn(args: readonly string[], timeoutMs: number): Promise<Holder> {
    const child = spawn(nativeProgram('hostfs'), args, { stdio: ['pipe', 'pipe', 'ignore'] });
    try {
      await readyOf(child, timeoutMs);
    } catch (err) {
      child.kill('SIGKILL');
      throw err;
    }
    // Held: from here on the holder says nothing, and must not keep this process alive.
    child.stdout.destroy();
    if (child.stdin instanceof Socket) child.stdin.unref();
    child.on('error', () => undefined);
    child.unref();
    return new Holder(child);
  }

  release(): Promise<void> {
    this.released ??= new Promise<void>((resolve) => {
      if (this.child.exitCode !== null || this.child.signalCode !== null) {
        resolve();
        return;
      }
      const timer = setTimeout(() => {
        this.child.kill('SIGKILL');
      }, 5_000);
      this.child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      this.child.stdin?.end();
    });
    return this.released;
  }
}

/** This process's lock on its entries: held from `hold()` until `release()` (or the process's death). */
export class OwnerLock {
  private constructor(
    /** What this writer's entries name as their owner. */
    readonly id: string,
    private readonly holder: Holder,
  ) {}

  /** Takes a new owner lock in `<journalDir>/owners/` (the journal directory is verified already). */
  static async hold(journalDir: string): Promise<OwnerLock> {
    const dir = path.join(journalDir, OWNERS_DIR);
    await fs.mkdir(dir, { mode: 0o700 }).catch((err: unknown) => {
      if (!(err instanceof Error && 'code' in err && err.code === 'EEXIST')) throw err;
    });
    const id = randomUUID();
    return new OwnerLock(id, await Holder.spawn(['hold', dir, id], READY_TIMEOUT_MS));
  }

  /** Lets go of the lock (the holder removes its file first): the entries left are a dead run's. */
  release(): Promise<void> {
    return this.holder.release();
  }
}

/**
 * The lock that lets one recovery at a time undo a journal's entries, across agents and
 * containers sharing the journal: two recoveries that both read an entry would otherwise both
 * undo it, and the later one could undo a change a new run has made since (a loop device
 * attached again under the same name, a limit set again). Waits while another recovery holds it,
 * at most `RECOVERY_WAIT_MS`; release it when done.
 */
export async function takeRecoveryLock(journalDir: string): Promise<{ release(): Promise<void> }> {
  return Holder.spawn(['serial', journalDir, RECOVERY_LOCK], RECOVERY_WAIT_MS);
}

/**
 * Which of `ids` still have a live holder (true) in `<journalDir>/owners/`. A lock file that is
 * missing, or whose lock can be taken, belongs to a writer that is gone.
 */
export async function ownersHeld(journalDir: string, ids: readonly string[]): Promise<Map<string, boolean>> {
  const held = new Map<string, boolean>();
  const unique = [...new Set(ids)];
  // A few hundred ids per call keep the command line far below ARG_MAX.
  for (let i = 0; i < unique.length; i += 256) {
    const batch = unique.slice(i, i + 256);
    const answer = await runHostfs(['held', path.join(journalDir, OWNERS_DIR), ...batch], Held);
    if (answer.held.length !== batch.length) throw new FsbenchError('INTERNAL', `hostfs held answered ${answer.held.length} of ${batch.length} owners`);
    batch.forEach((id, j) => held.set(id, answer.held[j] === true));
  }
  return held;
}

/**
 * Removes the lock files of owners that are gone (killed before they could remove their own).
 * Safe at any time: a lock file appears only once locked, and a gone owner never comes back;
 * entries naming a missing lock file are a gone owner's.
 */
export async function reapOwnerLocks(journalDir: string): Promise<void> {
  const dir = path.join(journalDir, OWNERS_DIR);
  const ids = (await fs.readdir(dir).catch(() => [] as string[]))
    .filter((n) => n.endsWith('.lock'))
    .map((n) => n.slice(0, -'.lock'.length))
    .filter((id) => OwnerId.safeParse(id).success);
  if (ids.length === 0) return;
  for (const [id, alive] of await ownersHeld(journalDir, ids)) {
    if (!alive) await fs.rm(path.join(dir, `${id}.lock`), { force: true });
  }
}
