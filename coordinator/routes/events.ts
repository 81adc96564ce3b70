/**
 * Server-sent progress events for one matrix. Each event is a complete snapshot of the counts
 * (never a delta), so a client that misses some, or reconnects, is right again at the next one.
 * Events: `progress` (on connect and after every stored batch), then `end` with the final state.
 * At most FSBENCH_MAX_STREAMS streams are open at once; more are refused with 503 and Retry-After.
 */
import type { RequestHandler, Response } from 'express';
import { FsbenchError } from '../../contract/errors.js';
import { defaultOf } from '../../settings/index.js';
import { Slots } from '../http/index.js';
import { isFinal, progressOf, type ProgressHub } from '../matrices/index.js';
import type { MatrixRecord, Store } from '../store/index.js';

const KEEPALIVE_MS = 15_000;
/** A stream's slot frees only when a stream ends, which may take a matrix's whole run: ask for a while later. */
const STREAM_RETRY_AFTER_S = 30;

function send(res: Response, event: string, data: unknown, id?: number): void {
  res.write(`${id === undefined ? '' : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
}

export function eventsHandler(store: Store, hub: ProgressHub, maxStreams = defaultOf('maxStreams')): RequestHandler<{ id: string }> {
  const slots = new Slots(maxStreams);
  return (req, res) => {
    const first = store.getMatrix(req.params.id);
    if (!first) throw new FsbenchError('NOT_FOUND', `no matrix ${req.params.id}`);
    if (!slots.take(res)) {
      throw new FsbenchError(
        'UNAVAILABLE',
        `${slots.capacity} event streams are open, the most this coordinator serves at once (FSBENCH_MAX_STREAMS): try again in ${STREAM_RETRY_AFTER_S} s, or poll GET /v1/matrices/${first.id}`,
        [],
        { 'Retry-After': String(STREAM_RETRY_AFTER_S) },
      );
    }
    res.status(200).set({
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-cache, no-transform',
      Connection: 'keep-alive',
      'X-Accel-Buffering': 'no',
    });
    res.flushHeaders();
    let closed = false;
    const keepalive = setInterval(() => res.write(': keepalive\n\n'), KEEPALIVE_MS);
    const close = () => {
      if (closed) return;
      closed = true;
      clearInterval(keepalive);
      unsubscribe();
      res.end();
    };
    const emit = (m: MatrixRecord) => {
      if (closed) return;
      send(res, 'progress', progressOf(m), m.storedRuns);
      if (isFinal(m.state)) {
        send(res, 'end', progressOf(m));
        close();
      }
    };
    const unsubscribe = hub.subscribe(first.id, emit);
    req.on('close', close);
    emit(first);
  };
}
