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
import type { Command, Option } from 'commander';
import { z } from 'zod';
import { metricsMarkdown, paramsMarkdown } from '../cli/local.js';
import { commandsOf } from '../cli/command-tree.js';
import { buildProgram } from '../cli/program.js';
import { errorCodesMarkdown, exitCodesMarkdown } from '../contract/errors.js';
import { openApiDocument } from '../coordinator/routes/index.js';
import { PACKAGE_ROOT } from '../host/native.js';
import { FSBENCH_VERSION } from '../host/version.js';
import { settingsMarkdown } from '../settings/index.js';
import { COMPOSE_VARIABLES } from './compose-variables.js';

/** One generated section: the file holding it (relative to the package root), its name, its body. */
export interface DocSection {
  readonly file: string;
  readonly name: string;
  readonly generate: () => string;
}

const REFERENCE = 'docs/reference.md';

/** Every generated section, in the file that holds it. */
export const DOC_SECTIONS: readonly DocSection[] = [
  { file: REFERENCE, name: 'commands', generate: () => commandsMarkdown(buildProgram()) },
  { file: REFERENCE, name: 'exit-codes', generate: () => `${exitCodesMarkdown()}\n` },
  { file: REFERENCE, name: 'params', generate: () => paramsMarkdown() },
  { file: REFERENCE, name: 'metrics', generate: () => metricsMarkdown() },
  { file: REFERENCE, name: 'error-codes', generate: () => `${errorCodesMarkdown()}\n` },
  { file: REFERENCE, name: 'rest-api', generate: () => restMarkdown() },
  { file: REFERENCE, name: 'settings', generate: () => `${settingsMarkdown()}\n` },
  { file: REFERENCE, name: 'compose-variables', generate: () => composeVariablesMarkdown() },
];

/** Files generated whole, by `npm run docs`, and compared by the tests like the sections. */
export const GENERATED_FILES: readonly { readonly file: string; readonly generate: () => string }[] = [{ file: '.env.example', generate: () => envExample() }];

/** Table cells: one line, and a `|` that does not end the cell. */
const cell = (text: string): string => text.replace(/\s*\n\s*/g, ' ').replace(/\|/g, '\\|');

function optionDefault(o: Option): string {
  const d: unknown = o.defaultValue;
  if (d === undefined || d === false || (o.negate && d === true)) return '';
  return typeof d === 'string' || typeof d === 'number' || typeof d === 'boolean' ? `\`${String(d)}\`` : '';
}

/** Every command, with its arguments and every flag, from the command tree the CLI parses. */
export function commandsMarkdown(program: Command): string {
  const out: string[] = [];
  for (const { name, command } of commandsOf(program)) {
    out.push(`### \`fsbench ${name}\``, '', command.description(), '', '```', `fsbench ${name} ${command.usage()}`, '```', '');
    const args = command.registeredArguments;
    if (args.length > 0) {
      out.push('| argument | what it is |', '|---|---|');
      for (const a of args) out.push(`| \`${a.required ? '<' : '['}${a.name()}${a.variadic ? '...' : ''}${a.required ? '>' : ']'}\` | ${cell(a.description)}${a.argChoices ? `: one of ${a.argChoices.map((c) => `\`${c}\``).join(', ')}` : ''} |`);
      out.push('');
    }
    const options = command.options.filter((o) => !o.hidden);
    if (options.length > 0) {
      out.push('| option | what it does | default |', '|---|---|---|');
      for (const o of options) {
        const choices = o.argChoices ? ` (${o.argChoices.map((c) => `\`${c}\``).join(', ')})` : '';
        out.push(`| \`${o.flags}\` | ${cell(o.description)}${choices} | ${optionDefault(o)} |`);
      }
      out.push('');
    }
  }
  return out.join('\n');
}

const Operation = z
  .object({
    summary: z.string(),
    parameters: z.array(z.object({ name: z.string(), in: z.string() }).loose()).optional(),
    responses: z.record(z.string(), z.unknown()),
  })
  .loose();
const OpenApiPaths = z.object({ paths: z.record(z.string(), z.record(z.string(), z.unknown())) });
const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

