/**
 * The layer rules are real: files that close an import cycle, or that import a higher layer,
 * fail the project's own lint (eslint.config.js), the lint `npm test` runs before the tests.
 */
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../host/native.js';

/** Written into the tree for the lint to see, removed whatever happens (and ignored by git). */
const PLANTED = {
  'host/zz-lint-probe-a.ts': "import { b } from './zz-lint-probe-b.js';\nexport const a = (): unknown => b;\n",
  'host/zz-lint-probe-b.ts': "import { a } from './zz-lint-probe-a.js';\nexport const b = (): unknown => a;\n",
  'stats/zz-lint-probe-up.ts': "import { buildReport } from '../report/build.js';\nexport const up = buildReport;\n",
  'queue/zz-lint-probe-across.ts': "import { startAgent } from '../agent/agent.js';\nexport const across = startAgent;\n",
};

describe('layers', () => {
  it('the lint fails on an import cycle, an import upwards and an import across', async () => {
    const files = Object.keys(PLANTED).map((f) => path.join(PACKAGE_ROOT, f));
    try {
      for (const [file, text] of Object.entries(PLANTED)) writeFileSync(path.join(PACKAGE_ROOT, file), text);
      const results = await new ESLint({ cwd: PACKAGE_ROOT }).lintFiles(files);
      const rules = Object.fromEntries(results.map((r) => [path.relative(PACKAGE_ROOT, r.filePath), r.messages.map((m) => m.ruleId)]));
      expect(rules['host/zz-lint-probe-a.ts']).toContain('import-x/no-cycle');
      expect(rules['host/zz-lint-probe-b.ts']).toContain('import-x/no-cycle');
      expect(rules['stats/zz-lint-probe-up.ts']).toContain('import-x/no-restricted-paths');
      expect(rules['queue/zz-lint-probe-across.ts']).toContain('import-x/no-restricted-paths');
      const up = results.find((r) => r.filePath.endsWith('zz-lint-probe-up.ts'))?.messages.find((m) => m.ruleId === 'import-x/no-restricted-paths');
      expect(up?.message).toMatch(/stats\/ may import only contract/);
    } finally {
      for (const f of files) rmSync(f, { force: true });
    }
  }, 120_000);
});
