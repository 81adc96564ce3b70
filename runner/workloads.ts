/** Which implementation runs each workload of the contract on this host. */
import type { WorkloadName } from '../contract/workloads/index.js';
import { inotifyWorkload } from '../workloads/inotify/index.js';
import { metadataWorkload } from '../workloads/metadata/index.js';
import { noopWorkload } from '../workloads/noop/index.js';
import type { WorkloadRunner } from '../workloads/workload.js';

export const RUNNERS: Readonly<Record<WorkloadName, WorkloadRunner>> = {
  inotify: inotifyWorkload,
  metadata: metadataWorkload,
  noop: noopWorkload,
};
