/**
 * `fsbench completion bash|zsh`: a completion script written from the command tree itself, so
 * it offers exactly the commands, flags and flag values this fsbench has. zsh gets the same
 * script through zsh's bashcompinit, which runs bash completion functions.
 */
import { Argument, Command } from 'commander';
import { FsbenchError } from '../contract/errors.js';
import { visibleCommands } from './command-tree.js';

/** A name bash may hold in a case pattern or a word list: what commander allows in command and flag names. */
const SAFE = /^[A-Za-z0-9._:=-]+$/;

function words(list: readonly string[]): string {
  for (const w of list) if (!SAFE.test(w)) throw new FsbenchError('INTERNAL', `cannot put ${JSON.stringify(w)} into a completion script`);
  return list.join(' ');
}

interface Node {
  readonly path: string;
  readonly subs: readonly string[];
  readonly flags: readonly string[];
  /** Flags that take one of a fixed list of values, and those values. */
  readonly choices: readonly { readonly flags: readonly string[]; readonly values: readonly string[] }[];
  /** The values the command's first argument may take, when it names them (`completion <shell>`). */
  readonly argument: readonly string[];
}

function nodes(program: Command): Node[] {
  const out: Node[] = [];
  const walk = (c: Command, path: string) => {
    const flags = c.options.flatMap((o) => [o.short, o.long].filter((f): f is string => f !== undefined));
    out.push({
      path,
      subs: visibleCommands(c).map((s) => s.name()),
      flags: [...flags, '-h', '--help'],
      argument: c.registeredArguments[0]?.argChoices ?? [],
      choices: c.options.filter((o) => (o.argChoices?.length ?? 0) > 0).map((o) => ({ flags: [o.short, o.long].filter((f): f is string => f !== undefined), values: o.argChoices ?? [] })),
    });
    for (const s of visibleCommands(c)) walk(s, path === '' ? s.name() : `${path} ${s.name()}`);
  };
  walk(program, '');
  return out;
}

/** A bash function that echoes the words for its first argument, one case a key. */
function lookup(name: string, rows: readonly (readonly [key: string, words: readonly string[]])[]): string {
  return [`${name}() {`, '  case "$1" in', ...rows.map(([key, list]) => `    ${key}) echo "${words(list)}" ;;`), '  esac', '}'].join('\n');
}

export function bashCompletion(program: Command): string {
  const all = nodes(program);
  const at = (path: string) => `"${path}"`;
  return `# bash completion for fsbench ${program.version() ?? ''}: eval "$(fsbench completion bash)" in ~/.bashrc
${lookup('_fsbench_subs', all.filter((n) => n.subs.length > 0).map((n) => [at(n.path), n.subs]))}
${lookup('_fsbench_flags', all.map((n) => [at(n.path), n.flags]))}
${lookup('_fsbench_choices', all.flatMap((n) => n.choices.map((c) => [c.flags.map((f) => at(`${n.path}:${f}`)).join('|'), c.values] as const)))}
${lookup('_fsbench_argument', all.filter((n) => n.argument.length > 0).map((n) => [at(n.path), n.argument]))}
_fsbench() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="\${COMP_WORDS[COMP_CWORD-1]}" path="" i w
  # The command path so far: each word that is a subcommand of the path before it.
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    case " $(_fsbench_subs "$path") " in
      *" $w "*) path="\${path:+$path }$w" ;;
    esac
  done
  # The first that offers anything: a flag's values, flags (when one is begun), subcommands, the argument's values.
  local values
  for values in "$(_fsbench_choices "$path:$prev")" "$([[ "$cur" == -* ]] && _fsbench_flags "$path")" "$(_fsbench_subs "$path")" "$(_fsbench_argument "$path")"; do
    if [[ -n "$values" ]]; then
      COMPREPLY=($(compgen -W "$values" -- "$cur"))
      return
    fi
  done
  COMPREPLY=($(compgen -f -- "$cur"))
}
complete -o filenames -F _fsbench fsbench
`;
}

export function zshCompletion(program: Command): string {
  return `#compdef fsbench
# zsh completion for fsbench: eval "$(fsbench completion zsh)" in ~/.zshrc (after compinit)
autoload -U +X bashcompinit && bashcompinit
${bashCompletion(program)}`;
}

export function registerCompletionCommand(program: Command): void {
  program
    .command('completion')
    .description('print a shell completion script: eval "$(fsbench completion bash)" in ~/.bashrc, or zsh in ~/.zshrc')
    .addArgument(new Argument('<shell>', 'the shell').choices(['bash', 'zsh']))
    .action((shell: 'bash' | 'zsh') => {
      process.stdout.write(shell === 'bash' ? bashCompletion(program) : zshCompletion(program));
    });
}
