#!/usr/bin/env node
/**
 * The fsbench command line. Each command lives in its own module and registers itself here;
 * this file owns the single exit point that turns any error into one clear line.
 */
import { Command } from 'commander';
import { FsbenchError, toFsbenchError } from '../contract/errors.js';
import { registerCompareCommands } from './compare.js';
import { registerLocalCommands } from './local.js';
import { registerRemoteCommands } from './remote.js';
import { registerSandboxCommands } from './sandbox.js';

const program = new Command('fsbench')
  .description('Distributed benchmarks of Linux filesystem behaviour: inotify throughput and metadata workloads')
  .showHelpAfterError()
  .configureOutput({ writeErr: (s) => process.stderr.write(s) });

registerLocalCommands(program);
registerCompareCommands(program);
registerRemoteCommands(program);
registerSandboxCommands(program);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  const e = toFsbenchError(err);
  const where = e.code === 'INTERNAL' && err instanceof Error && !(err instanceof FsbenchError) ? ` (${err.name})` : '';
  process.stderr.write(`fsbench: ${e.message}${where} [${e.code}]\n`);
  process.exitCode = e.httpStatus < 500 ? 2 : 1;
}
