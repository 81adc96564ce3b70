/**
 * Reading settings at start: a flag, else the environment, else the table's default; a secret
 * also from a file. A missing or malformed setting stops the process with one line naming it,
 * never showing a secret's value.
 */
import { closeSync, openSync, readSync } from 'node:fs';
import type { z } from 'zod';
import { FsbenchError, errnoOf as contractErrnoOf } from '../contract/errors.js';
import { fileFlagOf, flagName, type Setting } from './kinds.js';
import { SETTINGS, type SettingName, type SettingsOf } from './table.js';

/** Most bytes a secret file may hold: a token, a URL or a PEM key, never a whole disk (`/dev/zero`). */
const MAX_SECRET_FILE_BYTES = 64 * 1024;

/**
 * A secret setting's file, read whole: without its one trailing newline (`echo secret > file`),
 * an error naming the file and why, never what it holds. Any file works (a Docker or Kubernetes
 * secret, `<(pass show ...)`), up to MAX_SECRET_FILE_BYTES.
 */
function readSecretFile(file: string, source: string): string {
  const refuse = (why: string) => new FsbenchError('CONFIG_INVALID', `${source} names ${JSON.stringify(file)}, which ${why}`);
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch (err) {
    throw refuse(`cannot be read (${errnoOf(err)})`);
  }
  const buf = Buffer.alloc(MAX_SECRET_FILE_BYTES + 1);
  let n = 0;
  try {
    let got = -1;
    while (got !== 0 && n < buf.length) {
      got = readSync(fd, buf, n, buf.length - n, null);
      n += got;
    }
  } catch (err) {
    throw refuse(`cannot be read (${errnoOf(err)})`);
  } finally {
    closeSync(fd);
  }
  if (n > MAX_SECRET_FILE_BYTES) throw refuse(`holds more than ${MAX_SECRET_FILE_BYTES / 1024} KiB: not a secret of fsbench's`);
  const text = buf.subarray(0, n).toString('utf8').replace(/\r?\n$/, '');
  if (text === '') throw refuse('is empty');
  return text;
}

/** The code of a failed system call (ENOENT, EACCES, EISDIR): its message would be fine too, but the code is all that helps. */
function errnoOf(err: unknown): string {
  return contractErrnoOf(err) ?? String(err);
}

const unset = (v: string | undefined) => (v === '' ? undefined : v);

/**
 * Where a setting's raw value comes from, first found wins: its flag, its file flag, its
 * environment variable, its `_FILE` variable. A secret given twice at one level (flag and file
 * flag, or variable and `_FILE`) is refused rather than one silently winning; a secret's flag
 * that would show the secret on the command line is refused, naming the alternatives.
 */
function rawSetting(name: string, s: Setting<z.ZodType>, flags: Readonly<Record<string, unknown>>, env: NodeJS.ProcessEnv): { raw: unknown; source: string } {
  const flag = flagName(s);
  const fromFlag = flags[name];
  if (s.secret !== true) {
    return fromFlag !== undefined ? { raw: fromFlag, source: flag } : { raw: unset(env[s.env]), source: s.env };
  }
  const fileFlag = fileFlagOf(s);
  const fileEnv = `${s.env}_FILE`;
  const fromFileFlag = flags[`${name}File`];
  if (fromFlag !== undefined && fromFileFlag !== undefined) throw new FsbenchError('CONFIG_INVALID', `${flag} and ${fileFlag} are both given: use one`);
  if (typeof fromFlag === 'string') {
    const revealed = s.revealedBy ? s.revealedBy(fromFlag) : 'the secret';
    if (revealed !== undefined) {
      throw new FsbenchError(
        'CONFIG_INVALID',
        `${flag} would put ${revealed} on the command line, where every user of this machine can read it (ps, /proc/<pid>/cmdline): ` +
          `use ${fileFlag} <path>, ${fileEnv}=<path> or ${s.env}${s.secretHint === undefined ? '' : `, ${s.secretHint}`}`,
      );
    }
  }
  if (fromFlag !== undefined) return { raw: fromFlag, source: flag };
  if (typeof fromFileFlag === 'string') return { raw: readSecretFile(fromFileFlag, fileFlag), source: `${fileFlag} ${JSON.stringify(fromFileFlag)}` };
  const fromEnv = unset(env[s.env]);
  const fromFileEnv = unset(env[fileEnv]);
  if (fromEnv !== undefined && fromFileEnv !== undefined) throw new FsbenchError('CONFIG_INVALID', `${s.env} and ${fileEnv} are both set: unset one`);
  if (fromFileEnv !== undefined) return { raw: readSecretFile(fromFileEnv, fileEnv), source: `${fileEnv} ${JSON.stringify(fromFileEnv)}` };
  return { raw: fromEnv, source: s.env };
}

/**
 * Reads the named settings: a CLI flag value wins over the environment, which wins over the
 * default; a secret may also come from a file (rawSetting). Throws CONFIG_INVALID naming the
 * variable (or flag, or file) and the reason.
 */
export function loadSettings<K extends SettingName>(
  names: readonly K[],
  flags: Readonly<Record<string, unknown>> = {},
  env: NodeJS.ProcessEnv = process.env,
): SettingsOf<K> {
  const out: Record<string, unknown> = {};
  for (const name of names) {
    const s: Setting<z.ZodType> = SETTINGS[name];
    const { raw, source } = rawSetting(name, s, flags, env);
    const r = s.schema.safeParse(raw);
    if (!r.success) {
      const why = r.error.issues.map((i) => i.message).join('; ');
      // A malformed secret is most often a real one mistyped: the message must not carry it.
      const value = s.secret === true ? '(value not shown: it is secret)' : JSON.stringify(raw);
      throw new FsbenchError('CONFIG_INVALID', `${source} ${value} is invalid: ${why}`);
    }
    out[name] = r.data;
  }
  return out as SettingsOf<K>;
}
