/**
 * Sizes and durations as people write them in matrix files.
 *
 * Sizes are binary (IEC) only: `4KiB` is 4096 bytes. Decimal or ambiguous units (`4KB`, `4k`)
 * are refused rather than guessed, because a benchmark whose buffer is 2.4% off is a wrong one.
 * A bare number is bytes for a size and milliseconds for a duration.
 */

const SIZE_UNITS: Readonly<Record<string, number>> = {
  B: 1,
  KiB: 1024,
  MiB: 1024 ** 2,
  GiB: 1024 ** 3,
  TiB: 1024 ** 4,
};

const DURATION_UNITS: Readonly<Record<string, number>> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  min: 60_000,
  h: 3_600_000,
};

export const SIZE_UNIT_NAMES = Object.keys(SIZE_UNITS).join(', ');
export const DURATION_UNIT_NAMES = Object.keys(DURATION_UNITS).join(', ');

export type UnitParse = { ok: true; value: number } | { ok: false; reason: string };

function parseWithUnits(
  raw: unknown,
  units: Readonly<Record<string, number>>,
  unitNames: string,
  bareMeaning: string,
): UnitParse {
  if (typeof raw === 'number') {
    return Number.isFinite(raw)
      ? { ok: true, value: raw }
      : { ok: false, reason: 'is not a finite number' };
  }
  if (typeof raw !== 'string') {
    return { ok: false, reason: `must be a number (${bareMeaning}) or a string with a unit (${unitNames})` };
  }
  const m = /^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$/.exec(raw);
  if (!m) {
    return { ok: false, reason: `is not a number followed by a unit (${unitNames})` };
  }
  const [, digits = '', unit = ''] = m;
  if (unit === '') return { ok: true, value: Number(digits) };
  const factor = units[unit];
  if (factor === undefined) {
    return { ok: false, reason: `has unknown unit '${unit}' (use ${unitNames})` };
  }
  return { ok: true, value: Number(digits) * factor };
}

/** Parses `4096`, `"4KiB"`, `"1.5MiB"` into bytes. */
export function parseSize(raw: unknown): UnitParse {
  const r = parseWithUnits(raw, SIZE_UNITS, SIZE_UNIT_NAMES, 'bytes');
  if (r.ok && !Number.isInteger(r.value)) return { ok: false, reason: 'is not a whole number of bytes' };
  return r;
}

/** Parses `250`, `"250ms"`, `"3s"`, `"2m"` into milliseconds. */
export function parseDuration(raw: unknown): UnitParse {
  const r = parseWithUnits(raw, DURATION_UNITS, DURATION_UNIT_NAMES, 'milliseconds');
  if (r.ok && !Number.isInteger(r.value)) return { ok: false, reason: 'is not a whole number of milliseconds' };
  return r;
}

/** The shortest exact IEC spelling: 8388608 -> "8MiB", 1000 -> "1000B". */
export function formatSize(bytes: number): string {
  for (const unit of ['TiB', 'GiB', 'MiB', 'KiB'] as const) {
    const f = SIZE_UNITS[unit] ?? 1;
    if (bytes >= f && bytes % f === 0) return `${bytes / f}${unit}`;
  }
  return `${bytes}B`;
}

/** An amount of memory or space to the tenth of a GiB (or MiB), for messages that are read, not parsed: 1.5 GiB -> "1.5 GiB". */
export function formatAmount(bytes: number): string {
  const mib = bytes / 1024 ** 2;
  return mib >= 1024 ? `${(mib / 1024).toFixed(1)} GiB` : `${mib.toFixed(1)} MiB`;
}

/** The shortest exact spelling: 3000 -> "3s", 90000 -> "90s", 250 -> "250ms". */
export function formatDuration(ms: number): string {
  if (ms >= 1000 && ms % 1000 === 0) return `${ms / 1000}s`;
  return `${ms}ms`;
}

/** 0.46 -> 46%; one decimal below 10%, two significant digits below 0.1% (a share that is not 0). */
export function formatPercent(fraction: number | null | undefined): string {
  if (fraction === null || fraction === undefined || !Number.isFinite(fraction)) return '';
  const abs = Math.abs(fraction);
  if (abs > 0 && abs < 0.001) return `${(fraction * 100).toPrecision(2)}%`;
  return `${(fraction * 100).toFixed(abs < 0.1 ? 1 : 0)}%`;
}
