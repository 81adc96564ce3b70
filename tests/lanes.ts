/**
 * Which test files may run beside which (vitest.config.ts). The machine's kernel is shared: its
 * inotify and fanotify limits, loop devices, mounts and Docker engine are one for every file, and
 * a run measured while another file loads the CPU is a run on a busy machine. So files fall in
 * lanes by what they touch, not by what they test:
 *
 * - `quick`: nothing but this process and temporary files: no Redis, no Docker, no root, no
 *   kernel limits. `npm run test:quick` runs these alone while developing.
 * - `isolated`: a redis-server of their own on a free port, coordinators and agents in their own
 *   temporary directories, noop or synthetic runs; never a kernel limit, a mount or a container.
 *   They run beside `host`, each lane one file at a time.
 * - `host`: everything else: real inotify, fanotify, watches and metadata runs, limits, loop
 *   devices, containers. One file at a time, and each leaves the limits as it found them
 *   (tests/setup/host-limits.ts), which only holds while no other lane may change them.
 * - `alone`: files whose claim is about measurements on a quiet machine (the gate's verdict on
 *   same code, the interference flags, 1,000 simulated hosts' throughput): after every other
 *   file, with nothing beside them.
 *
 * A file not listed in quick, isolated or alone is `host`: a new file is run the careful way
 * until someone shows it touches nothing shared.
 */

export const QUICK = [
  'change-point',
  'compare',
  'history',
  'install-scripts',
  'layers',
  'matrix',
  'native-build',
  'ran-here',
  'readme',
  'reference',
  'report-notes',
  'slices',
  'stats',
  'stats-inference',
  'stats-metrics',
  'stats-power',
  'stats-robust',
  'summary-reporter',
];

export const ISOLATED = [
  'backup',
  'channel',
  'docs-commands',
  'edge',
  'enrollment',
  'errors',
  'grafana-dashboard',
  'install',
  'liveness',
  'openapi-conformance',
  'operate',
  'readers',
  'redis-cluster',
  'redis-hash-tag',
  'redis-outage',
  'redis-sentinel',
  'redis-settings',
  'replay',
  'report-html',
  'schedule',
  'submissions',
  'watchdog',
];

export const ALONE = ['ci-example', 'gate', 'interference', 'scale'];

export const fileOf = (name: string) => `tests/${name}.test.ts`;
