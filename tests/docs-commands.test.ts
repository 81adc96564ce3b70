/**
 * The commands the README and docs/ give are the commands a user types, and they run as written.
 *
 * - Every ```sh block that reads committed data (`docs/data/...`) is run verbatim with bash, in a
 *   fresh directory laid out as a checkout after `npm ci` (`docs/` and `npx fsbench`), and must
 *   succeed. Such a block may only unpack, filter and report (gunzip, grep, `fsbench report`,
 *   `compare`, `history`): anything longer to run belongs in a block of its own. Every file of
 *   docs/data is read by one of them, so a study and its data cannot part.
 * - Every other `fsbench ...`, `npm run ...` and `node dist/...` command, in a block or inline
 *   code, names a command, script or file that exists, with options it accepts: the long
 *   benchmarks and matrices are not run here, but they are checked against `--help` and the
 *   benchmarks' own option lists.
 *
 * The commands are read from the Markdown each time, so the docs and this test cannot drift.
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { semanticsTables } from '../bench/semantics-table.js';
import { readRunsFile } from '../report/runs-file.js';
import { freshCli } from './helpers/local.js';

const ROOT = path.join(import.meta.dirname, '..');
const MARKDOWN = ['README.md', ...readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');
const run = promisify(execFile);

interface Block {
  readonly file: string;
  /** 1-based line of the opening fence. */
  readonly line: number;
  readonly text: string;
}

