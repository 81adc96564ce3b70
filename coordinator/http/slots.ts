/**
 * A fixed number of slots for answers that hold a connection and work open (downloads, event
 * streams): a route that finds none free refuses (503 with Retry-After) rather than let a crowd
 * of slow clients hold the coordinator's memory and CPU. A slot taken for a response is given
 * back when the response closes, which Node reports whether it ended, failed or the client went
 * away; giving back twice is harmless.
 */
import type { Response } from 'express';


export class Slots {
  private used = 0;

  constructor(readonly capacity: number) {}

  /** Takes a slot for `res` until it closes; false when none is free. */
  take(res: Response): boolean {
    if (this.used >= this.capacity) return false;
    this.used++;
    let held = true;
    const release = () => {
      if (!held) return;
      held = false;
      this.used--;
    };
    res.once('close', release);
    if (res.closed || res.destroyed) release();
    return true;
  }
}
