#!/usr/bin/env node
/**
 * The fsbench command line. Each command lives in its own module and registers itself here;
 * this file owns the single exit point that turns any error into one clear line, `fsbench:
 * <message> [<CODE>]`, and the exit code the contract's catalog gives that code.
 */
import { Command, CommanderError } from 'commander';
import { ERRORS, errorLine, FsbenchError, toFsbenchError } from '../contract/errors.js';
import { registerCompareCommands } from './compare.js';
import { registerGateCommands } from './gate.js';
import { registerHistoryCommands } from './history.js';
import { registerLocalCommands } from './local.js';
import { registerOperateCommands } from './operate.js';
import { registerRemoteCommands } from './remote.js';
import { registerReportCommands } from './report.js';
import { registerSandboxCommands } from './sandbox.js';
import { FSBENCH_VERSION } from '../host/version.js';

const program = new Command('fsbench')
  .description('Distributed benchmarks of Linux filesystem behaviour: inotify throughput and metadata workloads')
  .version(FSBENCH_VERSION, '-V, --version', 'print the version of fsbench and exit')
  .showHelpAfterError()
  .configureOutput({ writeErr: (s) => process.stderr.write(s) })
  // Before the commands register: they inherit it, so a bad command line reaches the exit point below.
  .exitOverride();

registerLocalCommands(program);
registerCompareCommands(program);
registerGateCommands(program);
registerHistoryCommands(program);
registerReportCommands(program);
registerRemoteCommands(program);
registerOperateCommands(program);
registerSandboxCommands(program);

// A reader that went away (`fsbench report runs.jsonl | head`) is no error of ours: stop writing,
// quietly, with the exit code as it stands. Nothing is written to stdout before a run's cleanup.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code !== 'EPIPE') throw err;
  process.exit(process.exitCode ?? 0);
});

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) {
    // Commander has printed its message (or the help) already; a bad command line is bad input.
    process.exitCode = err.exitCode === 0 ? 0 : ERRORS.CONFIG_INVALID.exit;
  } else {
    const e = toFsbenchError(err);
    const where = e.code === 'INTERNAL' && err instanceof Error && !(err instanceof FsbenchError) ? ` (${err.name})` : '';
    process.stderr.write(`fsbench: ${errorLine(e.code, `${e.message}${where}`)}\n`);
    process.exitCode = e.exitCode;
  }
}
