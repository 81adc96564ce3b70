/**
 * What the parent and the Node watcher child (node-watcher.ts) tell each other: the child's
 * configuration on its command line, and its one result over the IPC channel, parsed with these
 * schemas on arrival.
 */
import { z } from 'zod';

export const NodeBackend = z.enum(['parcel', 'chokidar', 'fswatch']);
export type NodeBackend = z.infer<typeof NodeBackend>;

export const ChildConfig = z
  .object({
    backend: NodeBackend,
    root: z.string().startsWith('/').max(4096),
    markerDir: z.string().max(4096),
    /** The fresh memory cgroup to join before watching, and where its kernel memory is read. */
    cgroup: z.string().max(4096).nullable(),
    memcgFile: z.string().max(4096).nullable(),
    memcgKey: z.string().max(64).nullable(),
    /** How long to wait for the marker's event before giving up. */
    timeoutMs: z.number().int().positive(),
  })
  .strict();
export type ChildConfig = z.infer<typeof ChildConfig>;

const bytes = z.number().int().nullable();
export const ChildResult = z
  .object({
    watches: z.number().int().nonnegative(),
    /** The error the library reported when the kernel refused a watch (ENOSPC), or null. */
    limitError: z.string().max(2000).nullable(),
    setupNs: z.number().nonnegative(),
    firstEventNs: z.number().nonnegative().nullable(),
    teardownNs: z.number().nonnegative(),
    markers: z.number().int().nonnegative(),
    beforeMemcg: bytes,
    afterMemcg: bytes,
    beforeSUnreclaim: bytes,
    afterSUnreclaim: bytes,
    beforeRss: z.number().int().nonnegative(),
    afterRss: z.number().int().nonnegative(),
    errors: z.array(z.string().max(2000)).max(20),
  })
  .strict();
export type ChildResult = z.infer<typeof ChildResult>;

export const ChildMessage = z.union([
  z.object({ result: ChildResult }).strict(),
  z.object({ failure: z.string().max(4000) }).strict(),
]);
