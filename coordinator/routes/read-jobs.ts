/**
 * The read threads' side of reads.ts: comparisons, gates and history pages computed from the
 * thread's own connection to the database, with the same functions the routes would run on the
 * event loop, each query checked again by its schema.
 */
import { z } from 'zod';
import { History } from '../history/index.js';
import { serveJobs, type Done } from '../reports/index.js';
import { storeRunSource, type Store } from '../store/index.js';
import { CompareQuery, compareText, GateQuery, gateText, type CompareSources } from './compare.js';
import { HistoryQuery, historyText } from './history.js';

const Args = z.object({ query: z.unknown(), maxRuns: z.number().int().positive() }).strict();

const done = (text: string): Done => ({ bytes: new TextEncoder().encode(text), builds: 0 });

function sources(store: Store, maxRuns: number): CompareSources {
  return { source: storeRunSource(store), history: new History(store), maxRuns };
}

/** A read thread's entry (reads.ts names it). */
export function serveReads(): void {
  serveJobs({
    compare: async (store, raw) => {
      const a = Args.parse(raw);
      return done(await compareText(sources(store, a.maxRuns), CompareQuery.parse(a.query)));
    },
    gate: async (store, raw) => {
      const a = Args.parse(raw);
      return done(await gateText(sources(store, a.maxRuns), GateQuery.parse(a.query)));
    },
    history: (store, raw) => done(historyText(new History(store), HistoryQuery.parse(Args.parse(raw).query))),
  });
}
