/**
 * Work that would stall the event loop (a report of 20,000 runs, a comparison of two large
 * matrices) done on worker threads instead, each with its own connection to the database: on the
 * event loop it would delay every other request, `/livez` included, until a Kubernetes liveness
 * probe restarts the pod, and the collector with it. One mechanism for every such job: the
 * report thread (report-cache.ts) and the read threads (routes/reads.ts) are each a pool of it.
 *
 * A job is a kind and plain arguments; a thread answers with bytes, which it hands over without
 * a copy. The threads load the compiled module that serves the jobs (dist/): from the TypeScript
 * sources (the tests), when a thread cannot start, or for an in-memory database they cannot open,
 * jobs run on the calling thread, as `here` says.
 */
import path from 'node:path';
import { parentPort, Worker } from 'node:worker_threads';
import { z } from 'zod';
import { FsbenchError, isErrorCode, messageOf, toFsbenchError } from '../../contract/errors.js';
import { Store } from '../store/index.js';

/** What a job gives back: its bytes, and how many reports it built (report-cache.ts counts them). */
export interface Done {
  readonly bytes: Uint8Array;
  readonly builds: number;
}

/** The jobs a thread serves, by kind: each from the thread's own connection to the database. */
export type Handlers = Readonly<Record<string, (store: Store, args: unknown) => Done | Promise<Done>>>;

const Job = z.object({ seq: z.number().int(), dataDir: z.string(), kind: z.string(), args: z.unknown() }).strict();
const Answer = z.union([
  z.object({ ready: z.literal(true) }).strict(),
  z.object({ seq: z.number().int(), bytes: z.instanceof(Uint8Array), builds: z.number().int() }).strict(),
  z.object({ seq: z.number().int(), code: z.string(), message: z.string(), issues: z.array(z.object({ path: z.string(), message: z.string() }).strict()) }).strict(),
]);

/** The thread's side: each job run from the thread's own connection to its database, one at a time. */
export function serveJobs(handlers: Handlers): void {
  const port = parentPort;
  if (port === null) throw new Error('serveJobs runs in a worker thread');
  const stores = new Map<string, Store>();
  const run = async (job: z.infer<typeof Job>): Promise<Done> => {
    const handler = Object.hasOwn(handlers, job.kind) ? handlers[job.kind] : undefined;
    if (handler === undefined) throw new FsbenchError('INTERNAL', `no thread job ${job.kind}`);
    let store = stores.get(job.dataDir);
    if (store === undefined) {
      store = Store.open(job.dataDir);
      stores.set(job.dataDir, store);
    }
    return handler(store, job.args);
  };
  port.on('message', (raw: unknown) => {
    const job = Job.parse(raw);
    run(job).then(
      (done) => {
        const { buffer } = done.bytes;
        port.postMessage({ seq: job.seq, bytes: done.bytes, builds: done.builds }, buffer instanceof ArrayBuffer ? [buffer] : []);
      },
      (err: unknown) => {
        const e = toFsbenchError(err);
        port.postMessage({ seq: job.seq, code: e.code, message: e.message, issues: [...e.issues] });
      },
    );
  });
  port.postMessage({ ready: true });
}

export const asBuffer = (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength);

interface Pending {
  readonly resolve: (done: { bytes: Buffer; builds: number }) => void;
  readonly reject: (err: Error) => void;
  /** Runs it on this thread instead, when no thread can start. */
  readonly here: () => void;
}

/** One worker thread and the jobs it was handed that it has not answered yet. */
interface Thread {
  readonly worker: Worker;
  ready: boolean;
  readonly pending: Map<number, Pending>;
  idle: NodeJS.Timeout | undefined;
}

export interface OffThreadOptions {
  /** The compiled module the threads load (its import.meta.url) ... */
  readonly module: string;
  /** ... and its function that serves the jobs (calls serveJobs). */
  readonly serve: string;
  /** Most threads; a job goes to the one with the fewest jobs pending. */
  readonly threads: number;
  /**
   * A thread ends after this long without work: its heap, a few hundred MB after a large job,
   * goes back to the system, for about 0.3 s of start-up the next time.
   */
  readonly idleMs: number;
  /** What the failure of a job that never ran is called, in the error: "building the report". */
  readonly what: string;
}

