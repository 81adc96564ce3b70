/**
 * Reads that cost the coordinator seconds of CPU and hundreds of MB (a gate of 2 x 10,000 cells:
 * about 2 s and 215 MiB): comparisons, gates and history (`GET /v1/compare`, `/v1/gate`,
 * `/v1/history`). On the event loop they would delay every other answer, `/livez` too, until a
 * liveness probe restarts the coordinator, and the collector storing results. So each is computed
 * on a worker thread (reports/off-thread.ts, as reports are) from the thread's own connection to
 * the database, FSBENCH_MAX_READS at once; FSBENCH_READ_QUEUE more wait in line
 * (http/slots.ts), and beyond that a read is refused with 429 READS_BUSY and Retry-After. Each
 * client may ask for FSBENCH_READ_LIMIT of them a minute (429 RATE_LIMITED), and one comparison
 * may read at most FSBENCH_MAX_READ_RUNS runs (422 READ_TOO_LARGE, compare.ts).
 *
 * The threads run read-jobs.ts, compiled; from the TypeScript sources (the tests), the reads are
 * computed on the calling thread, within the same limits.
 */
import type { RequestHandler, Response } from 'express';
import { FsbenchError } from '../../contract/errors.js';
import { defaultOf } from '../../settings/index.js';
import { readLimiter, Slots } from '../http/index.js';
import { OffThread, type Done } from '../reports/index.js';
import type { Store } from '../store/index.js';

/** The reads computed off the event loop; read-jobs.ts serves each. */
export type ReadKind = 'compare' | 'gate' | 'history';

/** What a thread is handed: the request's query (checked again there) and the run limit. */
export interface ReadArgs {
  readonly query: unknown;
  readonly maxRuns: number;
}

/** A refused read's Retry-After: about what one comparison of a large matrix takes. */
const READS_RETRY_AFTER_S = 2;

/** A read thread ends after this long without work: its heap goes back to the system, and the next read pays its start and warm-up again (about a second). */
const READ_THREAD_IDLE_MS = 30_000;

export interface ReadSettings {
  /** FSBENCH_MAX_READS; the settings table's default when omitted. */
  readonly maxReads?: number | undefined;
  /** FSBENCH_READ_QUEUE; the settings table's default when omitted. */
  readonly readQueue?: number | undefined;
  /** FSBENCH_READ_LIMIT; reads are not rate-limited when omitted (tests that embed a coordinator), nor when 0. */
  readonly readLimit?: number | undefined;
  /** FSBENCH_MAX_READ_RUNS; the settings table's default when omitted. */
  readonly maxReadRuns?: number | undefined;
  /**
   * Computes the reads on the event loop, within the same limits: only for measuring what the
   * threads spare it (tests/reads.test.ts), deliberately not a setting.
   */
  readonly onEventLoop?: boolean | undefined;
}

/** The costly reads of one coordinator: their rate limit per client, their slots and line, their threads. */
export class Reads {
  /** Put before each costly read's route: one budget per client for all of them. */
  readonly limit: RequestHandler;
  /** FSBENCH_MAX_READ_RUNS. */
  readonly maxRuns: number;
  private readonly slots: Slots;
  private readonly threads: OffThread;

  constructor(
    private readonly store: Store,
    s: ReadSettings = {},
  ) {
    const maxReads = s.maxReads ?? defaultOf('maxReads');
    this.slots = new Slots(maxReads, s.readQueue ?? defaultOf('readQueue'));
    this.limit = readLimiter(s.readLimit ?? 0);
    this.maxRuns = s.maxReadRuns ?? defaultOf('maxReadRuns');
    this.threads = new OffThread({
      // Compiled beside this module: from the TypeScript sources a .ts name, which no thread runs.
      module: import.meta.url.replace(/\/reads\.(js|ts)$/, '/read-jobs.$1'),
      serve: 'serveReads',
      threads: s.onEventLoop === true ? 0 : maxReads,
      idleMs: READ_THREAD_IDLE_MS,
      what: 'the read',
    });
  }

  /**
   * Computes read `kind` of `query` for `res` once it has a slot (waiting in line for one), on a
   * thread, or `here` where no thread can; undefined when the client went away before its turn.
   * Refused with READS_BUSY when the line is full.
   */
  async run(res: Response, kind: ReadKind, query: unknown, here: () => Promise<string> | string): Promise<Buffer | undefined> {
    const turn = this.slots.enter(res);
    if (turn === undefined) {
      const { busy, waiting } = this.slots.counts;
      throw new FsbenchError(
        'READS_BUSY',
        `${busy} comparisons, gates and history reads are being computed and ${waiting} wait for their turn, the most this coordinator takes (FSBENCH_MAX_READS, FSBENCH_READ_QUEUE): try again in ${READS_RETRY_AFTER_S} s`,
        [],
        { 'Retry-After': String(READS_RETRY_AFTER_S) },
      );
    }
    if (!(await turn)) return undefined;
    const args: ReadArgs = { query, maxRuns: this.maxRuns };
    const done = await this.threads.run(this.store, kind, args, async (): Promise<Done> => ({ bytes: new TextEncoder().encode(await here()), builds: 0 }));
    return done.bytes;
  }
}
