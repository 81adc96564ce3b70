/** The cell's parameters, parsed from the job's generic values into their types. */
import { z } from 'zod';
import { FSYNC_POLICIES, METADATA_FILESYSTEMS } from '../../contract/workloads/metadata/index.js';

const list = z.string().transform((s) => (s === '' ? [] : s.split(',')));
const orDefault = z.union([z.number().int().positive(), z.literal('default')]).transform((v) => (v === 'default' ? null : v));

export const MetadataParams = z.object({
  fs: z.enum(METADATA_FILESYSTEMS),
  fsSize: z.number().int().positive(),
  /** null: mkfs's own default. */
  inodeSize: orDefault,
  agCount: orDefault,
  mkfsOptions: list,
  mountOptions: list,
  target: z.string(),
  dirs: z.number().int().positive(),
  filesPerDir: z.number().int().positive(),
  fileSize: z.number().int().nonnegative(),
  fsync: z.enum(FSYNC_POLICIES),
  cache: z.enum(['cold', 'warm']),
});
export type MetadataParams = z.infer<typeof MetadataParams>;
