/** Matrix files and request bodies: YAML (a superset of JSON) parsed, then checked by the schema. */
import { parse as parseYaml } from 'yaml';
import { FsbenchError } from './errors.js';
import { parseMatrix, type Matrix } from './matrix.js';

/** Parses matrix text; `source` names the file or request in messages. */
export function parseMatrixText(text: string, source: string): Matrix {
  let raw: unknown;
  try {
    raw = parseYaml(text, { maxAliasCount: 100 });
  } catch (err) {
    const why = err instanceof Error ? err.message.split('\n')[0] : String(err);
    throw new FsbenchError('MATRIX_INVALID', `${source} is not valid YAML or JSON: ${why ?? ''}`);
  }
  return parseMatrix(raw);
}
