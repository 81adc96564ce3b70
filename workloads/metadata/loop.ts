/**
 * Loop devices and the kernel's words about a refused mount. In a container /dev is a static
 * copy: the kernel can hand out /dev/loop9 while no such node exists, so one is made from the
 * device number sysfs reports.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { FsbenchError } from '../../contract/errors.js';
import { command } from './command.js';

const LOOP_CONTROL = '/dev/loop-control';

/** Its major:minor from sysfs; loop minors shift with max_part, so 7:N is only the usual case. */
async function deviceNumber(name: string, index: string): Promise<[string, string]> {
  try {
    const [major, minor] = (await readFile(`/sys/block/${name}/dev`, 'utf8')).trim().split(':');
    if (major !== undefined && minor !== undefined) return [major, minor];
  } catch {
    // No sysfs entry readable: fall through to the usual numbering.
  }
  return ['7', index];
}

/** Makes sure the loop device `mount -o loop` is about to take exists as a node. */
export async function ensureFreeLoopDevice(): Promise<void> {
  const hasControl = existsSync(LOOP_CONTROL);
  const found = await command('losetup', ['--find']);
  if (!found.ok) {
    if (found.missing) throw new FsbenchError('LOOP_UNAVAILABLE', 'losetup is not installed (Debian package mount)');
    if (/permission denied|not permitted/i.test(found.output)) {
      throw new FsbenchError('PRIVILEGE_MISSING', `loop devices need root (CAP_SYS_ADMIN): ${found.output}`);
    }
    throw new FsbenchError(
      'LOOP_UNAVAILABLE',
      `no free loop device: ${found.output}. ` +
        (hasControl
          ? 'Detach unused ones (losetup -D) or raise the loop module\'s max_loop.'
          : `${LOOP_CONTROL} is missing: load the loop module (modprobe loop), or in a container add ${LOOP_CONTROL} ` +
            "as a device with a device cgroup rule 'b 7:* rmw'."),
    );
  }
  const device = found.stdout.trim();
  const m = /^\/dev\/(loop(\d+))$/.exec(device);
  if (!m?.[1] || !m[2]) throw new FsbenchError('LOOP_UNAVAILABLE', `losetup --find printed '${device}', not a loop device`);
  if (existsSync(device)) return;
  if (!hasControl) {
    throw new FsbenchError('LOOP_UNAVAILABLE', `${device} does not exist and ${LOOP_CONTROL} is missing: load the loop module`);
  }
  const [major, minor] = await deviceNumber(m[1], m[2]);
  const made = await command('mknod', ['-m', '0660', device, 'b', major, minor]);
  if (!made.ok && !existsSync(device)) {
    throw new FsbenchError(
      'LOOP_UNAVAILABLE',
      `${device} is free but has no device node, and creating it failed: ${made.output} (needs CAP_MKNOD and a device cgroup rule 'b 7:* rmw')`,
    );
  }
}

async function kernelLog(): Promise<string[] | null> {
  const r = await command('dmesg', [], 10_000);
  return r.ok ? r.stdout.split('\n').filter((l) => l !== '') : null;
}

/** The kernel log's last line now ('' when empty), or null when it cannot be read (dmesg_restrict). */
export async function kernelLogMark(): Promise<string | null> {
  const lines = await kernelLog();
  return lines === null ? null : (lines.at(-1) ?? '');
}

/** The filesystem lines the kernel logged after `mark`. */
export async function kernelLogSince(mark: string | null): Promise<string[]> {
  if (mark === null) return [];
  const lines = (await kernelLog()) ?? [];
  // The ring buffer rotates, so the mark is found by content, not by position.
  const after = lines.lastIndexOf(mark);
  return lines
    .slice(after >= 0 ? after + 1 : -20)
    .filter((l) => /XFS \(|EXT4-fs|BTRFS/.test(l))
    .map((l) => l.replace(/^\[\s*[\d.]+\]\s*/, ''))
    .slice(-5);
}