/** A pool of worker threads for one kind of work, started when first needed and ended when idle. */
export class OffThread {
  private readonly threads: Thread[] = [];
  private unavailable: boolean;
  private seq = 0;

  constructor(private readonly o: OffThreadOptions) {
    this.unavailable = !o.module.endsWith('.js') || o.threads < 1;
  }

  /** Whether jobs run on worker threads (false: on the calling thread, as `here` says). */
  get threaded(): boolean {
    return !this.unavailable;
  }

  /** Runs job `kind` on a thread against `store`'s database, or `here` on this thread when no thread can. */
  run(store: Store, kind: string, args: unknown, here: () => Done | Promise<Done>): Promise<{ bytes: Buffer; builds: number }> {
    const onThisThread = async () => {
      const d = await here();
      return { bytes: asBuffer(d.bytes), builds: d.builds };
    };
    const file = store.file;
    // On this thread, in a turn of the event loop of its own: what arrived meanwhile (a probe, the
    // next request) is answered between two such jobs rather than after all of them.
    if (this.unavailable || file === ':memory:' || file === '') return new Promise((r) => setImmediate(r)).then(onThisThread);
    const seq = ++this.seq;
    return new Promise((resolve, reject) => {
      const fallback = () => {
        onThisThread().then(resolve, (err: unknown) => {
          reject(err instanceof Error ? err : new Error(String(err)));
        });
      };
      const t = this.pick();
      clearTimeout(t.idle);
      t.pending.set(seq, { resolve, reject, here: fallback });
      t.worker.postMessage({ seq, dataDir: path.dirname(file), kind, args });
    });
  }

  /** The thread with the fewest jobs pending, started when there is room for one more and none is free. */
  private pick(): Thread {
    let best: Thread | undefined;
    for (const t of this.threads) if (best === undefined || t.pending.size < best.pending.size) best = t;
    if (best !== undefined && (best.pending.size === 0 || this.threads.length >= this.o.threads)) return best;
    const t = this.start();
    this.threads.push(t);
    return t;
  }

  private start(): Thread {
    const worker = new Worker(`import(${JSON.stringify(this.o.module)}).then((m) => m[${JSON.stringify(this.o.serve)}]());`, { eval: true });
    const t: Thread = { worker, ready: false, pending: new Map(), idle: undefined };
    worker.on('message', (raw: unknown) => {
      this.answer(t, raw);
    });
    worker.on('error', (err) => {
      this.lost(t, err);
    });
    worker.on('exit', () => {
      this.lost(t, new Error('the thread exited'));
    });
    // After the listeners: adding a 'message' listener refs the thread again, and an idle
    // thread must not keep a stopping coordinator alive.
    worker.unref();
    return t;
  }

  private answer(t: Thread, raw: unknown): void {
    const parsed = Answer.safeParse(raw);
    if (!parsed.success) return;
    const a = parsed.data;
    if ('ready' in a) {
      t.ready = true;
      return;
    }
    const p = t.pending.get(a.seq);
    t.pending.delete(a.seq);
    if ('bytes' in a) p?.resolve({ bytes: asBuffer(a.bytes), builds: a.builds });
    else p?.reject(new FsbenchError(isErrorCode(a.code) ? a.code : 'INTERNAL', a.message, a.issues));
    if (t.pending.size === 0) {
      clearTimeout(t.idle);
      t.idle = setTimeout(() => {
        this.remove(t);
        void t.worker.terminate();
      }, this.o.idleMs).unref();
    }
  }

  private remove(t: Thread): boolean {
    const i = this.threads.indexOf(t);
    if (i < 0) return false;
    this.threads.splice(i, 1);
    return true;
  }

  /** A thread failed or ended: what it was running runs here if no thread ever started, else is refused. */
  private lost(t: Thread, err: unknown): void {
    if (!this.remove(t)) return;
    clearTimeout(t.idle);
    if (!t.ready) this.unavailable = true;
    const jobs = [...t.pending.values()];
    t.pending.clear();
    for (const j of jobs) {
      if (this.unavailable) j.here();
      else j.reject(new FsbenchError('INTERNAL', `${this.o.what} failed: ${messageOf(err)}`));
    }
  }
}
