/**
 * The test files that need nothing but this process and temporary files: no Redis, no Docker,
 * no root, no kernel limit. `npm run test:quick` runs them (vitest.quick.config.ts) while
 * developing; `npm test` runs them with every other file.
 */

export const QUICK = [
  'change-point',
  'compare',
  'enrollment-schema',
  'health-file',
  'history',
  'install-scripts',
  'lanes',
  'layers',
  'matrix',
  'native-build',
  'ran-here',
  'readme',
  'reference',
  'report-notes',
  'semantics-matching',
  'signing',
  'slices',
  'stats',
  'stats-inference',
  'stats-metrics',
  'stats-power',
  'stats-robust',
  'summary-reporter',
];
