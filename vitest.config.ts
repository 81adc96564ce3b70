import { readdirSync } from 'node:fs';
import { defineConfig } from 'vitest/config';
import { LANES, laneOf } from './tests/lanes.js';

// Test files share one machine's kernel limits, loop devices, Docker engine and CPUs: `npm test`
// (scripts/test-lanes.ts) runs them in lanes (tests/lanes.ts), each lane one file at a time,
// FSBENCH_TEST_LANE naming the lane of a run; `npm run test:serial` runs them all one at a time.
const lane = process.env['FSBENCH_TEST_LANE'];
if (lane !== undefined && !(LANES as readonly string[]).includes(lane)) throw new Error(`FSBENCH_TEST_LANE is ${lane}: one of ${LANES.join(', ')}`);
const files = readdirSync(new URL('./tests', import.meta.url)).filter((f) => f.endsWith('.test.ts'));

export default defineConfig({
  test: {
    include: files.filter((f) => lane === undefined || laneOf(f.slice(0, -'.test.ts'.length)) === lane).map((f) => `tests/${f}`),
    fileParallelism: false,
    // Whatever a file does to the host-wide inotify limits is undone after it, pass or fail. The
    // beside lane changes none, and runs while the host lane may: this check there would see those.
    setupFiles: lane === 'beside' ? [] : ['./tests/setup/host-limits.ts'],
    // The browser code, bundled once before any file (the dashboard and the HTML report run it);
    // the lanes' runner bundles it once before the lanes start.
    globalSetup: process.env['FSBENCH_TESTS_BUNDLED'] === '1' ? [] : ['./tests/setup/bundle.ts'],
    reporters: ['default', './tests/summary-reporter.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
