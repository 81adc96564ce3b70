/**
 * The `fanotify` backend: native/semantics.c in its fanotify mode (native/semantics-fanotify.h),
 * one FAN_MARK_FILESYSTEM mark with FAN_REPORT_DFID_NAME_TARGET on the tree's filesystem, read
 * as the inotify reader is (./native-reader.ts).
 *
 * Its failures to start are told apart: no CAP_SYS_ADMIN is PRIVILEGE_MISSING (the run needs
 * root), a kernel or filesystem that refuses the group or the mark (no file handles, no fsid)
 * skips the run naming the filesystem, as the inotify workload's fanotify cells do, since the
 * machine cannot measure the cell at all.
 */
import { FsbenchError, type ErrorCode } from '../../contract/errors.js';
import { filesystemType } from '../../host/kernel.js';
import { WorkloadSkipped } from '../workload.js';
import { nativeReaderAdapter } from './native-reader.js';

/** The reader's error codes that are fsbench's own; any other is the backend failing. */
const READER_CODES: Readonly<Record<string, ErrorCode>> = {
  PRIVILEGE_MISSING: 'PRIVILEGE_MISSING',
  LIMIT_REACHED: 'LIMIT_REACHED',
};

/** The error for the reader's error line: UNSUPPORTED (the kernel refused) skips the run. */
function readerError(root: string, code: string, message: string): FsbenchError {
  if (code === 'UNSUPPORTED') {
    return new WorkloadSkipped(`fanotify cannot watch ${root} on this ${filesystemType(root) ?? 'unknown'} filesystem with a filesystem mark reporting file handles: ${message}`);
  }
  const known = READER_CODES[code];
  return new FsbenchError(known ?? 'BACKEND_FAILED', known === undefined ? `the fanotify reader failed: ${code}: ${message}` : message);
}

export const fanotifyAdapter = nativeReaderAdapter({ mode: 'fanotify', errorOf: readerError });
