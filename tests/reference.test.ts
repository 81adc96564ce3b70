/**
 * The generated reference and what is generated beside it: every command and flag of the CLI in
 * docs/reference.md (the section itself is compared with its generator by tests/readme.test.ts),
 * every compose variable documented once with the defaults the compose files give, `.env.example`
 * as `npm run docs` writes it, and the shell completion, run in real bash and zsh.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { commandsOf } from '../cli/command-tree.js';
import { buildProgram } from '../cli/program.js';
import { PACKAGE_ROOT } from '../host/native.js';
import { COMPOSE_VARIABLES } from '../scripts/compose-variables.js';
import { composeVariables, docPath, GENERATED_FILES, readSection } from '../scripts/docs.js';
import { freshCli } from './helpers/local.js';

const exec = promisify(execFile);
let cli = '';

beforeAll(async () => {
  cli = await freshCli();
});

describe('the reference', () => {
  const reference = readFileSync(docPath('docs/reference.md'), 'utf8');
  const commands = readSection(reference, 'commands', 'docs/reference.md');

  it('names every command and every flag of each, under the command', () => {
    const all = commandsOf(buildProgram());
    // The tree the CLI parses: its top-level commands and the `agents` subcommands at least.
    expect(all.map((c) => c.name)).toEqual(expect.arrayContaining(['run', 'gate', 'submit', 'list', 'status', 'cancel', 'examples', 'completion', 'agents approve', 'agents token']));
    for (const { name, command } of all) {
      const start = commands.indexOf(`### \`fsbench ${name}\`\n`);
      expect(start, name).toBeGreaterThanOrEqual(0);
      const next = commands.indexOf('\n### ', start + 1);
      const block = commands.slice(start, next < 0 ? undefined : next);
      for (const o of command.options) expect(block, `fsbench ${name} ${o.flags}`).toContain(`\`${o.flags}\``);
    }
  });

  it('documents every variable of the compose files once, with the default each file gives it', () => {
    const used = composeVariables();
    expect(used.size).toBeGreaterThan(10);
    expect([...used.keys()].filter((v) => COMPOSE_VARIABLES[v] === undefined)).toEqual([]);
    expect(Object.keys(COMPOSE_VARIABLES).filter((v) => !used.has(v))).toEqual([]);
    const table = readSection(reference, 'compose-variables', 'docs/reference.md');
    // Read from the files, not restated: compose.yaml's own default for the coordinator's port.
    const publish = /^\s+- "\$\{FSBENCH_PUBLISH:-([^}]+)\}:8080"$/m.exec(readFileSync(path.join(PACKAGE_ROOT, 'compose.yaml'), 'utf8'));
    expect(publish?.[1]).toBeDefined();
    expect(table).toContain(`| \`FSBENCH_PUBLISH\` | compose.yaml: \`${publish?.[1] ?? ''}\` |`);
    expect(table).toMatch(/^\| `REDIS_URL` \| compose\.yaml: `redis:\/\/redis:6379`; compose\.agent\.yaml: required \|/m);
  });

  it.each(GENERATED_FILES.map((g) => [g.file, g] as const))('%s is as npm run docs writes it', (_name, g) => {
    expect(readFileSync(path.join(PACKAGE_ROOT, g.file), 'utf8')).toBe(g.generate());
  });
});

describe('fsbench completion', () => {
  /** What bash offers after the words typed so far (the last one being completed). */
  async function complete(shellWords: string[]): Promise<string[]> {
    const script = `eval "$("$FSBENCH_NODE" "$FSBENCH_CLI" completion bash)"
COMP_WORDS=(${shellWords.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${String(shellWords.length - 1)}
_fsbench; printf '%s\\n' "\${COMPREPLY[@]}"`;
    const { stdout } = await exec('bash', ['--norc', '--noprofile', '-c', script], { env: { ...process.env, FSBENCH_NODE: process.execPath, FSBENCH_CLI: cli }, cwd: PACKAGE_ROOT });
    return stdout.split('\n').filter((l) => l !== '');
  }

  it('completes commands, subcommands, flags and flag values in bash', async () => {
    expect(await complete(['fsbench', 'ru'])).toEqual(['run']);
    expect((await complete(['fsbench', 'run', '--allow'])).sort()).toEqual(['--allow-failures', '--allowed-targets']);
    expect(await complete(['fsbench', 'gate', 'a.jsonl', 'b.jsonl', '--format', 'ju'])).toEqual(['junit']);
    expect((await complete(['fsbench', 'agents', 'a'])).sort()).toEqual(['acl', 'approve']);
    expect(await complete(['fsbench', 'agents', 'token', '--c'])).toEqual(['--count']);
    expect(await complete(['fsbench', 'completion', ''])).toEqual(['bash', 'zsh']);
    // A file argument completes files.
    expect(await complete(['fsbench', 'run', 'examples/inotify-q'])).toEqual(['examples/inotify-quick.yaml']);
  });

  it('loads in zsh as a completion function', async () => {
    const { stdout } = await exec('zsh', ['-f', '-c', 'autoload -U compinit && compinit -u -D; eval "$("$FSBENCH_NODE" "$FSBENCH_CLI" completion zsh)"; whence -w _fsbench'], {
      env: { ...process.env, FSBENCH_NODE: process.execPath, FSBENCH_CLI: cli },
    });
    expect(stdout.trim()).toBe('_fsbench: function');
  });

  it('refuses a shell it does not know', async () => {
    const r = await exec(process.execPath, [cli, 'completion', 'fish']).catch((err: unknown) => err);
    expect(r).toMatchObject({ code: 2, stderr: expect.stringMatching(/value 'fish' is invalid for argument 'shell'\. Allowed choices are bash, zsh/) as string });
  });
});
