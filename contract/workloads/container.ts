/**
 * Container parameters, shared by the workloads that touch the filesystem: with
 * `container.storage` other than `none`, the agent runs each run in a fresh container of that
 * shape (through the Docker engine) instead of in its own process, to measure what the
 * container setup changes.
 */
import type { ParamSpecs, ParamValue } from '../params.js';

export const CONTAINER_STORAGE = ['none', 'overlay', 'volume', 'tmpfs', 'bind'] as const;

export const containerParams = {
  'container.storage': {
    kind: 'enum',
    values: CONTAINER_STORAGE,
    default: 'none',
    doc:
      '`none` runs in the agent itself. Otherwise each run gets a fresh container whose work directory is on ' +
      '`overlay` (the container\'s own root filesystem), a named `volume`, a `tmpfs`, or a `bind` mount of a host ' +
      'directory under the scratch directory; the container is removed after the run, also after a failure.',
  },
  'container.cpus': {
    kind: 'integer',
    min: 0,
    max: 1024,
    default: 0,
    doc: 'CPU limit of the run\'s container (Docker NanoCpus); 0 means no limit.',
  },
  'container.memory': {
    kind: 'size',
    min: 0,
    max: 1024 ** 4,
    default: 0,
    check: (v: ParamValue) => (typeof v === 'number' && v !== 0 && v < 64 * 1024 ** 2 ? 'must be 0 (no limit) or at least 64MiB' : undefined),
    doc: 'Memory limit of the run\'s container; 0 means no limit.',
  },
} as const satisfies ParamSpecs;

export function containerSkipReason(p: Readonly<Record<string, ParamValue>>): string | undefined {
  if (p['container.storage'] === 'none' && (p['container.cpus'] !== 0 || p['container.memory'] !== 0)) {
    return 'container.cpus and container.memory apply to a run container: set container.storage too';
  }
  return undefined;
}
