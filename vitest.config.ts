import { defineConfig } from 'vitest/config';

// Tests share one machine's inotify limits, loop devices and (later) a redis-server:
// run files one after another so they never measure or mutate the kernel at once.
export default defineConfig({
  test: {
    include: ['tests/**/*.test.ts'],
    fileParallelism: false,
    reporters: ['default', './tests/summary-reporter.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
