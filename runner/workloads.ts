/**
 * The host side of each workload (workloads/<name>/, workloads/workload.ts): how it runs and what
 * a run takes from the host. One line per workload, as in the contract's registry
 * (contract/workloads/index.ts); nothing else names one.
 */
import type { WorkloadName } from '../contract/workloads/index.js';
import { inotifyWorkload } from '../workloads/inotify/index.js';
import { metadataWorkload } from '../workloads/metadata/index.js';
import { noopWorkload } from '../workloads/noop/index.js';
import { semanticsWorkload } from '../workloads/semantics/index.js';
import { watchesWorkload } from '../workloads/watches/index.js';
import type { WorkloadSlice } from '../workloads/workload.js';

export const RUNNERS: Readonly<Record<WorkloadName, WorkloadSlice>> = {
  inotify: inotifyWorkload,
  metadata: metadataWorkload,
  noop: noopWorkload,
  semantics: semanticsWorkload,
  watches: watchesWorkload,
};
