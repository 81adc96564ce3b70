/**
 * What the semantics workload and its Node watcher child (node-watcher.ts) tell each other: the
 * child's configuration on its command line, and its lines on stdout, parsed with these schemas
 * on arrival.
 */
import { z } from 'zod';
import { CHANGE_KINDS } from '../../contract/workloads/semantics/events.js';

export const NodeBackend = z.enum(['parcel', 'chokidar', 'fswatch']);
export type NodeBackend = z.infer<typeof NodeBackend>;

export const ChildConfig = z.object({ backend: NodeBackend, root: z.string().startsWith('/').max(4096) }).strict();
export type ChildConfig = z.infer<typeof ChildConfig>;

const path = z.string().min(1).max(4096);

/** One line of the child: an event (`t`, process.hrtime.bigint() when the library called back, as decimal text), ready, done, or its failure. */
export const ChildLine = z.union([
  z.object({ k: z.enum(CHANGE_KINDS), p: path, f: path.optional(), t: z.string().regex(/^\d{1,20}$/) }).strict(),
  z.object({ ready: z.literal(true) }).strict(),
  z.object({ done: z.literal(true), errors: z.array(z.string().max(2000)).max(20) }).strict(),
  z.object({ failure: z.string().max(4000) }).strict(),
]);
export type ChildLine = z.infer<typeof ChildLine>;
