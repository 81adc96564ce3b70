/**
 * Every test file leaves the kernel's inotify and fanotify limits as it found them, whether its tests passed
 * or not: a file that fails between an agent's change and its restore (a kill test, say) must not
 * hand the next files, or the next run, a machine whose limits they did not ask for. The limits
 * are host-wide, so this is restored here, after the file; and a file that needed it fails: what
 * it left behind is a bug (a restore fsbench missed, or a test's), not something to tidy quietly.
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
  const left: string[] = [];
  for (const [file, value] of before) {
    const now = read(file);
    if (now === null || now === value) continue;
    try {
      writeFileSync(file, value);
      left.push(`left ${file} at ${now.trim()} (put back to ${value.trim()})`);
    } catch (err) {
      left.push(`left ${file} at ${now.trim()}, not ${value.trim()}, and it cannot be put back: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  // Every limit is restored first, then the file fails: the next file starts on the limits it expects.
  if (left.length > 0) throw new Error(`host-limits: this test file ${left.join('; ')}`);
});
