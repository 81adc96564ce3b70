/**
 * A machine's name from a file, for agents in containers. A container's hostname is its id, which
 * a recreated container does not keep: an agent named by it would become another machine at every
 * `docker compose up --force-recreate`, and its history would split. The host's /etc/hostname,
 * mounted read-only into the container (FSBENCH_MACHINE_FILE), names the machine as its owner does
 * and survives the container and a reboot.
 */
import { open, readFile } from 'node:fs/promises';
import os from 'node:os';
import { FsbenchError, errnoOf, messageOf } from '../contract/errors.js';

/**
 * FSBENCH_MACHINE's rule (settings/table.ts), which is also a Linux hostname's length
 * (HOST_NAME_MAX, 64): a name from a file is held to what the setting would accept.
 */
const MACHINE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** More than any hostname file holds: a file this long is not one (a device, a log), and is not read further. */
const MAX_BYTES = 4096;

/** Docker's and Podman's default hostname: the first 12 hex digits of the container's id. */
const SHORT_ID = /^[0-9a-f]{12}$/;

/**
 * Whether `name` is a container's id rather than a machine's name: 12 hex digits that are this
 * process's hostname, or whose full 64-digit id names a container directory in the mount table
 * (`/var/lib/docker/containers/<id>/hostname` is what the engine mounts at the container's
 * /etc/hostname; Podman's `overlay-containers/<id>/` likewise).
 */
export async function isContainerId(name: string, mountinfo = '/proc/self/mountinfo'): Promise<boolean> {
  if (!SHORT_ID.test(name)) return false;
  if (name === os.hostname()) return true;
  const mounts = await readFile(mountinfo, 'utf8').catch(() => '');
  return new RegExp(`containers/${name}[0-9a-f]{52}/`).test(mounts);
}

/**
 * The machine name in `file`, read as hostname(5) says: the first line that is neither empty nor
 * a comment, without surrounding blanks. Refused (CONFIG_INVALID, naming the file and what to
 * do) when the file cannot be read, names nothing, names what FSBENCH_MACHINE would refuse, or
 * names a container's id (the container's own /etc/hostname given by mistake for the host's).
 */
export async function readMachineName(file: string, mountinfo?: string): Promise<string> {
  const refuse = (why: string) =>
    new FsbenchError('CONFIG_INVALID', `FSBENCH_MACHINE_FILE ${JSON.stringify(file)} ${why}: mount the host's /etc/hostname there read-only, or set FSBENCH_MACHINE`);
  let text: string;
  try {
    const handle = await open(file, 'r');
    try {
      const buf = Buffer.alloc(MAX_BYTES + 1);
      let bytesRead = 0;
      while (bytesRead < buf.length) {
        const got = (await handle.read(buf, bytesRead, buf.length - bytesRead, null)).bytesRead;
        if (got === 0) break;
        bytesRead += got;
      }
      if (bytesRead > MAX_BYTES) throw refuse(`holds more than ${MAX_BYTES} bytes, which no hostname file does`);
      text = buf.subarray(0, bytesRead).toString('utf8');
    } finally {
      await handle.close();
    }
  } catch (err) {
    if (err instanceof FsbenchError) throw err;
    throw refuse(`cannot be read (${errnoOf(err) ?? messageOf(err)})`);
  }
  const name = text
    .split('\n')
    .map((l) => l.trim())
    .find((l) => l !== '' && !l.startsWith('#'));
  if (name === undefined) throw refuse('names no machine (it is empty, or holds only comments)');
  if (!MACHINE_NAME.test(name)) throw refuse(`names ${JSON.stringify(name.slice(0, 80))}, which is not 1-64 letters, digits, dots, dashes or underscores`);
  if (await isContainerId(name, mountinfo)) throw refuse(`names ${name}, a container's id, which a recreated container would not keep (is it the container's own /etc/hostname?)`);
  return name;
}
