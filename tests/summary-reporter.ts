/**
 * Ends the run with the plain line `N passed, N failed` that CI logs are read for, since
 * vitest's own summary is formatted for people.
 *
 * Counting only test cases would hide the failures that happen outside them: a file that throws
 * at import has no tests at all, and a failing `beforeAll` leaves its tests skipped, so the line
 * could say 0 failed while vitest exits 1. Each file or suite with errors of its own (import,
 * collection, hooks) and each unhandled error therefore counts as one failure too, and is named
 * above the line.
 *
 * When FSBENCH_TEST_SUMMARY names a file, the counts and those lines are written there too, as
 * JSON, for the runner of the test lanes (scripts/test-lanes.ts, `npm test`) to add up into its own line.
 */
import { writeFileSync } from 'node:fs';
import type { Reporter, SerializedError, TestModule, TestRunEndReason, TestSuite } from 'vitest/node';

export default class SummaryReporter implements Reporter {
  onTestRunEnd(modules: readonly TestModule[], unhandledErrors: readonly SerializedError[], reason: TestRunEndReason): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    const outside: string[] = [];
    for (const m of modules) {
      for (const t of m.children.allTests()) {
        const state = t.result().state;
        if (state === 'passed') passed++;
        else if (state === 'failed') failed++;
        else skipped++;
      }
      const owners: (TestModule | TestSuite)[] = [m, ...m.children.allSuites()];
      for (const owner of owners) {
        const first = owner.errors()[0];
        if (first === undefined) continue;
        const where = owner.type === 'module' ? owner.relativeModuleId : `${m.relativeModuleId} > ${owner.fullName}`;
        outside.push(`${where}: ${firstLine(first)}`);
      }
    }
    for (const e of unhandledErrors) outside.push(`unhandled error: ${firstLine(e)}`);
    // Whatever else made vitest fail (an interrupted run, a failure this reporter has no entity
    // for) must still show as a failure: the line never says 0 failed for a failed run.
    if (failed === 0 && outside.length === 0 && reason !== 'passed') outside.push(`the run ${reason === 'interrupted' ? 'was interrupted' : 'failed outside any test'}`);

    const lines = outside.map((o) => `failed outside a test: ${o}\n`).join('');
    failed += outside.length;
    const file = process.env['FSBENCH_TEST_SUMMARY'];
    if (file !== undefined) writeFileSync(file, JSON.stringify({ passed, failed, skipped, outside }));
    process.stdout.write(`\n${lines}${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ''}\n`);
  }
}

function firstLine(e: SerializedError): string {
  const text = `${e.name ?? 'Error'}: ${e.message}`;
  return text.split('\n', 1)[0] ?? text;
}
