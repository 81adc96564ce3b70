/**
 * Which test files may run at the same time (`npm test` runs them in lanes, scripts/test-lanes.ts;
 * `npm run test:serial` runs every file one at a time).
 *
 * Most files change something of the whole machine: the kernel's inotify limits, loop devices and
 * mounts, the Docker engine's containers, or a measurement that needs the CPUs. Those run in the
 * host lane, one at a time, as they always did. A file that starts everything it uses itself (its
 * own redis-server on a free port, its own coordinator and agents running `noop`, its own
 * temporary directories) and changes nothing host-wide runs in the beside lane, one at a time
 * too, next to the host lane. The files that measure and judge the machine's quiet (a gate that
 * must pass the same code, the interference notes of a quiet run), and the scale test's load, run
 * alone, after both.
 *
 * A file not listed here is in the host lane: the safe default. tests/lanes.test.ts checks that
 * the beside lane's files show none of the signs of host-wide state.
 */
import { QUICK } from './quick.js';

export const LANES = ['host', 'beside', 'alone'] as const;
export type Lane = (typeof LANES)[number];

/** Files beside the host lane: the quick ones, and those with nothing but their own Redis and noop runs. */
export const BESIDE: readonly string[] = [
  ...QUICK,
  'approval',
  'backup',
  'channel',
  'docs-commands',
  'edge',
  'enrollment',
  'errors',
  'forgery',
  'grafana-dashboard',
  'install',
  'job-binding',
  'kubernetes',
  'liveness',
  'machine-binding',
  'machine-name',
  'openapi-conformance',
  'reads',
  'redis-acl',
  'redis-cluster',
  'redis-hash-tag',
  'redis-outage',
  'redis-sentinel',
  'redis-settings',
  'rename',
  'replay',
  'report-cache',
  'revocation',
  'rotation',
  'schedule',
  'token-binding',
  'token-secrets',
  'watchdog',
  'watcher-list',
];

/**
 * Files that need the machine to themselves: what they judge is the machine's quiet; and the one
 * whose 1,000 agents load both cores so that the bounds of files beside it would not hold.
 */
export const ALONE: readonly string[] = ['ci-example', 'gate', 'interference', 'scale'];

/** The lane of a test file, by its name without `.test.ts`. */
export function laneOf(name: string): Lane {
  if (ALONE.includes(name)) return 'alone';
  return BESIDE.includes(name) ? 'beside' : 'host';
}
