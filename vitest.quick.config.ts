import { defineConfig } from 'vitest/config';
import { QUICK } from './tests/quick.js';

// `npm run test:quick`: the files that need no Redis, Docker or root (tests/quick.ts), two at a time.
export default defineConfig({
  test: {
    include: QUICK.map((n) => `tests/${n}.test.ts`),
    maxWorkers: 2,
    globalSetup: ['./tests/setup/bundle.ts'],
    reporters: ['default', './tests/summary-reporter.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
