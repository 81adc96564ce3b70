#!/usr/bin/env node
/**
 * The fsbench command line. Each command lives in its own module and registers itself in
 * cli/program.ts; this file owns the single exit point that turns any error into one clear line, `fsbench:
 * <message> [<CODE>]`, and the exit code the contract's catalog gives that code.
 */
import { CommanderError } from 'commander';
import { ERRORS, errorLine, FsbenchError, toFsbenchError } from '../contract/errors.js';
import { buildProgram } from './program.js';

const program = buildProgram();

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