/** Every route of the REST API from the OpenAPI document the coordinator serves at /openapi.json. */
export function restMarkdown(): string {
  const doc = OpenApiPaths.parse(openApiDocument(FSBENCH_VERSION));
  const rows = Object.entries(doc.paths).flatMap(([route, item]) =>
    METHODS.filter((m) => item[m] !== undefined).map((method) => {
      const op = Operation.parse(item[method]);
      const query = (op.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name);
      const target = `${method.toUpperCase()} ${route}${query.length > 0 ? `?${query.join('&')}` : ''}`;
      return `| \`${cell(target)}\` | ${cell(op.summary)} | ${Object.keys(op.responses).join(', ')} |`;
    }),
  );
  return ['| route | what it does | answers |', '|---|---|---|', ...rows, ''].join('\n');
}

/** The compose files fsbench ships, in the package root. */
const COMPOSE_FILES = ['compose.yaml', 'compose.agent.yaml', 'compose.redis-acl.yaml', 'compose.redis-publish.yaml', 'compose.redis-tls.yaml', 'compose.sandbox.yaml', 'compose.sentinel.yaml'];

export interface ComposeUse {
  readonly file: string;
  /** The default, or null when the file requires the variable (`${NAME:?why}`). */
  readonly default: string | null;
}

/** Each variable the compose files use, with how each file defaults it. */
export function composeVariables(root: string = PACKAGE_ROOT): Map<string, ComposeUse[]> {
  const uses = new Map<string, ComposeUse[]>();
  for (const file of COMPOSE_FILES) {
    const text = readFileSync(path.join(root, file), 'utf8').split('\n').filter((l) => !/^\s*#/.test(l)).join('\n');
    for (const m of text.matchAll(/\$\{([A-Z_][A-Z0-9_]*)(?:(:?[-?])([^}]*))?\}/g)) {
      const [, name = '', op, value = ''] = m;
      const use: ComposeUse = { file, default: op?.endsWith('?') ? null : value };
      const list = uses.get(name) ?? [];
      if (!list.some((u) => u.file === use.file && u.default === use.default)) list.push(use);
      uses.set(name, list);
    }
  }
  return uses;
}

function describeUses(list: readonly ComposeUse[]): string {
  return list.map((u) => `${u.file}: ${u.default === null ? 'required' : u.default === '' ? 'empty' : `\`${u.default}\``}`).join('; ');
}

/** Every variable of the compose files: where it is used, its default there, what it sets. */
export function composeVariablesMarkdown(): string {
  const rows = [...composeVariables()].sort(([a], [b]) => a.localeCompare(b)).map(([name, list]) => `| \`${name}\` | ${cell(describeUses(list))} | ${cell(COMPOSE_VARIABLES[name] ?? '')} |`);
  return ['| variable | file: default | what it sets |', '|---|---|---|', ...rows, ''].join('\n');
}

/** `.env.example`: every compose variable, commented out at its default, with what it sets. */
export function envExample(): string {
  const lines = [
    '# Every variable of fsbench\'s compose files, at its default (generated by `npm run docs` from',
    '# the compose files and scripts/compose-variables.ts). Copy to .env beside compose.yaml and',
    '# uncomment what you change. PEM text (FSBENCH_REDIS_CA, FSBENCH_JOB_KEY) cannot be given here',
    '# to docker-compose 1.29: pass it from the shell, FSBENCH_JOB_KEY="$(cat job-key.pub.pem)".',
  ];
  for (const [name, list] of [...composeVariables()].sort(([a], [b]) => a.localeCompare(b))) {
    const main = list.find((u) => u.file === 'compose.yaml') ?? list[0];
    lines.push('', `# ${COMPOSE_VARIABLES[name] ?? ''}`, `# (${describeUses(list)})`, `#${name}=${main?.default ?? ''}`);
  }
  return `${lines.join('\n')}\n`;
}

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
  for (const g of GENERATED_FILES) {
    const full = path.join(root, g.file);
    const body = g.generate();
    if (existsSync(full) && readFileSync(full, 'utf8') === body) continue;
    writeFileSync(full, body);
    changed.push(g.file);
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
