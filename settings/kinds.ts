/**
 * What a row of the settings table holds, and the kinds of values settings take: durations and
 * sizes as people write them, switches, node lists, host names.
 */
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { formatDuration, formatSize, parseDuration, parseSize, type UnitParse } from '../contract/units.js';

export interface Setting<T extends z.ZodType> {
  readonly env: string;
  readonly flag: string;
  readonly schema: T;
  /** Shown in docs; the schema's own default is what applies. */
  readonly default: string;
  readonly doc: string;
  /**
   * Its value is a secret: never shown in an error (nor a log), even when it is malformed. It can
   * also come from a file (`<ENV>_FILE`, `--<flag>-file`), and its flag, which every user of the
   * machine can read in /proc/<pid>/cmdline, is refused when it would carry the secret.
   */
  readonly secret?: boolean;
  /**
   * For a secret setting whose flag may also hold something harmless (a path, a URL without a
   * password): what a flag value reveals (`a password`), or undefined when it reveals nothing.
   * Without it every value of a secret setting's flag is the secret.
   */
  readonly revealedBy?: (flagValue: string) => string | undefined;
  /** Said after the file alternatives when the flag is refused. */
  readonly secretHint?: string;
}

/** The flag's name without its argument: `--token`. */
export const flagName = (s: Setting<z.ZodType>) => s.flag.split(' ')[0] ?? s.flag;

/** `--token-file`: where a secret setting's flag takes a file instead. */
export const fileFlagOf = (s: Setting<z.ZodType>) => `${flagName(s)}-file`;

export const port = z.coerce.number().int().min(0).max(65535);

/** A quantity in a unit (bare digits are the base unit), bounded, with the bounds written as people write them. */
function quantity(parse: (raw: unknown) => UnitParse, format: (n: number) => string, min: number, max: number) {
  return z
    .union([z.number(), z.string()])
    .transform((raw, ctx) => {
      const r = parse(/^\d+$/.test(String(raw)) ? Number(raw) : raw);
      if (!r.ok) {
        ctx.addIssue({ code: 'custom', message: r.reason });
        return z.NEVER;
      }
      return r.value;
    })
    .pipe(z.number().min(min, `must be at least ${format(min)}`).max(max, `must be at most ${format(max)}`));
}

/** A duration as people write it (`250ms`, `2s`, or bare milliseconds), in milliseconds. */
export const duration = (min: number, max: number) => quantity(parseDuration, formatDuration, min, max);

/** A size as people write it (`1MiB`, or bare bytes), in bytes. */
export const size = (min: number, max: number) => quantity(parseSize, formatSize, min, max);

export const url = z.url({ protocol: /^https?$/ });

/** Whether a URL carries a password; one that does not parse is judged by its shape, to be safe. */
export function urlPassword(text: string): boolean {
  try {
    return new URL(text).password !== '';
  } catch {
    return /^[a-z][a-z0-9+.-]*:\/\/[^/@]*:[^/@]*@/i.test(text);
  }
}

/** `a,b , c` as a list, without empty entries. */
export const commaList = (s: string) => s.split(',').map((x) => x.trim()).filter((x) => x !== '');

/** A DNS name as a Host header carries it: labels of letters, digits and dashes. */
export const HOST_NAME = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/;

/** `host:port,...` (IPv6 in brackets, `defaultPort` when left out), as the Sentinel and Cluster settings take their nodes. */
export function addressList(defaultPort: number, what: string) {
  return z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined) return undefined;
      const out: { host: string; port: number }[] = [];
      for (const entry of commaList(v)) {
        const m = /^(?:\[([0-9a-f:.]+)\]|([^:[\]\s]+))(?::(\d{1,5}))?$/i.exec(entry);
        const host = m?.[1] ?? m?.[2];
        const p = Number(m?.[3] ?? defaultPort);
        if (host === undefined || p < 1 || p > 65535) {
          ctx.addIssue({ code: 'custom', message: `${JSON.stringify(entry)} is not host:port (an IPv6 address in brackets)` });
          return z.NEVER;
        }
        out.push({ host, port: p });
      }
      if (out.length === 0) {
        ctx.addIssue({ code: 'custom', message: `names no ${what}` });
        return z.NEVER;
      }
      return out;
    });
}

/** A switch from the environment (`1`, `true`, `yes`; `0`, `false`, `no`) or a flag without a value. */
export const toggle = z
  .union([z.boolean(), z.enum(['1', '0', 'true', 'false', 'yes', 'no'])])
  .default(false)
  .transform((v) => v === true || v === '1' || v === 'true' || v === 'yes');

/**
 * The default scratch directory: one that only the user fsbench runs as can change, never a
 * shared path such as /tmp/fsbench that another local user could create first (and then steer
 * what root writes and removes there; see host/safe-dir.ts).
 */
export function defaultScratch(): string {
  if (process.geteuid?.() === 0) return '/var/lib/fsbench';
  const state = process.env['XDG_STATE_HOME'];
  return path.join(state !== undefined && path.isAbsolute(state) ? state : path.join(os.homedir(), '.local', 'state'), 'fsbench');
}

