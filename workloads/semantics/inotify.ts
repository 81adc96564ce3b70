/**
 * The `inotify` backend: native/semantics.c in its inotify mode, fsbench's own recursive inotify
 * reader (a watch per directory; a new directory is watched, then listed). Any error it reports
 * is the backend failing.
 */
import { FsbenchError } from '../../contract/errors.js';
import { nativeReaderAdapter } from './native-reader.js';

export const inotifyAdapter = nativeReaderAdapter({
  mode: 'inotify',
  errorOf: (root, code, message) => new FsbenchError('BACKEND_FAILED', `the inotify reader failed on ${root}: ${code}: ${message}`),
});
