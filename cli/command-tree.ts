/** Walking the command tree: what the reference and shell completion list of it. */
import type { Command } from 'commander';

/** The subcommands a user is shown: not the hidden ones (`run-cell`, what sandbox containers run), nor `help`. */
export function visibleCommands(c: Command): Command[] {
  return c.createHelp().visibleCommands(c).filter((s) => s.name() !== 'help');
}

/** A command and its subcommands, depth first, each with its full name (`agents approve`). */
export function commandsOf(program: Command): { readonly name: string; readonly command: Command }[] {
  const out: { name: string; command: Command }[] = [];
  const walk = (c: Command, prefix: string) => {
    for (const sub of visibleCommands(c)) {
      const name = `${prefix}${sub.name()}`;
      out.push({ name, command: sub });
      walk(sub, `${name} `);
    }
  };
  walk(program, '');
  return out;
}
