/**
 * An enrolled agent keeps checking that its approval still holds: the coordinator removes it when
 * the key is revoked (and a copy written back is not renewed, so it expires). While it does not
 * hold, the agent takes no job: its workers are paused, and a job taken in the moment before is
 * put back on its queue unrun, with no attempt counted, for an enrolled host to take.
 */
import { FsbenchError, messageOf } from '../contract/errors.js';
import type { Approval } from '../queue/enrollment.js';
import type { HealthLog } from '../queue/redis-health.js';

export interface ApprovalWatchDeps {
  /** The approval as Redis holds it now (identity.ts currentApproval); throws when Redis does not answer. */
  readonly check: () => Promise<Approval | null>;
  readonly intervalMs: number;
  /** Told when the approval is gone, and when it is back. */
  readonly onLost: () => void;
  readonly onBack: () => void;
  readonly log: HealthLog;
}

export class ApprovalWatch {
  private holding = true;
  private timer: NodeJS.Timeout | undefined;
  private checking: Promise<boolean> | undefined;

  constructor(private readonly deps: ApprovalWatchDeps) {}

  /** Whether the approval held at the last look: what the agent says it is doing. */
  get holds(): boolean {
    return this.holding;
  }

  start(): void {
    this.timer = setInterval(() => {
      void this.checkNow();
    }, this.deps.intervalMs);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /**
   * Looks now (one look at a time). Redis not answering is no revocation: what held last still
   * does, and a job then taken cannot complete without Redis anyway.
   */
  checkNow(): Promise<boolean> {
    this.checking ??= this.look().finally(() => {
      this.checking = undefined;
    });
    return this.checking;
  }

  private async look(): Promise<boolean> {
    let approval: Approval | null;
    try {
      approval = await this.deps.check();
    } catch (err) {
      // A key now bound to another host (FsbenchError) holds here no more either.
      if (!(err instanceof FsbenchError)) return this.holding;
      this.deps.log(`approval: ${messageOf(err)}`);
      approval = null;
    }
    const holds = approval !== null;
    if (holds !== this.holding) {
      this.holding = holds;
      if (holds) {
        this.deps.log('this agent key is approved again: taking jobs', { event: 'agent.approval-back' });
        this.deps.onBack();
      } else {
        this.deps.log('this agent key is no longer approved (revoked, or its approval expired): taking no job', { event: 'agent.approval-lost' });
        this.deps.onLost();
      }
    }
    return holds;
  }
}
