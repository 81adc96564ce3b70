/**
 * Bundles the browser code with esbuild: the dashboard (dashboard/app.ts, served by the
 * coordinator at /app.js) and the HTML report's script (dashboard/page.ts, inlined in every
 * page by report/html-assets.ts). Both are TypeScript importing the very modules the rest of
 * fsbench uses (the document exporters, the chart choice, the number formatter), so nothing is
 * written twice and nothing is linked by hand. Run by `npm run build`, by the image's build,
 * and before the tests (tests/setup/bundle.ts).
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type Plugin } from 'esbuild';

/** The source tree's root, from scripts/ or dist/scripts/. */
function root(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  return path.basename(path.dirname(here)) === 'dist' ? path.resolve(here, '../..') : path.resolve(here, '..');
}

/** Where the bundles go: dist/dashboard/, next to the compiled code that serves and inlines them. */
const bundleDir = (base = root()): string => path.join(base, 'dist', 'dashboard');

/**
 * zod's `z` carries every locale's error messages (260 KB minified) as `z.locales`, which no
 * bundler can drop from a namespace object; fsbench speaks English (zod's default, imported on
 * its own), so the bundles get an empty `locales`.
 */
const noZodLocales: Plugin = {
  name: 'no-zod-locales',
  setup(b) {
    b.onResolve({ filter: /^\.\.\/locales\/index\.js$/ }, (args) => (args.importer.includes(`${path.sep}zod${path.sep}`) ? { path: 'zod-locales', namespace: 'empty' } : undefined));
    b.onLoad({ filter: /.*/, namespace: 'empty' }, () => ({ contents: 'export {};', loader: 'js' }));
  },
};

export async function bundleBrowserCode(base = root()): Promise<void> {
  await build({
    absWorkingDir: base,
    entryPoints: { app: 'dashboard/app.ts', 'report-page': 'dashboard/page.ts' },
    outdir: bundleDir(base),
    bundle: true,
    // One classic script each: the page inlines it, the dashboard loads it as a module alike.
    format: 'iife',
    platform: 'browser',
    target: 'es2022',
    minify: true,
    // The inline script must not hold `</script`; esbuild escapes it in strings, and comments are dropped.
    legalComments: 'none',
    charset: 'utf8',
    logLevel: 'warning',
    plugins: [noZodLocales],
  });
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) await bundleBrowserCode();