/** The ```sh (or ```bash, ```shell) blocks of a Markdown text. */
function shellBlocks(file: string, text: string): Block[] {
  const blocks: Block[] = [];
  for (const m of text.matchAll(/^(`{3,})(?:sh|bash|shell)[ \t]*\n([\s\S]*?)^\1[ \t]*$/gm)) {
    const line = text.slice(0, m.index).split('\n').length;
    blocks.push({ file, line, text: m[2] ?? '' });
  }
  return blocks;
}

/** The inline code spans outside fenced blocks. */
function inlineCode(text: string): string[] {
  const prose = text.replace(/^(`{3,}|~{3,})[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '');
  return [...prose.matchAll(/(`+)([^`][\s\S]*?)\1/g)].map((m) => (m[2] ?? '').replace(/\s+/g, ' ').trim());
}

/** A block's commands: one per line, comments dropped, continued lines joined. */
function commandLines(block: string): string[] {
  return block
    .replace(/\\\n\s*/g, ' ')
    .split('\n')
    .map((l) => l.replace(/(^|\s)#.*$/, '').trim())
    .filter((l) => l !== '');
}

/** What a command line is made of, split where a shell would start another command. */
function segments(line: string): string[][] {
  return line
    .split(/\s*(?:\|\||&&|[|;&])\s*/)
    .map((s) => s.split(/\s+/).filter((t) => t !== ''))
    .filter((s) => s.length > 0);
}

/** Long options of a command segment, up to its first redirection: `--name` without `=value` or brackets. */
function longOptions(tokens: readonly string[]): string[] {
  const end = tokens.findIndex((t) => /^\d?>/.test(t) || t === '<');
  return (end < 0 ? tokens : tokens.slice(0, end))
    .map((t) => t.replace(/^[[(]+/, '').replace(/[\])]+$/, ''))
    .filter((t) => /^--[a-z][a-z0-9-]*/.test(t))
    .map((t) => t.replace(/=.*$/, ''));
}

/** The lines of the reproduce blocks that read committed data, and what each may run. */
const RUNNABLE = /^(?:gunzip -c docs\/data\/[\w.-]+\.jsonl\.gz > [\w.-]+\.jsonl|grep '[^']+' [\w.-]+\.jsonl(?: \| grep '[^']+')? > [\w.-]+\.jsonl|npx fsbench (?:report|compare|history) [^|;&]*)$/;

const BLOCKS = MARKDOWN.flatMap((file) => shellBlocks(file, read(file)));
const DATA_BLOCKS = BLOCKS.filter((b) => b.text.includes('docs/data/'));

let cli = '';
const helpCache = new Map<string, string>();

/** `fsbench <path...> --help`, the compiled CLI's own. */
function help(words: readonly string[]): string {
  const key = words.join(' ');
  const cached = helpCache.get(key);
  if (cached !== undefined) return cached;
  const text = execFileSync(process.execPath, [cli, ...words, '--help'], { encoding: 'utf8' });
  helpCache.set(key, text);
  return text;
}

/** The sub-commands a help text lists under "Commands:". */
function subcommands(helpText: string): Set<string> {
  const section = helpText.split(/^Commands:\s*$/m)[1] ?? '';
  return new Set([...section.matchAll(/^ {2}([a-z][\w-]*)/gm)].map((m) => m[1] ?? ''));
}

/** Why an `fsbench ...` command segment would not run as written, or null. */
function fsbenchProblem(tokens: readonly string[]): string | null {
  // The command, not a Kubernetes namespace of that name (`kubectl -n fsbench ...`).
  const at = tokens.findIndex((t, i) => t === 'fsbench' && tokens[i - 1] !== '-n' && tokens[i - 1] !== '--namespace');
  if (at < 0) return null;
  const args = tokens.slice(at + 1);
  const words: string[] = [];
  for (const arg of args) {
    if (arg.startsWith('-') || arg.startsWith('[') || arg.startsWith('<')) break;
    const known = subcommands(help(words));
    if (!known.has(arg)) {
      if (words.length === 0) return `no command '${arg}'`;
      break;
    }
    words.push(arg);
  }
  // `fsbench --version`, or `fsbench <command> --help`: a placeholder stands for any command.
  if (words.length === 0) return args.length === 0 || args[0]?.startsWith('-') || args[0]?.startsWith('<') ? null : `no command '${args[0] ?? ''}'`;
  const accepted = help(words);
  const unknown = longOptions(args).filter((o) => !new RegExp(`(^|[\\s,])${o}(?![\\w-])`, 'm').test(accepted));
  return unknown.length === 0 ? null : `fsbench ${words.join(' ')} has no option ${unknown.join(', ')}`;
}

const SCRIPTS = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts;

/** Why an `npm run ...` command segment would not run as written, or null. */
function npmRunProblem(tokens: readonly string[]): string | null {
  const at = tokens.indexOf('run');
  const name = tokens[at + 1] ?? '';
  const script = SCRIPTS[name];
  if (script === undefined) return `no npm script '${name}'`;
  const dashes = tokens.indexOf('--', at);
  if (dashes < 0) return null;
  const entry = /dist\/(\S+)\.js/.exec(script)?.[1];
  if (entry === undefined) return `npm run ${name} takes no options`;
  const source = read(`${entry}.ts`);
  const unknown = longOptions(tokens.slice(dashes + 1)).filter((o) => !new RegExp(`['"]?\\b${o.slice(2)}['"]?\\s*:\\s*\\{\\s*type:`).test(source));
  return unknown.length === 0 ? null : `${entry}.ts has no option ${unknown.join(', ')}`;
}

/** Why a command line (or inline command) would not run as written: its problems. */
function problemsOf(line: string): string[] {
  return segments(line).flatMap((tokens) => {
    const why: (string | null)[] = [];
    if (tokens.includes('fsbench')) why.push(fsbenchProblem(tokens));
    const npm = tokens.indexOf('npm');
    if (npm >= 0 && tokens[npm + 1] === 'run') why.push(npmRunProblem(tokens.slice(npm)));
    for (const t of tokens) {
      const dist = /^dist\/([\w/.-]+)\.js$/.exec(t)?.[1];
      if (dist !== undefined && !existsSync(path.join(ROOT, `${dist}.ts`))) why.push(`${t}: no source ${dist}.ts`);
      const example = /^(?:\.\.\/)?(examples\/[\w/.-]+\.ya?ml)$/.exec(t)?.[1];
      if (example !== undefined && !existsSync(path.join(ROOT, example))) why.push(`no file ${example}`);
    }
    return why.filter((w): w is string => w !== null);
  });
}

describe('the commands in README and docs', () => {
  beforeAll(async () => {
    cli = await freshCli();
  }, 180_000);

  it('give every study its reproduce block, reading every file of docs/data', () => {
    const studies = ['docs/seed-000-inotify.md', 'docs/seed-001-metadata.md', 'docs/fanotify-vs-inotify.md', 'docs/watches.md', 'docs/what-watchers-report.md'];
    expect(studies.filter((f) => !DATA_BLOCKS.some((b) => b.file === f))).toEqual([]);
    const data = readdirSync(path.join(ROOT, 'docs', 'data'));
    expect(data.length).toBeGreaterThan(0);
    expect(data.filter((f) => !DATA_BLOCKS.some((b) => b.text.includes(`docs/data/${f}`)))).toEqual([]);
  });

  it('keep the blocks that read committed data to unpacking, filtering and reports', () => {
    const others = DATA_BLOCKS.flatMap((b) => commandLines(b.text).filter((l) => !RUNNABLE.test(l)).map((l) => `${b.file}:${String(b.line)}: ${l}`));
    expect(others).toEqual([]);
  });

  describe('that read committed data, run verbatim', () => {
    let dir = '';
    beforeAll(() => {
      dir = mkdtempSync(path.join(os.tmpdir(), 'fsbench-docs-'));
    });
    afterAll(() => {
      rmSync(dir, { recursive: true, force: true });
    });

    it.each(DATA_BLOCKS.map((b) => [`${b.file}:${String(b.line)}`, b] as const))('%s', async (_, block) => {
      // A checkout after `npm ci`, as far as these commands see it: its docs/ and `npx fsbench`.
      const cwd = path.join(dir, `${path.basename(block.file, '.md')}-${String(block.line)}`);
      mkdirSync(path.join(cwd, 'node_modules', '.bin'), { recursive: true });
      symlinkSync(path.join(ROOT, 'docs'), path.join(cwd, 'docs'));
      // The bin npm gives a package: the compiled CLI run by this Node (tsc leaves it without an execute bit).
      writeFileSync(path.join(cwd, 'node_modules', '.bin', 'fsbench'), `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(cli)} "$@"\n`, { mode: 0o755 });
      const { stdout } = await run('bash', ['-e', '-o', 'pipefail', '-c', block.text], {
        cwd,
        // npx must find the local fsbench and never ask a registry.
        env: { ...process.env, npm_config_offline: 'true', npm_config_update_notifier: 'false', NO_COLOR: '1' },
        maxBuffer: 64 * 1024 ** 2,
      });
      // Every file the block writes is there and not empty.
      const written = [...block.text.matchAll(/(?:> |--html )([\w.-]+\.(?:jsonl|csv|md|html))/g)].map((m) => m[1] ?? '');
      expect(written.filter((f) => !existsSync(path.join(cwd, f)) || readFileSync(path.join(cwd, f)).length === 0)).toEqual([]);
      if (/npx fsbench (?:report \S+\.jsonl\s*$|compare)/m.test(block.text)) expect(stdout).toMatch(/\S/);
    }, 120_000);
  });

  it('name commands, scripts, options and files that exist', () => {
    const lines = [
      ...BLOCKS.flatMap((b) => commandLines(b.text).map((l) => ({ where: `${b.file}:${String(b.line)}`, l }))),
      ...MARKDOWN.flatMap((file) =>
        inlineCode(read(file))
          .filter((c) => /^(?:npx )?fsbench \S|^npm run \S|^node dist\//.test(c))
          .map((l) => ({ where: `${file} (inline)`, l })),
      ),
    ];
    expect(lines.length).toBeGreaterThan(50);
    const problems = lines.flatMap(({ where, l }) => problemsOf(l).map((p) => `${where}: ${l}: ${p}`));
    expect(problems).toEqual([]);
    // The checker itself: commands it must refuse.
    expect(problemsOf('npx fsbench report runs.jsonl --no-such-option')).toHaveLength(1);
    expect(problemsOf('fsbench no-such-command')).toHaveLength(1);
    expect(problemsOf('fsbench agents token --no-such-option')).toHaveLength(1);
    expect(problemsOf('npm run bench:dispatch -- --cells 10 --no-such-option')).toHaveLength(1);
    expect(problemsOf('npm run no-such-script')).toHaveLength(1);
    expect(problemsOf('node dist/bench/no-such-bench.js')).toHaveLength(1);
    expect(problemsOf('npx fsbench run examples/no-such.yaml --out x.jsonl')).toHaveLength(1);
    expect(problemsOf('npx fsbench compare a.jsonl b.jsonl --metric createMs,statMs --format md')).toEqual([]);
    expect(problemsOf('fsbench <command> --help')).toEqual([]);
  });

  /** `fsbench report` of the committed watchers data, as a user unpacks and reads it. */
  async function watchersReport(): Promise<string> {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'fsbench-docs-'));
    try {
      const file = path.join(dir, 'watchers.jsonl');
      execFileSync('bash', ['-c', `gunzip -c docs/data/watchers.jsonl.gz > ${file}`], { cwd: ROOT });
      return (await run(process.execPath, [cli, 'report', file])).stdout;
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  it('quote the watchers figures the committed data gives', async () => {
    const stdout = await watchersReport();
    // The raw reader's events, fs.watch's share of them, and the libraries' one event per file.
    expect(stdout).toMatch(/backend=inotify watch=dir mark=inode\s+eventsPerSec[^\n]*\n\s+events\s+3\s+437479\s/);
    expect(stdout).toMatch(/41% in backend=fswatch/);
    expect(stdout).toMatch(/backend=parcel[^\n]*\n\s+events\s+3\s+128\s/);
    for (const doc of ['docs/workloads.md', 'docs/fanotify-vs-inotify.md']) {
      expect(read(doc), doc).toContain('437,479');
      expect(read(doc), doc).toMatch(/41%/);
    }
  }, 60_000);

  it('quote the tables of what each watcher reports as the committed data gives them', async () => {
    const page = read('docs/what-watchers-report.md');
    const dir = mkdtempSync(path.join(os.tmpdir(), 'fsbench-docs-'));
    try {
      for (const study of ['semantics-gentle', 'semantics-storm']) {
        // Unpacked as a user does, then read as `fsbench report` reads it.
        const file = path.join(dir, `${study}.jsonl`);
        execFileSync('bash', ['-c', `gunzip -c docs/data/${study}.jsonl.gz > ${file}`], { cwd: ROOT });
        const tables = semanticsTables(await readRunsFile(file), study);
        // Eight backends by fifteen kinds, each row a backend's measured recall or what stopped it.
        expect(tables.split('\n').filter((l) => /^\| `[\w-]+` \| (?:\d+%|failed)/.test(l)).length, study).toBeGreaterThanOrEqual(8 * 2);
        expect(page, study).toContain(tables);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('show the summary `fsbench run` and `fsbench report` print today', async () => {
    const printed = (await watchersReport()).split('\n');
    const example = /^## What a report looks like[\s\S]*?^```\n([\s\S]*?)^```/m.exec(read('README.md'))?.[1]?.split('\n') ?? [];
    expect(example.length).toBeGreaterThan(10);
    // The lines that do not depend on the cells: the matrix's description, the run count's
    // warning and the table's columns.
    const anyCells = (l: string | undefined) => (l ?? '').replace(/^\d+ cells on \S+;/, 'N cells on M;');
    expect(anyCells(example[1])).toBe(anyCells(printed[1]));
    expect(example[2]).toBe(printed[2]);
    expect(example[4]?.split(/\s+/)).toEqual(printed[4]?.split(/\s+/));
  }, 60_000);
});
