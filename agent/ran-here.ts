/**
 * What has run on this host, by job nonce: the record admission.ts reads before a run and
 * writes after it. Kept in the agent's state directory (only root controls it), one directory per
 * day the jobs expire on (`done/<day>/`), so whole days are pruned once past.
 *
 * Each agent process appends to a file of its own in the day's directory (`runs-*.log`), one line
 * per run, `<nonce> <signed report>\n`, synced with fdatasync before the report leaves; it reads
 * the other agents' files of the host (they share the state directory) from where it stopped
 * reading. This replaced a file per run, created and synced each time: the new inode and directory
 * entry were half of what an agent added to a run in `npm run bench:dispatch`, for the same
 * durability. Files named after a nonce alone are such markers from before, still honoured.
 *
 * A crash while a line is written leaves it without its newline, at the end of a file nobody
 * appends to again (a new process writes a new file): lines are read up to the last newline only,
 * so a torn one is never taken for a run.
 */
import { randomBytes } from 'node:crypto';
import { constants as fsConstants, lstatSync, promises as fs, statSync, writeSync } from 'node:fs';
import path from 'node:path';
import { errnoOf } from '../contract/errors.js';

/** Where a run's report is: a byte range of a journal, or a whole old-style marker file. */
interface Place {
  readonly file: string;
  readonly offset: number;
  /** -1: the whole file (an old-style marker). */
  readonly length: number;
}

/** What is known of one day's directory. */
interface Day {
  readonly dir: string;
  readonly places: Map<string, Place>;
  /** Other writers' journals: bytes read so far, up to a newline. */
  readonly readTo: Map<string, number>;
  /** The directory's mtime when last listed: a new file (a new writer, an old marker) changes it. */
  listedAt: number;
  /**
   * Whether that listing was made over a second after the mtime it saw. A filesystem whose clock
   * is coarse (a jiffy, before Linux 6.13's fine-grained timestamps) can give a file created just
   * after a listing the very same mtime; listed again until the directory has been still a while.
   */
  settled: boolean;
  /** This process's journal of the day, once it wrote one run. */
  own?: { readonly name: string; readonly handle: fs.FileHandle; size: number };
}

const JOURNAL = /^runs-[A-Za-z0-9_-]+\.log$/;
const NONCE = /^[A-Za-z0-9_-]{22}$/;
/** Bytes read from a journal at a time while catching up, and the longest line looked for. */
const CHUNK = 4 * 1024 * 1024;
const MAX_LINE = 64 * 1024 * 1024;
/** How long after its mtime a directory's listing is taken as complete (see Day.settled). */
const SETTLED_MS = 1000;
const SPACE = 0x20;
const NEWLINE = 0x0a;

export class RanHere {
  private readonly days = new Map<string, Day>();
  /** This process's journals: a name of its own each, so no two processes append to one file. */
  private readonly ownNames = new Set<string>();
  private writing: Promise<void> = Promise.resolve();

  constructor(private readonly root: string) {}

  /** The report text recorded for `nonce` under `day`, or null when it did not run here. */
  async lookup(day: string, nonce: string): Promise<string | null> {
    const d = this.day(day);
    let place = d.places.get(nonce);
    if (place === undefined) {
      await this.catchUp(d);
      place = d.places.get(nonce);
    }
    return place === undefined ? null : this.read(d.dir, place);
  }

  /** Forgets what was recorded for `nonce` (unreadable: cut short by a crash), deleting an old-style marker. */
  async forget(day: string, nonce: string): Promise<void> {
    const d = this.day(day);
    const place = d.places.get(nonce);
    d.places.delete(nonce);
    if (place?.length === -1) await fs.rm(path.join(d.dir, place.file), { force: true });
  }

  /**
   * Records that `nonce` ran with `report` (one line of JSON, no newline) under `day`, durably:
   * the line is on the disk before this resolves.
   */
  record(day: string, nonce: string, report: string): Promise<void> {
    // One at a time: each line's place is where the one before it ended.
    const done = this.writing.then(() => this.append(day, nonce, report));
    this.writing = done.catch(() => undefined);
    return done;
  }

  private async append(day: string, nonce: string, report: string): Promise<void> {
    const d = this.day(day);
    const own = d.own ?? (await this.openOwn(d));
    const line = Buffer.from(`${nonce} ${report}\n`);
    // Synchronous as the stats are (see catchUp): the sync after it is what takes time, and stays async.
    const bytesWritten = writeSync(own.handle.fd, line, 0, line.length, null);
    if (bytesWritten !== line.length) {
      // A short write (a full disk): the next line would run into this one, so the next run starts a new file.
      delete d.own;
      await own.handle.close().catch(() => undefined);
      throw new Error(`recording run ${nonce} in ${path.join(d.dir, own.name)}: ${bytesWritten} of ${line.length} bytes written`);
    }
    // Where the line is, counted before the sync: a failed sync leaves it in the file all the same.
    const at = own.size;
    own.size += line.length;
    await own.handle.datasync();
    d.places.set(nonce, { file: own.name, offset: at + nonce.length + 1, length: line.length - nonce.length - 2 });
  }

