/**
 * The documentation's generated sections: each lies between `<!-- name:begin -->` and
 * `<!-- name:end -->` in one file under docs/, and its body is exactly what its function here
 * returns, so the tables of parameters, metrics, settings and codes cannot drift from the code.
 *
 * Writing and checking are kept apart: `npm run docs` (this module run directly, from dist/)
 * rewrites the sections, and tests/readme.test.ts only compares. A test that rewrote the file it
 * compares against would always pass.
 */
import { existsSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { metricsMarkdown, paramsMarkdown } from '../cli/local.js';
import { errorCodesMarkdown, exitCodesMarkdown } from '../contract/errors.js';
import { PACKAGE_ROOT } from '../host/native.js';
import { settingsMarkdown } from '../settings/index.js';

/** One generated section: the file holding it (relative to the package root), its name, its body. */
export interface DocSection {
  readonly file: string;
  readonly name: string;
  readonly generate: () => string;
}

const REFERENCE = 'docs/reference.md';

/** Every generated section, in the file that holds it. */
export const DOC_SECTIONS: readonly DocSection[] = [
  { file: REFERENCE, name: 'exit-codes', generate: () => `${exitCodesMarkdown()}\n` },
  { file: REFERENCE, name: 'params', generate: () => paramsMarkdown() },
  { file: REFERENCE, name: 'metrics', generate: () => metricsMarkdown() },
  { file: REFERENCE, name: 'error-codes', generate: () => `${errorCodesMarkdown()}\n` },
  { file: REFERENCE, name: 'settings', generate: () => `${settingsMarkdown()}\n` },
];

/** The absolute path of a file named relative to the package root. */
export const docPath = (file: string): string => path.join(PACKAGE_ROOT, file);

const markers = (name: string) => ({ begin: `<!-- ${name}:begin -->\n`, end: `<!-- ${name}:end -->` });

/** Where a section's body starts and ends in `text`; throws when the markers are missing. */
function bounds(text: string, name: string, file: string): { start: number; end: number } {
  const { begin, end } = markers(name);
  const a = text.indexOf(begin);
  const b = text.indexOf(end, a < 0 ? 0 : a);
  if (a < 0 || b < 0) throw new Error(`${file} has no ${name} section (${begin.trim()} ... ${end})`);
  return { start: a + begin.length, end: b };
}

/** The body of section `name` in `text` (the contents of `file`, named in the error). */
export function readSection(text: string, name: string, file = 'the file'): string {
  const { start, end } = bounds(text, name, file);
  return text.slice(start, end);
}

/** `text` with section `name`'s body replaced by `body`. */
export function replaceSection(text: string, name: string, body: string, file = 'the file'): string {
  const { start, end } = bounds(text, name, file);
  return text.slice(0, start) + body + text.slice(end);
}

/** Rewrites every generated section; returns `file: name` of each one that changed. */
export function writeDocSections(root: string = PACKAGE_ROOT): string[] {
  const changed: string[] = [];
  const files = [...new Set(DOC_SECTIONS.map((s) => s.file))];
  for (const file of files) {
    const full = path.join(root, file);
    const before = readFileSync(full, 'utf8');
    let text = before;
    for (const section of DOC_SECTIONS.filter((s) => s.file === file)) {
      const body = section.generate();
      if (readSection(text, section.name, file) === body) continue;
      text = replaceSection(text, section.name, body, file);
      changed.push(`${file}: ${section.name}`);
    }
    if (text !== before) writeFileSync(full, text);
  }
  return changed;
}

// Run directly (`npm run docs`), not imported by the test. Node reports the main module by its
// real path, hence realpath on argv[1].
const entry = process.argv[1];
if (entry !== undefined && existsSync(entry) && import.meta.url === pathToFileURL(realpathSync(entry)).href) {
  const changed = writeDocSections();
  process.stdout.write(changed.length > 0 ? `rewrote ${changed.join(', ')}\n` : 'generated sections already up to date\n');
}
