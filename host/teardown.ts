/**
 * The changes of one run to the host, each journaled (host/journal.ts) before it is made: the one
 * way workloads change the host.
 */
import { FsbenchError, messageOf } from '../contract/errors.js';
import type { Journal } from './journal.js';
import { describe, type JournalEntry } from './journal-entry.js';

/**
 * The changes one run makes, undone in reverse order by `dispose()` whatever happened. Each
 * change is journaled before it is made and forgotten only once it has been undone.
 */
export class Teardown {
  private readonly stack: { entry: JournalEntry; handle: string }[] = [];

  constructor(readonly journal: Journal) {}

  /** Journals `entry`, then makes the change; if making it fails, undoes whatever part of it happened. */
  async add<T>(entry: JournalEntry, make: () => Promise<T>): Promise<T> {
    const handle = await this.journal.record(entry);
    this.stack.push({ entry, handle });
    return make();
  }

  /** Undoes every change, newest first; reports every failure together after trying them all. */
  async dispose(): Promise<void> {
    const failures: string[] = [];
    while (this.stack.length > 0) {
      const item = this.stack.pop();
      if (!item) break;
      try {
        await this.journal.undo(item.entry);
        await this.journal.forget(item.handle);
      } catch (err) {
        this.journal.release(item.handle);
        failures.push(`${describe(item.entry)}: ${messageOf(err)}`);
      }
    }
    if (failures.length > 0) {
      throw new FsbenchError(
        'INTERNAL',
        `could not undo every change of the run (the next start retries from the journal): ${failures.join('; ')}`,
      );
    }
  }
}