  /** Removes the day directories before day `keepFrom`. */
  async prune(keepFrom: number): Promise<void> {
    const names = await fs.readdir(this.root).catch(() => [] as string[]);
    for (const name of names) {
      if (!/^\d+$/.test(name) || Number(name) >= keepFrom) continue;
      await this.days.get(name)?.own?.handle.close().catch(() => undefined);
      this.days.delete(name);
      await fs.rm(path.join(this.root, name), { recursive: true, force: true });
    }
  }

  async close(): Promise<void> {
    for (const d of this.days.values()) await d.own?.handle.close().catch(() => undefined);
    this.days.clear();
  }

  private day(day: string): Day {
    let d = this.days.get(day);
    if (d === undefined) {
      d = { dir: path.join(this.root, day), places: new Map(), readTo: new Map(), listedAt: -1, settled: false };
      this.days.set(day, d);
    }
    return d;
  }

  private async openOwn(d: Day): Promise<NonNullable<Day['own']>> {
    const name = `runs-${process.pid}-${randomBytes(6).toString('base64url')}.log`;
    const file = path.join(d.dir, name);
    const flags = fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_WRONLY | fsConstants.O_APPEND | fsConstants.O_NOFOLLOW;
    const handle = await fs.open(file, flags, 0o600).catch(async (err: unknown) => {
      if (errnoOf(err) !== 'ENOENT') throw err;
      await fs.mkdir(d.dir, { recursive: true, mode: 0o700 });
      return fs.open(file, flags, 0o600);
    });
    // The new name must outlive a crash as the lines in it do.
    const dir = await fs.open(d.dir, fsConstants.O_RDONLY | fsConstants.O_DIRECTORY | fsConstants.O_NOFOLLOW);
    try {
      await dir.sync();
    } finally {
      await dir.close();
    }
    this.ownNames.add(name);
    d.own = { name, handle, size: 0 };
    return d.own;
  }

  /**
   * Reads what other writers appended since the last look, and lists the directory if it changed.
   * Its stats are synchronous: a few microseconds each against tens for a trip through libuv's
   * pool, on the path of every run; the directory is the agent's own, on a local disk.
   */
  private async catchUp(d: Day): Promise<void> {
    const dirStat = statSync(d.dir, { throwIfNoEntry: false });
    if (dirStat === undefined) return;
    if (dirStat.mtimeMs !== d.listedAt || !d.settled) {
      const listedWhen = Date.now();
      d.listedAt = dirStat.mtimeMs;
      for (const name of await fs.readdir(d.dir)) {
        if (this.ownNames.has(name) || d.readTo.has(name) || d.places.has(name)) continue;
        if (JOURNAL.test(name)) d.readTo.set(name, 0);
        else if (NONCE.test(name)) d.places.set(name, { file: name, offset: 0, length: -1 });
      }
      d.settled = listedWhen - dirStat.mtimeMs > SETTLED_MS;
    }
    for (const [name, from] of d.readTo) d.readTo.set(name, await this.scan(d, name, from));
  }

  /** Indexes the complete lines of journal `name` from byte `from`; returns where the next look starts. */
  private async scan(d: Day, name: string, from: number): Promise<number> {
    const file = path.join(d.dir, name);
    // Most looks find nothing new: one stat, no open.
    const st = lstatSync(file, { throwIfNoEntry: false });
    const size = st?.isFile() === true ? st.size : from;
    if (size <= from) return from;
    let handle: fs.FileHandle;
    try {
      handle = await fs.open(file, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
    } catch (err) {
      if (errnoOf(err) === 'ENOENT') return from;
      throw err;
    }
    try {
      let at = from;
      let buf = Buffer.alloc(Math.min(CHUNK, size - from));
      while (at < size) {
        const { bytesRead } = await handle.read(buf, 0, Math.min(buf.length, size - at), at);
        if (bytesRead === 0) break;
        const chunk = buf.subarray(0, bytesRead);
        const lastNewline = chunk.lastIndexOf(NEWLINE);
        if (lastNewline < 0) {
          // A line longer than the buffer: a bigger one, up to what a report can be; or a line still being written.
          if (bytesRead < buf.length || buf.length >= MAX_LINE) break;
          buf = Buffer.alloc(Math.min(MAX_LINE, buf.length * 2));
          continue;
        }
        let start = 0;
        while (start <= lastNewline) {
          const end = chunk.indexOf(NEWLINE, start);
          const space = chunk.indexOf(SPACE, start);
          if (space > start && space < end) {
            const nonce = chunk.toString('latin1', start, space);
            if (NONCE.test(nonce) && !d.places.has(nonce)) d.places.set(nonce, { file: name, offset: at + space + 1, length: end - space - 1 });
          }
          start = end + 1;
        }
        at += lastNewline + 1;
      }
      return at;
    } finally {
      await handle.close();
    }
  }

  private async read(dir: string, place: Place): Promise<string | null> {
    let handle: fs.FileHandle;
    try {
      handle = await fs.open(path.join(dir, place.file), fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
    } catch (err) {
      if (errnoOf(err) === 'ENOENT') return null;
      throw err;
    }
    try {
      if (place.length < 0) return await handle.readFile('utf8');
      const buf = Buffer.alloc(place.length);
      const { bytesRead } = await handle.read(buf, 0, place.length, place.offset);
      return buf.toString('utf8', 0, bytesRead);
    } finally {
      await handle.close();
    }
  }
}
