/**
 * The agents' routes: who is live (the registry) and which keys are enrolled or wait for it
 * (enrollment/), approving a waiting key, revoking one, asking one to rotate its key, renaming an enrolled key's machine, the
 * audit of those changes, and making one-time enrollment tokens.
 */
import { Router, type Request } from 'express';
import { z } from 'zod';
import { MachineName } from '../../contract/fingerprint.js';
import { parseDuration } from '../../contract/units.js';
import { Target } from '../../queue/jobs.js';
import { liveAgents } from '../../queue/registry.js';
import { FSBENCH_VERSION } from '../../host/version.js';
import { absent, readBody, requireRead, requireWrite, withDeadline, type AuthConfig } from '../http/index.js';
import { MAX_TOKENS_PER_REQUEST, type Enrollment } from '../enrollment/index.js';
import type { Log } from '../../log/index.js';
import type { CoordinatorParts } from '../matrices/index.js';

export interface AgentsDeps extends Pick<CoordinatorParts, 'redis' | 'prefix'> {
  readonly auth: AuthConfig;
  readonly enrollment?: Enrollment | undefined;
  /** FSBENCH_MAX_BODY, which the 413 names. */
  readonly limits: { readonly maxBody: number };
  readonly log: Log;
}

const Approve = z.object({ agent: z.string().min(1).max(200) }).strict();
/** `POST /v1/agents/rename`: the enrolled key (its fingerprint, host id or machine name) and the machine's new name. */
export const RenameBody = z.object({ agent: z.string().min(1).max(200), machine: MachineName }).strict();

/** Token lifetimes: long enough to roll out a fleet, short enough that a leaked one goes stale. */
const TOKEN_TTL_MIN_MS = 60_000;
const TOKEN_TTL_MAX_MS = 30 * 86_400_000;
const Tokens = z
  .object({
    count: z.number().int().min(1).max(MAX_TOKENS_PER_REQUEST).default(1),
    ttl: z
      .union([z.string(), z.number()])
      .default('1h')
      .transform((raw, ctx) => {
        const r = parseDuration(raw);
        if (!r.ok) {
          ctx.addIssue({ code: 'custom', message: r.reason });
          return z.NEVER;
        }
        return r.value;
      })
      .pipe(z.number().min(TOKEN_TTL_MIN_MS, 'must be at least 1m').max(TOKEN_TTL_MAX_MS, 'must be at most 30d')),
    /** What the tokens enroll only: a key announcing this machine name, this host id. */
    machine: z.string().min(1).max(200).optional(),
    host: Target.optional(),
    /** Whether a token may enroll a key for a host that has a live one, revoking it. */
    replace: z.boolean().default(false),
  })
  .strict();

export function agentsRouter(d: AgentsDeps): Router {
  const router = Router();
  const read = requireRead(d.auth);
  const write = requireWrite(d.auth);
  const body = readBody('json', d.limits.maxBody);
  const enrollment = (): Enrollment => {
    if (!d.enrollment) {
      throw absent(
        'enrollment of agent keys',
        'approving, revoking and enrollment tokens',
        '`fsbench coordinator` keeps it in its database (FSBENCH_DATA_DIR); an app built alone is given one as its `enrollment`',
      );
    }
    return d.enrollment;
  };

  router.get('/v1/agents', read, async (_req, res) => {
    const agents = await withDeadline(liveAgents(d.redis, d.prefix), 'reading the live agents');
    const keys = d.enrollment?.list() ?? [];
    res.json({ version: FSBENCH_VERSION, hosts: new Set(agents.map((a) => a.hostId)).size, agents, keys, pending: keys.filter((k) => k.state === 'pending').length });
  });

  // Each change is logged and audited by enrollment/, naming who asked.
  const actor = (req: Request) => `api ${req.ip ?? 'unknown'}`;
  router.post('/v1/agents/approve', write, ...body, async (req, res) => {
    const { agent } = Approve.parse(req.body);
    res.json(await withDeadline(enrollment().approve(agent, actor(req)), 'approving the agent'));
  });

  router.post('/v1/agents/revoke', write, ...body, (req, res) => {
    const { agent } = Approve.parse(req.body);
    res.json(enrollment().revoke(agent, actor(req)));
  });

  router.post('/v1/agents/rename', write, ...body, (req, res) => {
    const { agent, machine } = RenameBody.parse(req.body);
    res.json(enrollment().rename(agent, machine, actor(req)));
  });

  router.post('/v1/agents/rotate', write, ...body, (req, res) => {
    const { agent } = Approve.parse(req.body);
    res.json(enrollment().requestRotation(agent, actor(req)));
  });

  router.get('/v1/agents/history', read, (_req, res) => {
    res.json({ changes: enrollment().history() });
  });

  router.post('/v1/agents/tokens', write, ...body, (req, res) => {
    const { count, ttl, machine, host, replace } = Tokens.parse(req.body);
    const minted = enrollment().mintTokens(count, ttl, { machine: machine ?? null, hostId: host ?? null, replace });
    // The tokens themselves are never logged: only that some were made, and what they are bound to.
    d.log(`${count} enrollment token(s) made, valid until ${minted.expiresAt}`, { event: 'agent.tokens', count, machine, host, replace });
    res.status(201).json(minted);
  });
  return router;
}
