/**
 * The log of dropped reports and failed jobs, one line per episode rather than per batch: a
 * flood of forged reports is read in hundreds of batches, and a line each would bury the log (the
 * metric counts every one). An episode of a reason starts with its first drop, logged with an
 * example, and ends once none of that reason has come for QUIET_MS, logged with its total.
 */
import type { DropReason, Drops } from './verify.js';

/** How long without a drop of a reason ends its episode. */
export const QUIET_MS = 60_000;

interface Episode {
  readonly what: string;
  readonly reason: DropReason;
  readonly since: number;
  n: number;
  last: number;
}

export class DropLog {
  private readonly open = new Map<string, Episode>();

  constructor(private readonly log: (line: string) => void) {}

  /** One batch's drops of `what` (a report, a failed job). */
  note(what: string, drops: Drops, now = Date.now()): void {
    for (const [reason, { n, example }] of drops) {
      const key = `${what} ${reason}`;
      const episode = this.open.get(key);
      if (episode) {
        episode.n += n;
        episode.last = now;
        continue;
      }
      this.open.set(key, { what, reason, since: now, n, last: now });
      this.log(
        `collector: dropped ${n} ${what}(s) this coordinator did not issue (${reason}), e.g. ${example}; ` +
          `until none has come for ${QUIET_MS / 1000} s, more are only counted (fsbench_reports_dropped_total{reason="${reason}"})`,
      );
    }
  }

  /** Ends the episodes quiet for QUIET_MS (or all of them), each with one line of its total. */
  endQuiet(now = Date.now(), all = false): void {
    for (const [key, e] of this.open) {
      if (!all && now - e.last < QUIET_MS) continue;
      this.open.delete(key);
      this.log(`collector: ${e.n} ${e.what}(s) dropped (${e.reason}) from ${new Date(e.since).toISOString()} to ${new Date(e.last).toISOString()}`);
    }
  }
}
