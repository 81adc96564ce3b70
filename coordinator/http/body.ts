/**
 * The one body parser. A route that takes a body names which kind it takes; the body is then
 * admitted by its media type before a byte of it is read, and read by the parser of that type.
 * Whatever the route cannot take (another media type, none, a charset or a Content-Encoding the
 * parser does not decode) gets one 415 answer, worded one way: what to send instead. Too large a
 * body is 413 and a body that is not what its type says is 400, both in the error handler.
 */
import express, { type Request, type RequestHandler } from 'express';
import YAML from 'yaml';
import { FsbenchError, messageOf } from '../../contract/errors.js';

const JSON_TYPES = ['application/json'];
const YAML_TYPES = ['application/yaml', 'application/x-yaml', 'text/yaml', 'text/x-yaml'];
/** The media types of a `.jsonl` file; nothing a cross-site form can send (text/plain, form encodings). */
const JSON_LINES_TYPES = ['application/x-ndjson', 'application/jsonl'];

/**
 * The bodies routes take: a matrix (any JSON value, the matrix schema says what is wrong with
 * it; or YAML), a JSON object of a request, a `.jsonl` file of runs (as text, checked line by line).
 */
const KINDS = {
  matrix: { what: 'the matrix', json: JSON_TYPES, text: YAML_TYPES, strict: false },
  json: { what: 'the request', json: JSON_TYPES, text: [], strict: true },
  jsonl: { what: 'the .jsonl file', json: [], text: JSON_LINES_TYPES, strict: true },
} as const satisfies Record<string, { what: string; json: readonly string[]; text: readonly string[]; strict: boolean }>;
export type BodyKind = keyof typeof KINDS;

/** The 415 answer: what the route takes (the first name of each type it reads), and what it was sent instead. */
function unsupported(kind: BodyKind, sent: string): FsbenchError {
  const { what, json, text } = KINDS[kind];
  const names = [json[0], text[0]].filter((t) => t !== undefined);
  return new FsbenchError('UNSUPPORTED_MEDIA_TYPE', `send ${what} as ${names.join(' or ')}, not ${sent}`);
}

/** A body-parser's refusal of a charset or a Content-Encoding, as the 415 answer; anything else as it is. */
function refusalOf(kind: BodyKind, err: unknown): unknown {
  if (typeof err !== 'object' || err === null) return err;
  const e = err as { type?: unknown; charset?: unknown; encoding?: unknown };
  if (e.type === 'charset.unsupported') return unsupported(kind, `charset ${String(e.charset)}`);
  if (e.type === 'encoding.unsupported') return unsupported(kind, `Content-Encoding ${String(e.encoding)}`);
  return err;
}

/** A parser whose refusals of a charset or an encoding are the one 415 answer. */
function answering(kind: BodyKind, parser: RequestHandler): RequestHandler {
  return (req, res, next) => {
    void parser(req, res, (err?: unknown) => {
      next(err === undefined ? undefined : refusalOf(kind, err));
    });
  };
}

/**
 * The handlers that admit and read a body of `kind` into `req.body`, at most `limit` bytes: JSON
 * as its value, YAML and JSON lines as text.
 */
export function readBody(kind: BodyKind, limit: number | string): RequestHandler[] {
  const k = KINDS[kind];
  const types: readonly string[] = [...k.json, ...k.text];
  const admit: RequestHandler = (req, _res, next) => {
    if (!req.is(types as string[])) throw unsupported(kind, req.get('content-type') ?? 'no Content-Type');
    next();
  };
  return [
    admit,
    ...(k.json.length > 0 ? [answering(kind, express.json({ limit, strict: k.strict, type: [...k.json] }))] : []),
    ...(k.text.length > 0 ? [answering(kind, express.text({ limit, type: [...k.text] }))] : []),
  ];
}

/** The matrix a read body holds: the JSON value, or the YAML parsed (aliases bounded against a billion laughs). */
export function matrixOf(req: Request): unknown {
  const body: unknown = req.body;
  if (req.is(YAML_TYPES)) {
    if (typeof body !== 'string' || body.trim() === '') throw new FsbenchError('BODY_INVALID', 'the body is empty: send a matrix');
    try {
      return YAML.parse(body, { maxAliasCount: 100 });
    } catch (err) {
      throw new FsbenchError('BODY_INVALID', `the body is not valid YAML: ${messageOf(err)}`);
    }
  }
  if (body === undefined) throw new FsbenchError('BODY_INVALID', 'the body is empty: send a matrix');
  return body;
}
