import { defineConfig } from 'vitest/config';
import { ALONE, ISOLATED, QUICK, fileOf } from './tests/lanes.js';

// The lanes, and why a file is in one, are in tests/lanes.ts. `host` and `isolated` run side by
// side, one file at a time each; then `alone`, with nothing beside it; then `quick`, two at a time.
const lane = (name: string, files: string[] | null, groupOrder: number, extra: { setupFiles?: string[]; maxWorkers?: number } = {}) => ({
  extends: true,
  test: {
    name,
    include: files ?? ['tests/**/*.test.ts'],
    exclude: files === null ? [...QUICK, ...ISOLATED, ...ALONE].map(fileOf) : [],
    maxWorkers: extra.maxWorkers ?? 1,
    sequence: { groupOrder },
    ...(extra.setupFiles ? { setupFiles: extra.setupFiles } : {}),
  },
});

// Whatever a file of the kernel's lanes does to the host-wide inotify limits is undone after it, pass or fail.
const hostLimits = { setupFiles: ['./tests/setup/host-limits.ts'] };

export default defineConfig({
  test: {
    maxWorkers: 2,
    // The browser code, bundled once before any file (the dashboard and the HTML report run it).
    globalSetup: ['./tests/setup/bundle.ts'],
    reporters: ['default', './tests/summary-reporter.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    projects: [
      lane('host', null, 0, hostLimits),
      lane('isolated', ISOLATED.map(fileOf), 0),
      lane('alone', ALONE.map(fileOf), 1, hostLimits),
      lane('quick', QUICK.map(fileOf), 2, { maxWorkers: 2 }),
    ],
  },
});
