/**
 * Finds the product files that name a workload: a workload is a slice (its folders
 * `contract/workloads/<name>/` and `workloads/<name>/`, plugged in by one line in each registry),
 * and nothing else may know one by name, or adding a workload means editing switches all over.
 *
 * What counts as naming one, read from the syntax tree (TypeScript's parser, which reads the
 * dashboard's JavaScript too), so comments and longer strings do not:
 * - a string literal (quotes, or a template without substitutions) equal to a workload's name,
 *   anywhere outside the slice folders (inside one, such a word may be a value of the slice's own,
 *   as the watches workload's `backend: inotify`);
 * - an import (static, dynamic, `export from`, `import()` types) of a file inside a slice folder,
 *   outside that slice, except by the two registries;
 * - an import of one slice's folder by another slice: slices share code through contract/, host/
 *   and the other layers, never through each other.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/**
 * The product's source directories, scanned. tests/, bench/, examples/ and docs/ may name
 * workloads: they use them as inputs (matrices, fixtures, measured figures), not as code the
 * product runs. native/ holds the C programs, which slices name (WorkloadContract.native).
 */
export const SCANNED = [
  'contract', 'log', 'settings', 'host', 'queue', 'workloads', 'runner', 'sandbox', 'agent', 'stats',
  'report', 'compare', 'gate', 'coordinator', 'cli', 'dashboard', 'scripts',
] as const;
/** Directories that hold source but are not scanned, each for the reason above (or generated: dist, node_modules). */
export const NOT_SCANNED = ['tests', 'bench', 'examples', 'docs', 'native', 'dist', 'node_modules'] as const;

/** The files that plug slices in: they import every slice, and only they may. */
export const REGISTRIES = ['contract/workloads/index.ts', 'runner/workloads.ts'] as const;

const SOURCE = /\.(ts|js|mjs|cjs)$/;
const SLICE_PATH = /^(?:contract\/)?workloads\/([^/]+)\//;

export interface Offence {
  /** Relative to the root, with forward slashes. */
  readonly file: string;
  readonly line: number;
  readonly what: string;
}

export function formatOffence(o: Offence): string {
  return `${o.file}:${o.line}: ${o.what}`;
}

/** The slice a path (relative to the root) lies in, or null. */
function sliceOf(rel: string, names: ReadonlySet<string>): string | null {
  const name = SLICE_PATH.exec(rel)?.[1];
  return name !== undefined && names.has(name) ? name : null;
}

/** The slice folders on disk, under either tree: a folder counts before it is registered. */
export function sliceFolders(root: string): string[] {
  const folders = (dir: string) => {
    try {
      return readdirSync(path.join(root, dir), { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);
    } catch {
      return [];
    }
  };
  return [...new Set([...folders('contract/workloads'), ...folders('workloads')])].sort();
}

function sourceFiles(root: string, dir: string): string[] {
  let entries;
  try {
    entries = readdirSync(path.join(root, dir), { withFileTypes: true });
  } catch {
    return [];
  }
  return entries.flatMap((e) => {
    const rel = `${dir}/${e.name}`;
    if (e.isDirectory()) return e.name === 'node_modules' ? [] : sourceFiles(root, rel);
    return e.isFile() && SOURCE.test(e.name) ? [rel] : [];
  });
}

/** Top-level directories holding source that are neither scanned nor exempt: a new module must be put in one list. */
export function unlistedDirectories(root: string): string[] {
  const listed = new Set<string>([...SCANNED, ...NOT_SCANNED]);
  return readdirSync(root, { withFileTypes: true })
    .filter((e) => e.isDirectory() && !e.name.startsWith('.') && !listed.has(e.name))
    .map((e) => e.name)
    .filter((dir) => sourceFiles(root, dir).length > 0);
}

function moduleSpecifiers(node: ts.Node): ts.StringLiteralLike | undefined {
  if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteralLike(node.moduleSpecifier)) {
    return node.moduleSpecifier;
  }
  if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
    const arg = node.arguments[0];
    return arg && ts.isStringLiteralLike(arg) ? arg : undefined;
  }
  if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteralLike(node.argument.literal)) {
    return node.argument.literal;
  }
  return undefined;
}

/** The offences of one file's text. */
export function offencesIn(rel: string, text: string, names: ReadonlySet<string>): Offence[] {
  const own = sliceOf(rel, names);
  const registry = (REGISTRIES as readonly string[]).includes(rel);
  const source = ts.createSourceFile(rel, text, ts.ScriptTarget.Latest, true, rel.endsWith('.ts') ? ts.ScriptKind.TS : ts.ScriptKind.JS);
  const out: Offence[] = [];
  const at = (node: ts.Node, what: string) => {
    out.push({ file: rel, line: source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1, what });
  };
  const specifiers = new Set<ts.Node>();
  const visit = (node: ts.Node): void => {
    const spec = moduleSpecifiers(node);
    if (spec) {
      specifiers.add(spec);
      if (spec.text.startsWith('.')) {
        const target = path.posix.normalize(path.posix.join(path.posix.dirname(rel), spec.text));
        const slice = sliceOf(target, names);
        if (slice !== null && slice !== own && !(own === null && registry)) {
          at(spec, own === null ? `imports the ${slice} slice (${target})` : `the ${own} slice imports the ${slice} slice (${target})`);
        }
      }
    }
    if (own === null && ts.isStringLiteralLike(node) && !specifiers.has(node) && names.has(node.text)) {
      at(node, `names the workload '${node.text}'`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}

/** Every offence under `root`, in file order. `names`: the workloads' names (registered or with a folder). */
export function findOffences(root: string, names: ReadonlySet<string>): Offence[] {
  return SCANNED.flatMap((dir) => sourceFiles(root, dir))
    .sort()
    .flatMap((rel) => offencesIn(rel, readFileSync(path.join(root, rel), 'utf8'), names));
}
