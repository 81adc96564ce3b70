/** The cell's parameters, typed: derived from the contract's one declaration, with the forms the code wants. */
import type { z } from 'zod';
import { paramsSchema } from '../../contract/params.js';
import { metadataParams } from '../../contract/workloads/metadata/index.js';

/** A list parameter's comma-joined words, as a list. */
const words = (s: string): string[] => (s === '' ? [] : s.split(','));
/** `default`: mkfs's own choice, null. */
const orNull = (v: number | 'default'): number | null => (v === 'default' ? null : v);

export const MetadataParams = paramsSchema(metadataParams).transform((p) => ({
  ...p,
  inodeSize: orNull(p.inodeSize),
  agCount: orNull(p.agCount),
  mkfsOptions: words(p.mkfsOptions),
  mountOptions: words(p.mountOptions),
}));
export type MetadataParams = z.output<typeof MetadataParams>;
