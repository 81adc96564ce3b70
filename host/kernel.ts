/**
 * Facts read from the kernel about this host that several modules need: its boot id (host
 * identity) and its mount table. One reader each, so the parsing (octal escapes in mount points)
 * is right in one place.
 */
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';

const BOOT_ID = '/proc/sys/kernel/random/boot_id';

/** The kernel's boot id, or null where /proc does not say (two agents with one id share a kernel). */
export async function readBootId(): Promise<string | null> {
  return readFile(BOOT_ID, 'utf8').then(
    (s) => s.trim(),
    () => null,
  );
}

export interface Mount {
  readonly source: string;
  readonly point: string;
  readonly type: string;
  readonly options: string;
}

/** The kernel writes spaces and other separators in mount fields as octal escapes (\040). */
function unescape(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

function parseMounts(text: string): Mount[] {
  return text.split('\n').flatMap((line) => {
    const [source, point, type, options] = line.split(' ');
    return source && point && type && options !== undefined ? [{ source: unescape(source), point: unescape(point), type, options }] : [];
  });
}

/** This process's mount table (/proc/self/mounts). */
export async function readMounts(): Promise<Mount[]> {
  return parseMounts(await readFile('/proc/self/mounts', 'utf8'));
}

/** The filesystem type of the mount holding `path` (the longest matching mount point), or null. */
export function filesystemType(path: string): string | null {
  let mounts: Mount[];
  try {
    mounts = parseMounts(readFileSync('/proc/self/mounts', 'utf8'));
  } catch {
    return null;
  }
  let best: Mount | null = null;
  for (const m of mounts) {
    const inside = path === m.point || path.startsWith(m.point.endsWith('/') ? m.point : `${m.point}/`);
    if (inside && (!best || m.point.length >= best.point.length)) best = m;
  }
  return best?.type ?? null;
}
