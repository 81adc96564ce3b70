import { defineConfig } from 'vitest/config';

// Tests share one machine's inotify limits, loop devices and (later) a redis-server:
// run files one after another so they never measure or mutate the kernel at once.
export default defineConfig({
  test: {
    include: ['tests/**/*.test.ts'],
    fileParallelism: false,
    // Whatever a file does to the host-wide inotify limits is undone after it, pass or fail.
    setupFiles: ['./tests/setup/host-limits.ts'],
    // The browser code, bundled once before any file (the dashboard and the HTML report run it).
    globalSetup: ['./tests/setup/bundle.ts'],
    reporters: ['default', './tests/summary-reporter.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
