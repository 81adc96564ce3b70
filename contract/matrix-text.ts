/** Matrix files and request bodies: YAML (a superset of JSON) parsed, then checked by the schema. */
import { parse as parseYaml } from 'yaml';
import { FsbenchError } from './errors.js';
import { annotationsWith, Annotations, parseMatrix, type Matrix } from './matrix.js';

/** Parses matrix text; `source` names the file or request in messages. */
export function parseMatrixText(text: string, source: string): Matrix {
  return parseMatrix(parseRaw(text, source));
}

function parseRaw(text: string, source: string): unknown {
  try {
    return parseYaml(text, { maxAliasCount: 100 });
  } catch (err) {
    const why = err instanceof Error ? err.message.split('\n')[0] : String(err);
    throw new FsbenchError('MATRIX_INVALID', `${source} is not valid YAML or JSON: ${why ?? ''}`);
  }
}

/**
 * Matrix text with `--annotate` pairs added to its annotations, as JSON (`fsbench submit`); the
 * text unchanged without pairs. Whatever else is wrong with the matrix is the coordinator's to
 * say, in the same words as without annotations.
 */
export function annotatedMatrixText(text: string, source: string, pairs: readonly string[]): string {
  if (pairs.length === 0) return text;
  const raw = parseRaw(text, source);
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return text;
  const own = Annotations.safeParse('annotations' in raw ? raw.annotations : {});
  if (!own.success) return text;
  return JSON.stringify({ ...raw, annotations: annotationsWith(own.data, pairs) });
}
