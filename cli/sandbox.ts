/**
 * `fsbench run-cell`, hidden: the entry point of a sandbox run container. It prints exactly one
 * JSON line (a SandboxOutput) on stdout, whatever happens; logs go to stderr.
 */
import type { Command } from 'commander';
import { runInside } from '../sandbox/inner.js';
import { JOURNAL_DIR, WORK_DIR } from '../sandbox/protocol.js';

interface RunCellFlags {
  readonly scratch: string;
  readonly journal: string;
}

async function runCellCommand(cellJson: string, flags: RunCellFlags): Promise<void> {
  const controller = new AbortController();
  // `docker stop` sends SIGTERM: stop measuring, restore the kernel limits, still report.
  const stop = () => {
    controller.abort();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  try {
    const output = await runInside(cellJson, {
      scratchDir: flags.scratch,
      journalDir: flags.journal,
      signal: controller.signal,
      log: (line) => process.stderr.write(`fsbench run-cell: ${line}\n`),
    });
    process.stdout.write(`${JSON.stringify(output)}\n`);
    if (!output.ok) process.exitCode = 1;
  } finally {
    process.off('SIGTERM', stop);
    process.off('SIGINT', stop);
  }
}

export function registerSandboxCommands(program: Command): void {
  program
    .command('run-cell', { hidden: true })
    .description('(internal) run one cell given as JSON in this process and print its outcome as one JSON line')
    .argument('<cell>', 'the cell as JSON')
    .option('--scratch <dir>', 'where the run makes its files', WORK_DIR)
    .option('--journal <dir>', 'the journal of host changes', JOURNAL_DIR)
    .action(runCellCommand);
}
