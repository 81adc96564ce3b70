/**
 * What an HTML report carries inline so it opens offline and under a strict CSP: Chart.js's UMD
 * build, the dashboard's own chart modules (dashboard/charts.js and what it imports) linked into
 * one script, and the dashboard's stylesheet. The modules are linked, not rewritten: each keeps
 * its text inside a function scope, its `import`/`export` lines turned into reads and writes of
 * one table, so a change to charts.js reaches the reports as it is. Only the forms the dashboard
 * uses are understood (named imports and exports); anything else is refused when the bundle is
 * made, never shipped half-linked.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { FsbenchError } from '../contract/errors.js';
import { PAGE_MODULE, PAGE_STYLE } from './html-page.js';

export interface HtmlAssets {
  /** Chart.js, a classic script defining the global `Chart`. */
  readonly chartJs: string;
  /** The page's module script: the linked chart modules and the code that draws the report. */
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
    if (existsSync(path.join(dir, 'dashboard', 'charts.js'))) return dir;
    const parent = path.dirname(dir);
    if (parent === dir) throw new FsbenchError('INTERNAL', 'cannot find the dashboard (dashboard/charts.js) the HTML report draws its charts with');
    dir = parent;
  }
}

/**
 * A module of the page by the URL path the dashboard serves it at: its own files at `/x.js`,
 * the compiled shared modules at `/lib/...` (coordinator/dashboard.ts). The report page itself
 * sits at `/report-page.js` so its imports read like the dashboard's.
 */
const PAGE_PATH = '/report-page.js';
const SHARED = new Set(['/lib/report/format.js', '/lib/contract/units.js']);

function moduleText(root: string, urlPath: string): string {
  if (urlPath === PAGE_PATH) return PAGE_MODULE;
  let file: string;
  if (SHARED.has(urlPath)) file = path.join(root, 'dist', urlPath.slice('/lib/'.length));
  else if (/^\/[A-Za-z0-9_-]+\.js$/.test(urlPath)) file = path.join(root, 'dashboard', urlPath.slice(1));
  else throw new FsbenchError('INTERNAL', `the HTML report cannot inline ${urlPath}: not a dashboard module`);
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new FsbenchError('INTERNAL', `the HTML report needs ${file} (run 'npm run build'): ${err instanceof Error ? err.message : String(err)}`);
  }
}

interface Binding {
  readonly imported: string;
  readonly local: string;
}

const IDENT = /^[A-Za-z_$][\w$]*$/;

function bindings(list: string, where: string): Binding[] {
  return list
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .map((s) => {
      const [imported = '', local = imported] = s.split(/\s+as\s+/);
      if (!IDENT.test(imported) || !IDENT.test(local)) throw new FsbenchError('INTERNAL', `${where}: cannot inline the binding '${s}'`);
      return { imported, local };
    });
}

const IMPORT = /^import\s*\{([^}]*)\}\s*from\s*(['"])([^'"]+)\2\s*;?/gm;
const REEXPORT = /^export\s*\{([^}]*)\}\s*from\s*(['"])([^'"]+)\2\s*;?/gm;
const EXPORT_LIST = /^export\s*\{([^}]*)\}\s*;?/gm;
const EXPORT_DECL = /^export\s+((?:async\s+)?function\*?|const|let|var|class)\s+([A-Za-z_$][\w$]*)/gm;
const LEFT_OVER = /^\s*(?:import|export)\b.*$/m;
const SOURCE_MAP = /^\/\/# sourceMappingURL=.*$/gm;

interface Linked {
  readonly path: string;
  readonly body: string;
  readonly exports: readonly string[];
  readonly deps: readonly string[];
}

const TABLE = '__fsbenchModules';

function link(urlPath: string, text: string): Linked {
  const deps: string[] = [];
  const exports: string[] = [];
  const resolve = (spec: string) => {
    const dep = new URL(spec, `https://report.invalid${urlPath}`).pathname;
    deps.push(dep);
    return JSON.stringify(dep);
  };
  const read = (list: readonly Binding[], dep: string) =>
    `const { ${list.map((b) => (b.imported === b.local ? b.local : `${b.imported}: ${b.local}`)).join(', ')} } = ${TABLE}[${dep}];`;
  const body = text
    .replace(SOURCE_MAP, '')
    .replace(IMPORT, (_m, list: string, _q: string, spec: string) => read(bindings(list, urlPath), resolve(spec)))
    .replace(REEXPORT, (_m, list: string, _q: string, spec: string) => {
      const b = bindings(list, urlPath);
      exports.push(...b.map((x) => x.local));
      return read(b, resolve(spec));
    })
    .replace(EXPORT_LIST, (_m, list: string) => {
      exports.push(...bindings(list, urlPath).map((b) => (b.imported === b.local ? b.local : `${b.local}: ${b.imported}`)));
      return '';
    })
    .replace(EXPORT_DECL, (_m, kind: string, name: string) => {
      exports.push(name);
      return `${kind} ${name}`;
    });
  const left = LEFT_OVER.exec(body);
  if (left) throw new FsbenchError('INTERNAL', `${urlPath}: the HTML report cannot inline '${left[0].trim()}' (only named imports and exports)`);
  return { path: urlPath, body, exports, deps };
}

/** Every module the page reaches, dependencies first, each as one function scope in a single script. */
function linkPage(root: string): string {
  const done = new Map<string, Linked>();
  const order: Linked[] = [];
  const visit = (p: string, stack: readonly string[]) => {
    if (done.has(p)) return;
    if (stack.includes(p)) throw new FsbenchError('INTERNAL', `the HTML report's modules import each other in a cycle: ${[...stack, p].join(' -> ')}`);
    const m = link(p, moduleText(root, p));
    for (const d of m.deps) visit(d, [...stack, p]);
    done.set(p, m);
    order.push(m);
  };
  visit(PAGE_PATH, []);
  const parts = order.map((m) => `${TABLE}[${JSON.stringify(m.path)}] = (() => {\n${m.body}\nreturn { ${m.exports.join(', ')} };\n})();`);
  return `const ${TABLE} = Object.create(null);\n${parts.join('\n')}\n`;
}

/** A script or style inlined in HTML must not hold what would end its element early. */
function inlineable(text: string, element: 'script' | 'style', what: string): string {
  if (new RegExp(`</${element}|<!--`, 'i').test(text)) throw new FsbenchError('INTERNAL', `${what} holds '</${element}' or '<!--' and cannot be inlined in the HTML report`);
  return text;
}

export const cspHash = (text: string) => `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;

let assets: HtmlAssets | undefined;

/** The report's inline assets, read and linked once per process. */
export function htmlAssets(): HtmlAssets {
  if (assets) return assets;
  const root = packageRoot();
  const chartFile = path.join(path.dirname(createRequire(import.meta.url).resolve('chart.js')), 'chart.umd.min.js');
  let chartJs: string;
  try {
    chartJs = readFileSync(chartFile, 'utf8');
  } catch (err) {
    throw new FsbenchError('INTERNAL', `the HTML report needs Chart.js at ${chartFile}: ${err instanceof Error ? err.message : String(err)}`);
  }
  const script = inlineable(linkPage(root), 'script', 'the chart modules');
  const style = inlineable(`${readFileSync(path.join(root, 'dashboard', 'style.css'), 'utf8')}\n${PAGE_STYLE}`, 'style', 'the stylesheet');
  inlineable(chartJs, 'script', chartFile);
  assets = { chartJs, script, style, scriptHashes: [cspHash(chartJs), cspHash(script)], styleHashes: [cspHash(style)] };
  return assets;
}
