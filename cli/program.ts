/**
 * The whole `fsbench` command tree, built apart from parsing: the CLI's entry point parses it,
 * and the reference (docs/reference.md's commands) and shell completion read it, so that every
 * command and flag they list is one the CLI has.
 */
import { Command } from 'commander';
import { FSBENCH_VERSION } from '../host/version.js';
import { registerCompareCommands } from './compare.js';
import { registerGateCommands } from './gate.js';
import { registerHistoryCommands } from './history.js';
import { registerLocalCommands } from './local.js';
import { registerOperateCommands } from './operate.js';
import { registerRemoteCommands } from './remote.js';
import { registerReportCommands } from './report.js';
import { registerSandboxCommands } from './sandbox.js';
import { registerCompletionCommand } from './completion.js';

export function buildProgram(): Command {
  const program = new Command('fsbench')
    .description('Distributed benchmarks of Linux filesystem behaviour: inotify throughput and metadata workloads')
    .version(FSBENCH_VERSION, '-V, --version', 'print the version of fsbench and exit')
    .showHelpAfterError()
    .configureOutput({ writeErr: (s) => process.stderr.write(s) })
    // Before the commands register: they inherit it, so a bad command line reaches the entry point's one exit.
    .exitOverride();
  registerLocalCommands(program);
  registerCompareCommands(program);
  registerGateCommands(program);
  registerHistoryCommands(program);
  registerReportCommands(program);
  registerRemoteCommands(program);
  registerOperateCommands(program);
  registerSandboxCommands(program);
  registerCompletionCommand(program);
  return program;
}
