/**
 * The layer rules are real: files that close an import cycle, or that import a higher layer,
 * fail the project's own lint (eslint.config.js), the lint `npm test` runs beside the tests. So
 * do the coordinator's rooms' rules: a module outside a room that imports anything of it but its
 * face (index.ts), a room that imports a room above it, and SQL outside the store. And the
 * modules stay a size one reads at a sitting.
 */
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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
  'cli/zz-lint-probe-room-inner.ts': "import { Store } from '../coordinator/store/store.js';\nexport const inner = Store;\n",
  'cli/zz-lint-probe-room-face.ts': "import { Store } from '../coordinator/store/index.js';\nexport const face = Store;\n",
  'coordinator/store/zz-lint-probe-room-up.ts': "import { Dispatcher } from '../matrices/index.js';\nexport const up = Dispatcher;\n",
  'coordinator/routes/zz-lint-probe-room-sql.ts': "import Database from 'better-sqlite3';\nexport const sql = Database;\n",
};

describe('layers', () => {
  it('the lint fails on an import cycle, an import upwards and an import across, in layers and in the coordinator\'s rooms', async () => {
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
      const message = (file: string) => results.find((r) => r.filePath.endsWith(file))?.messages.find((m) => m.ruleId === 'import-x/no-restricted-paths')?.message;
      // A room's inner file from outside it; the same module through the face passes.
      expect(message('zz-lint-probe-room-inner.ts')).toMatch(/coordinator\/store\/ is imported through its face, coordinator\/store\/index\.ts/);
      expect(rules['cli/zz-lint-probe-room-face.ts']).toEqual([]);
      expect(message('zz-lint-probe-room-up.ts')).toMatch(/coordinator\/store\/ may import no other room/);
      expect(rules['coordinator/routes/zz-lint-probe-room-sql.ts']).toContain('no-restricted-imports');
    } finally {
      for (const f of files) rmSync(f, { force: true });
    }
  }, 120_000);
});

describe('module sizes', () => {
  /** Lines of `file` (relative to the checkout). */
  const linesOf = (file: string) => readFileSync(path.join(PACKAGE_ROOT, file), 'utf8').split('\n').length - 1;

  it('keeps every TypeScript file of coordinator/, settings/, agent/, queue/ and host/ within 450 lines, and native/probe.c under 1,000', () => {
    const files = ['coordinator', 'settings', 'agent', 'queue', 'host'].flatMap((dir) =>
      readdirSync(path.join(PACKAGE_ROOT, dir), { recursive: true, encoding: 'utf8' })
        .filter((f) => f.endsWith('.ts') && !f.startsWith('zz-lint-probe'))
        .map((f) => path.join(dir, f)),
    );
    // The folders hold some 100 modules: an empty list would prove nothing.
    expect(files.length).toBeGreaterThan(50);
    expect(files.filter((f) => linesOf(f) > 450).map((f) => `${f}: ${linesOf(f)} lines`)).toEqual([]);
    expect(linesOf('native/probe.c')).toBeLessThan(1000);
  });
});
