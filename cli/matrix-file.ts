/**
 * Where a matrix comes from: a file, or `example:NAME`, one of the matrices shipped in the
 * package's examples/ folder, so that an installed fsbench runs them from any directory
 * (`fsbench run example:inotify-quick`); `fsbench examples` lists them.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { FsbenchError, messageOf } from '../contract/errors.js';
import { parseMatrixText } from '../contract/matrix-text.js';
import { PACKAGE_ROOT } from '../host/native.js';

export const EXAMPLES_DIR = path.join(PACKAGE_ROOT, 'examples');
const PREFIX = 'example:';
/** An example's name: a file name in examples/ without `.yaml`, nothing that could leave the folder. */
const NAME = /^[a-z0-9][a-z0-9-]{0,63}$/;

export interface Example {
  readonly name: string;
  readonly file: string;
  /** The first line of its header comment: what it measures. */
  readonly summary: string;
}

/** Every shipped example, by name. */
export function listExamples(): Example[] {
  let files: string[];
  try {
    files = readdirSync(EXAMPLES_DIR).filter((f) => f.endsWith('.yaml')).sort();
  } catch (err) {
    throw new FsbenchError('INTERNAL', `this fsbench ships no examples folder at ${EXAMPLES_DIR}: ${messageOf(err)}`);
  }
  return files.map((f) => {
    const file = path.join(EXAMPLES_DIR, f);
    return { name: f.slice(0, -'.yaml'.length), file, summary: summaryOf(readFileSync(file, 'utf8')) };
  });
}

/** The first sentence of a matrix file's header comment, on one line. */
function summaryOf(text: string): string {
  const header: string[] = [];
  for (const line of text.split('\n')) {
    const m = /^#\s?(.*)$/.exec(line);
    if (!m || (m[1] ?? '').trim() === '') break;
    header.push((m[1] ?? '').trim());
  }
  const joined = header.join(' ');
  const end = joined.search(/\.(\s|$)/);
  return end < 0 ? joined : joined.slice(0, end + 1);
}

/** The file a matrix argument names: `example:NAME` resolved inside examples/, anything else as given. */
export function matrixPath(arg: string): string {
  if (!arg.startsWith(PREFIX)) return arg;
  const name = arg.slice(PREFIX.length);
  const known = listExamples();
  const found = NAME.test(name) ? known.find((e) => e.name === name) : undefined;
  if (!found) {
    throw new FsbenchError('MATRIX_FILE_UNREADABLE', `no example named ${JSON.stringify(name)}: ${known.map((e) => e.name).join(', ')} (fsbench examples lists them)`);
  }
  return found.file;
}

/** The text of a matrix argument (a file or `example:NAME`), and the path it was read from. */
export async function readMatrixSource(arg: string): Promise<{ text: string; file: string }> {
  const file = matrixPath(arg);
  try {
    return { text: await readFile(file, 'utf8'), file };
  } catch (err) {
    throw new FsbenchError('MATRIX_FILE_UNREADABLE', `cannot read matrix file ${file}: ${messageOf(err)}`);
  }
}

export async function readMatrixFile(arg: string) {
  const { text, file } = await readMatrixSource(arg);
  return parseMatrixText(text, file);
}
