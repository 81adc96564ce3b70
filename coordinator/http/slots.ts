/**
 * A fixed number of slots for answers that hold a connection and work open (downloads, event
 * streams, comparisons): a route that finds none free refuses (503 or 429 with Retry-After)
 * rather than let a crowd of slow clients hold the coordinator's memory and CPU, or waits in a
 * line of a fixed length for one (`enter`). A slot taken for a response is given back when the
 * response closes, which Node reports whether it ended, failed or the client went away; giving
 * back twice is harmless. A slot given back goes to the first in line, if any.
 */
import type { Response } from 'express';

export class Slots {
  private used = 0;
  /** Whoever waits for a slot, first come first served: each takes over the slot it is handed. */
  private readonly line: (() => void)[] = [];

  constructor(
    readonly capacity: number,
    /** Most waiting in line for a slot (`enter`); `take` never waits. */
    readonly queue = 0,
  ) {}

  /** Slots taken, and responses waiting in line. */
  get counts(): { readonly busy: number; readonly waiting: number } {
    return { busy: this.used, waiting: this.line.length };
  }

  /** Takes a slot for `res` until it closes; false when none is free. */
  take(res: Response): boolean {
    if (this.used >= this.capacity) return false;
    this.used++;
    this.holdFor(res);
    return true;
  }

  /**
   * A slot for `res`: now, or once one is given back with at most `queue` responses in line
   * ahead; undefined at once when the line is full too. Resolves false if `res` closes (the
   * client went away) before its turn.
   */
  enter(res: Response): Promise<boolean> | undefined {
    if (this.take(res)) return Promise.resolve(true);
    if (this.line.length >= this.queue) return undefined;
    return new Promise<boolean>((resolve) => {
      const turn = () => {
        res.off('close', gone);
        if (res.closed || res.destroyed) {
          this.giveBack();
          resolve(false);
          return;
        }
        this.holdFor(res);
        resolve(true);
      };
      const gone = () => {
        const i = this.line.indexOf(turn);
        if (i >= 0) this.line.splice(i, 1);
        resolve(false);
      };
      this.line.push(turn);
      res.once('close', gone);
    });
  }

  /** Holds a taken slot until `res` closes. */
  private holdFor(res: Response): void {
    let held = true;
    const release = () => {
      if (!held) return;
      held = false;
      this.giveBack();
    };
    res.once('close', release);
    if (res.closed || res.destroyed) release();
  }

  /** A slot comes free: the first in line takes it over, or it is free. */
  private giveBack(): void {
    const next = this.line.shift();
    if (next) next();
    else this.used--;
  }
}
