/**
 * FSBENCH_MACHINE_FILE: a machine's name read from a hostname file (host/machine-name.ts), as an
 * agent in a container reads the host's /etc/hostname. Real files in a temporary directory; the
 * container-id check against a mount table written as the engine's looks.
 */
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isContainerId, readMachineName } from '../host/machine-name.js';
import { loadSettings } from '../settings/index.js';
import { tempDir } from './helpers/local.js';

const tmp = tempDir('fsbench-machine-name-');
afterAll(() => {
  tmp.remove();
});

let n = 0;
function file(content: string | Buffer): string {
  n += 1;
  const f = path.join(tmp.dir, `hostname-${n}`);
  writeFileSync(f, content);
  return f;
}

/** A mount table with the engine's bind of a container's hostname file, as /proc/self/mountinfo shows it. */
const ID = 'c0ffee0123456789abcdef0123456789abcdef0123456789abcdef0123456789';
const mountinfo = file(
  [
    '1210 1190 0:80 / / rw,relatime master:1 - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/X',
    `1225 1210 254:1 /var/lib/docker/containers/${ID}/hostname /etc/hostname rw,relatime - ext4 /dev/vda1 rw`,
    '',
  ].join('\n'),
);

describe('readMachineName', () => {
  it('takes the first line that is not empty or a comment, without blanks around it', async () => {
    expect(await readMachineName(file('lab-a\n'))).toBe('lab-a');
    expect(await readMachineName(file('# set by the installer\n\n  lab-b.example  \nignored\n'))).toBe('lab-b.example');
    expect(await readMachineName(file('no-newline'))).toBe('no-newline');
  });

  it('refuses a file that is missing, empty, only comments, or not a file at all, naming it and the way out', async () => {
    const missing = path.join(tmp.dir, 'absent');
    await expect(readMachineName(missing)).rejects.toThrow(`FSBENCH_MACHINE_FILE "${missing}" cannot be read (ENOENT): mount the host's /etc/hostname there read-only, or set FSBENCH_MACHINE`);
    await expect(readMachineName(tmp.dir)).rejects.toThrow('cannot be read (EISDIR)');
    await expect(readMachineName(file(''))).rejects.toThrow('names no machine');
    await expect(readMachineName(file('# only\n   \n#this\n'))).rejects.toThrow('names no machine');
  });

  it("holds the name to FSBENCH_MACHINE's rule, and says so", async () => {
    const longest = `a${'b'.repeat(63)}`;
    expect(await readMachineName(file(`${longest}\n`))).toBe(longest);
    expect(loadSettings(['machine'], {}, { FSBENCH_MACHINE: longest }).machine).toBe(longest);
    for (const bad of [`${longest}c`, 'has space', '-leading-dash', 'naïve', 'a/b']) {
      await expect(readMachineName(file(`${bad}\n`))).rejects.toThrow('which is not 1-64 letters, digits, dots, dashes or underscores');
      expect(() => loadSettings(['machine'], {}, { FSBENCH_MACHINE: bad })).toThrow('FSBENCH_MACHINE');
    }
  });

  it('reads no more than a hostname file could hold', async () => {
    await expect(readMachineName(file(`lab\n${'#'.repeat(5000)}\n`))).rejects.toThrow('holds more than 4096 bytes');
    expect(await readMachineName(file(`lab\n${'#'.repeat(4000)}\n`))).toBe('lab');
    // A device that never ends is not read to its end.
    await expect(readMachineName('/dev/zero')).rejects.toThrow('holds more than 4096 bytes');
  });

  it("refuses a container's id: the container's own /etc/hostname given for the host's", async () => {
    const short = ID.slice(0, 12);
    await expect(readMachineName(file(`${short}\n`), mountinfo)).rejects.toThrow(`names ${short}, a container's id`);
    expect(await isContainerId(short, mountinfo)).toBe(true);
    // 12 hex digits that are no container's here are a name like any other.
    expect(await isContainerId('0123456789ab', mountinfo)).toBe(os.hostname() === '0123456789ab');
    expect(await isContainerId('lab-a', mountinfo)).toBe(false);
    expect(await readMachineName(file('abcdef012345\n'), mountinfo)).toBe('abcdef012345');
  });
});

describe('the FSBENCH_MACHINE_FILE setting', () => {
  it('takes an absolute path, and is unset when empty', () => {
    expect(loadSettings(['machineFile'], {}, { FSBENCH_MACHINE_FILE: '/run/fsbench-host/hostname' }).machineFile).toBe('/run/fsbench-host/hostname');
    expect(loadSettings(['machineFile'], {}, { FSBENCH_MACHINE_FILE: '' }).machineFile).toBeUndefined();
    expect(() => loadSettings(['machineFile'], {}, { FSBENCH_MACHINE_FILE: 'hostname' })).toThrow('FSBENCH_MACHINE_FILE "hostname" is invalid: must be an absolute path');
  });
});
