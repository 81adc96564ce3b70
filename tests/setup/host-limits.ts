/**
 * Every test file leaves the kernel's inotify and fanotify limits as it found them, whether its tests passed
 * or not: a file that fails between an agent's change and its restore (a kill test, say) must not
 * hand the next files, or the next run, a machine whose limits they did not ask for. The limits
 * are host-wide, so this is restored here, after the file, and said on stderr when it was needed.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll } from 'vitest';

const LIMITS = [
  ...['max_queued_events', 'max_user_watches', 'max_user_instances'].map((n) => `/proc/sys/fs/inotify/${n}`),
  '/proc/sys/fs/fanotify/max_queued_events',
];
const before = new Map<string, string>();

function read(file: string): string | null {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}

beforeAll(() => {
  for (const file of LIMITS) {
    const v = read(file);
    if (v !== null) before.set(file, v);
  }
});

afterAll(() => {
  for (const [file, value] of before) {
    const now = read(file);
    if (now === null || now === value) continue;
    try {
      writeFileSync(file, value);
      process.stderr.write(`host-limits: a test file left ${file} at ${now.trim()}; put back to ${value.trim()}\n`);
    } catch (err) {
      process.stderr.write(`host-limits: ${file} is ${now.trim()}, not ${value.trim()}, and cannot be put back: ${err instanceof Error ? err.message : String(err)}\n`);
    }
  }
});
