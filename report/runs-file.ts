/**
 * Reading `.jsonl` result files (one `RunResult` per line, as `fsbench run --out` writes them),
 * streamed line by line so a file of any size costs memory per cell, not per run. Every line is
 * checked by the schema; bad lines are reported together, each with its number and reason.
 */
import { createReadStream } from 'node:fs';
import { access } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { FsbenchError } from '../contract/errors.js';
import { RunResult } from '../contract/result.js';

/** Most bad lines named in one error; the rest are counted. */
const MAX_REPORTED = 10;

export interface LineProblem {
  readonly line: number;
  readonly message: string;
}

/** Parses one line: the run, or why it is not one (the first few schema issues, with their paths). */
export function parseRunLine(text: string): { ok: true; run: RunResult } | { ok: false; message: string } {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    return { ok: false, message: `not JSON (${err instanceof Error ? err.message : String(err)})` };
  }
  const r = RunResult.safeParse(json);
  if (r.success) return { ok: true, run: r.data };
  const issues = r.error.issues.slice(0, 3).map((i) => `${i.path.map(String).join('.') || '(run)'}: ${i.message}`);
  const more = r.error.issues.length > 3 ? ` (and ${r.error.issues.length - 3} more)` : '';
  return { ok: false, message: `not a RunResult: ${issues.join('; ')}${more}` };
}

export function describeProblems(source: string, problems: readonly LineProblem[], total: number): string {
  const shown = problems.slice(0, MAX_REPORTED).map((p) => `line ${p.line}: ${p.message}`);
  const rest = total > shown.length ? [`... and ${total - shown.length} more bad lines`] : [];
  return `${source}: ${total} line${total === 1 ? ' is' : 's are'} not fsbench results:\n  ${[...shown, ...rest].join('\n  ')}`;
}

/**
 * Every valid run of `file`, as the file is read. Throws CONFIG_INVALID after the last line
 * naming each bad line (up to 10), so nothing built from a file with a bad line is used; also
 * when the file cannot be read or holds no runs.
 */
export async function* runsOfFile(file: string): AsyncGenerator<RunResult> {
  try {
    await access(file);
  } catch (err) {
    throw new FsbenchError('CONFIG_INVALID', `cannot read results file ${file}: ${err instanceof Error ? err.message : String(err)}`);
  }
  const problems: LineProblem[] = [];
  let bad = 0;
  let runs = 0;
  let line = 0;
  const input = createReadStream(file, { encoding: 'utf8' });
  const lines = createInterface({ input, crlfDelay: Infinity });
  try {
    for await (const text of lines) {
      line++;
      if (text.trim() === '') continue;
      const r = parseRunLine(text);
      if (r.ok) {
        runs++;
        yield r.run;
      } else {
        bad++;
        if (problems.length < MAX_REPORTED) problems.push({ line, message: r.message });
      }
    }
  } catch (err) {
    if (err instanceof FsbenchError) throw err;
    throw new FsbenchError('CONFIG_INVALID', `cannot read results file ${file}: ${err instanceof Error ? err.message : String(err)}`);
  } finally {
    lines.close();
    input.destroy();
  }
  if (bad > 0) throw new FsbenchError('CONFIG_INVALID', describeProblems(file, problems, bad), problems.map((p) => ({ path: `line ${p.line}`, message: p.message })));
  if (runs === 0) throw new FsbenchError('CONFIG_INVALID', `${file} holds no runs: expected one RunResult per line, as written by 'fsbench run --out'`);
}

/** Every run of a file, in memory (for uploads, which send them anyway). */
export async function readRunsFile(file: string): Promise<RunResult[]> {
  const runs: RunResult[] = [];
  for await (const r of runsOfFile(file)) runs.push(r);
  return runs;
}
