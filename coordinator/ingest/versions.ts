/**
 * Agents of another fsbench version than the coordinator's. Their runs are stored as any
 * others, but a job or report format that changed between versions would be refused or
 * misread, and numbers from two versions of a probe are not always comparable: an operator
 * should hear of it once per agent, not discover it in a comparison. The version an agent
 * states is its fingerprint's `fsbench` (host/version.ts on its side).
 */
import type { AgentStatus } from '../../queue/registry.js';
import type { LogFields } from '../../log/index.js';

export class AgentVersions {
  /** Agents warned about, by agent id: only the live ones are kept, so it stays as small as the fleet. */
  private warned = new Set<string>();
  private others = 0;

  constructor(
    private readonly own: string,
    private readonly log: (line: string, fields: LogFields) => void,
  ) {}

  /** Looks at the live agents (every host check): warns once about each of another version. */
  note(live: readonly AgentStatus[]): void {
    const now = new Set<string>();
    let others = 0;
    for (const a of live) {
      if (a.fingerprint.fsbench === this.own) continue;
      others++;
      now.add(a.agentId);
      if (this.warned.has(a.agentId)) continue;
      this.log(`agent ${a.agentId} on ${a.machine} (host ${a.hostId.slice(0, 8)}) runs fsbench ${a.fingerprint.fsbench}, this coordinator ${this.own}: run one version everywhere`, {
        event: 'agent.version-differs',
        agentId: a.agentId,
        machine: a.machine,
        agentVersion: a.fingerprint.fsbench,
        coordinatorVersion: this.own,
      });
    }
    this.warned = now;
    this.others = others;
  }

  /** Live agents of another version at the last look, for /metrics. */
  otherVersion(): number {
    return this.others;
  }
}
