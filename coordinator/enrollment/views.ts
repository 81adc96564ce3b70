/**
 * An agent key as `fsbench agents` and the REST API show it, from its row in the store; and the
 * coordinator's own report key, which agents agree their report secrets with.
 */
import type { KeyObject } from 'node:crypto';
import path from 'node:path';
import { z } from 'zod';
import type { AgentKeyView } from '../../queue/enrollment.js';
import { loadOrCreatePrivateKey } from '../../queue/signing.js';
import type { AgentKeyRow } from '../store/index.js';

/** The labels column: a JSON array of strings, as recordPending wrote it. */
export const Labels = z.array(z.string());

export function viewOf(r: AgentKeyRow): AgentKeyView {
  const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
  return {
    key: r.key,
    hostId: r.host_id,
    machine: r.machine,
    labels: Labels.parse(JSON.parse(r.labels)),
    state: r.state,
    via: r.via,
    firstSeen: new Date(r.first_seen).toISOString(),
    enrolledAt: iso(r.enrolled_at),
    revokedAt: iso(r.revoked_at),
  };
}

/** The coordinator's X25519 report key, in its data directory beside the job key (mode 0600). */
export const REPORT_KEY_FILE = 'report-key.pem';

/** The coordinator's report key from its data directory, made on first start. */
export function loadOrCreateReportKey(dataDir: string): Promise<KeyObject> {
  return loadOrCreatePrivateKey(path.join(dataDir, REPORT_KEY_FILE), 'x25519', 'report key (agents then agree new report secrets at their next start)');
}
