// typescript-eslint's strict type-checked rules over every TypeScript source, the dashboard's
// browser code included (typed against the DOM by dashboard/tsconfig.json, bundled by esbuild).
// The layer rules below keep the module graph a stack: a module imports only the layers it
// names, so a new cycle or a reach upwards fails `npm test`.
import eslint from '@eslint/js';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';
import importX from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';

/**
 * Each top-level module and the modules it may import (besides itself). Lower layers never
 * import higher ones: contract -> host -> workloads -> runner -> sandbox -> agent, contract ->
 * queue -> agent | coordinator, contract -> stats -> report -> compare -> coordinator | cli,
 * stats -> runner (a cell under `repetitions: auto` runs until its median is precise enough);
 * the dashboard draws what report and compare build (their documents, the chart choice).
 */
export const LAYERS = {
  contract: [],
  settings: ['contract'],
  log: [],
  host: ['contract'],
  stats: ['contract'],
  queue: ['contract'],
  workloads: ['contract', 'host'],
  runner: ['contract', 'host', 'stats', 'workloads'],
  sandbox: ['contract', 'host', 'workloads', 'runner'],
  report: ['contract', 'stats'],
  compare: ['contract', 'stats', 'report'],
  gate: ['contract', 'stats', 'report', 'compare'],
  dashboard: ['contract', 'stats', 'report', 'compare'],
  agent: ['contract', 'settings', 'log', 'host', 'workloads', 'runner', 'sandbox', 'queue'],
  coordinator: ['contract', 'settings', 'log', 'host', 'stats', 'queue', 'report', 'compare', 'gate'],
  cli: ['contract', 'settings', 'log', 'host', 'stats', 'queue', 'workloads', 'runner', 'sandbox', 'report', 'compare', 'gate', 'agent', 'coordinator'],
};
const MODULES = Object.keys(LAYERS);

/**
 * The coordinator's rooms (its sub-folders) and the rooms each may import besides itself, in the
 * same way: no room imports one above it. From outside a room, only its face (`index.ts`) may be
 * imported: whatever else lies inside is the room's own business. The few files at coordinator/'s
 * top compose the rooms and import their faces like anyone else.
 */
export const ROOMS = {
  store: [],
  http: [],
  enrollment: ['store'],
  matrices: ['store', 'http', 'enrollment'],
  ingest: ['store', 'enrollment', 'matrices'],
  reports: ['store'],
  history: ['store'],
  metrics: ['store', 'http', 'enrollment', 'matrices'],
  routes: ['store', 'http', 'enrollment', 'matrices', 'reports', 'history'],
};
const ROOM_NAMES = Object.keys(ROOMS);

/** One zone per forbidden pair; product code never imports the tests or the benchmarks. */
const zones = [
  ...MODULES.flatMap((target) =>
    [...MODULES, 'tests', 'bench']
      .filter((from) => from !== target && !LAYERS[target].includes(from))
      .map((from) => ({
        target: `./${target}`,
        from: `./${from}`,
        message: `${target}/ may import only ${LAYERS[target].join(', ') || 'nothing outside itself'} (see LAYERS in eslint.config.js)`,
      })),
  ),
  ...ROOM_NAMES.flatMap((room) =>
    ROOM_NAMES.filter((from) => from !== room && !ROOMS[room].includes(from)).map((from) => ({
      target: `./coordinator/${room}`,
      from: `./coordinator/${from}`,
      message: `coordinator/${room}/ may import ${ROOMS[room].length > 0 ? `only the rooms ${ROOMS[room].join(', ')}` : 'no other room'} (see ROOMS in eslint.config.js)`,
    })),
  ),
  ...ROOM_NAMES.map((room) => ({
    // Every file outside the room: elsewhere in the tree, at coordinator/'s top, in another room.
    target: ['./!(coordinator)/**', './*.ts', './coordinator/*.ts', `./coordinator/!(${room})/**`],
    from: `./coordinator/${room}`,
    except: ['./index.ts'],
    message: `coordinator/${room}/ is imported through its face, coordinator/${room}/index.ts (see ROOMS in eslint.config.js)`,
  })),
  // Benchmarks share the test fixtures (synthetic runs, a real redis-server), not the tests.
  { target: './bench', from: './tests', except: ['./fixtures'], message: 'bench/ may import tests/fixtures only' },
];

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'native/**', 'eslint.config.js', 'vitest.config.ts', 'vitest.quick.config.ts'] },
  eslint.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true }],
    },
  },
  {
    files: ['**/*.ts'],
    plugins: { 'import-x': importX },
    settings: {
      // The parser reads the imported files too: without it no-cycle sees no edges.
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
      'import-x/extensions': ['.ts', '.js'],
      'import-x/resolver-next': [createTypeScriptImportResolver({ project: './tsconfig.json' })],
    },
    rules: {
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      'import-x/no-restricted-paths': ['error', { zones }],
    },
  },
  {
    // The store alone holds SQL: no other module of the coordinator opens a database or reaches
    // for the store's handle to one.
    files: ['coordinator/**/*.ts'],
    ignores: ['coordinator/store/**'],
    rules: {
      'no-restricted-imports': ['error', { paths: [{ name: 'better-sqlite3', message: 'SQL lives in coordinator/store/: add a typed method there' }] }],
      'no-restricted-syntax': ['error', { selector: "MemberExpression[property.name='db']", message: "SQL lives in coordinator/store/: add a typed method there rather than using the store's database" }],
    },
  },
);
