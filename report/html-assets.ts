/**
 * What an HTML report carries inline so it opens offline and under a strict CSP: Chart.js's UMD
 * build, the report's script (dashboard/page.ts, bundled by esbuild into
 * dist/dashboard/report-page.js by `npm run build`, scripts/bundle.ts) and the dashboard's
 * stylesheet, with the CSP hashes of each.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { FsbenchError } from '../contract/errors.js';

export interface HtmlAssets {
  /** Chart.js, a classic script defining the global `Chart`. */
  readonly chartJs: string;
  /** The page's script: draws the charts the report's data block asks for. */
  readonly script: string;
  readonly style: string;
  /** CSP source expressions (`'sha256-…'`) of the two scripts and of the style, in that order. */
  readonly scriptHashes: readonly string[];
  readonly styleHashes: readonly string[];
}

/**
 * The package root: the nearest ancestor holding the dashboard (the source tree and the
 * installed package alike; this file runs from report/ or dist/report/).
 */
function packageRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(path.join(dir, 'dashboard', 'style.css'))) return dir;
    const parent = path.dirname(dir);
    if (parent === dir) throw new FsbenchError('INTERNAL', 'cannot find the dashboard (dashboard/style.css) the HTML report takes its style from');
    dir = parent;
  }
}

function read(file: string, what: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new FsbenchError('INTERNAL', `the HTML report needs ${what} at ${file}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** A script or style inlined in HTML must not hold what would end its element early. */
function inlineable(text: string, element: 'script' | 'style', what: string): string {
  if (new RegExp(`</${element}|<!--`, 'i').test(text)) throw new FsbenchError('INTERNAL', `${what} holds '</${element}' or '<!--' and cannot be inlined in the HTML report`);
  return text;
}

const cspHash = (text: string) => `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;

let assets: HtmlAssets | undefined;

/** The report's inline assets, read once per process. */
export function htmlAssets(): HtmlAssets {
  if (assets) return assets;
  const root = packageRoot();
  const chartFile = path.join(path.dirname(createRequire(import.meta.url).resolve('chart.js')), 'chart.umd.min.js');
  const chartJs = inlineable(read(chartFile, 'Chart.js'), 'script', chartFile);
  const script = inlineable(read(path.join(root, 'dist', 'dashboard', 'report-page.js'), "the report's script (run 'npm run build')"), 'script', "the report's script");
  const style = inlineable(read(path.join(root, 'dashboard', 'style.css'), 'the stylesheet'), 'style', 'the stylesheet');
  assets = { chartJs, script, style, scriptHashes: [cspHash(chartJs), cspHash(script)], styleHashes: [cspHash(style)] };
  return assets;
}
