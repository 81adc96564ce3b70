/**
 * Enrollment tokens bound at creation (real redis-server, in-process coordinator and agents, the
 * real CLI): a token made for one host or machine enrolls no key announcing another, and one for
 * a host that has a live key enrolls nothing unless it was made with `--replace`, which then
 * revokes the old key in the same step. A refused use is logged without the token's secret and
 * leaves the token unused, which the tests show by using it afterwards where it fits.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { enrollsItself, useCluster } from './helpers/cluster.js';
import { getJson as get, until } from './helpers/http.js';
import { runCli } from './helpers/local.js';

const cluster = useCluster('token-binding');

const Keys = z.object({ keys: z.array(z.object({ key: z.string(), hostId: z.string(), machine: z.string(), state: z.string(), via: z.string().nullable() }).loose()) });
const History = z.object({ changes: z.array(z.object({ action: z.string(), key: z.string(), actor: z.string(), detail: z.string() }).loose()) });
const LogLine = z.object({ msg: z.string(), event: z.string().optional(), key: z.string().optional(), tokenId: z.string().optional(), reason: z.string().optional() }).loose();

/** A coordinator whose log lines are kept, and what they say. */
async function loggedCoordinator() {
  const lines: string[] = [];
  const c = await cluster.coordinator({}, (line) => lines.push(line));
  const refusals = () =>
    lines.flatMap((l) => {
      const r = LogLine.safeParse(JSON.parse(l));
      return r.success && r.data.event === 'agent.token-refused' ? [r.data] : [];
    });
  return { c, lines, refusals };
}

async function token(url: string, ...binding: string[]): Promise<string> {
  const t = await runCli(['agents', 'token', ...binding, '--url', url]);
  expect(t.code, t.stderr).toBe(0);
  return t.stdout.trim();
}

const secretOf = (t: string) => t.split('.')[1] ?? '?';
const keyOf = async (url: string, key: string) => (await get(`${url}/v1/agents`, Keys)).keys.find((k) => k.key === key);

describe('a token bound at creation', () => {
  it('is refused for another host or machine, logged without its secret, and stays unused for the one it names', async () => {
    const { c, lines, refusals } = await loggedCoordinator();
    const forHost = await token(c.url, '--host', 'host-named');
    const forMachine = await token(c.url, '--machine', 'box-named');

    const wrongHost = await cluster.agent(c.prefix, 'host-other', 'box-any', [], enrollsItself({ enrollToken: forHost }));
    const wrongMachine = await cluster.agent(c.prefix, 'host-m', 'box-other', [], enrollsItself({ enrollToken: forMachine }));
    const refused = await until('both uses to be refused', () => Promise.resolve(refusals().length >= 2 ? refusals() : undefined));
    expect(refused.map((r) => [r.key, r.tokenId, r.reason]).sort()).toEqual(
      [
        [wrongHost.key, forHost.split('.')[0], 'it is bound to host host-named, not host-other'],
        [wrongMachine.key, forMachine.split('.')[0], 'it is bound to machine box-named, not box-other'],
      ].sort(),
    );
    expect(await keyOf(c.url, wrongHost.key)).toMatchObject({ state: 'pending' });
    expect(await keyOf(c.url, wrongMachine.key)).toMatchObject({ state: 'pending' });
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.filter((l) => l.includes(secretOf(forHost)) || l.includes(secretOf(forMachine)))).toEqual([]);
    await wrongHost.stop();
    await wrongMachine.stop();

    // Unused still: each enrolls the agent it names.
    const named = await cluster.agent(c.prefix, 'host-named', 'box-any', [], enrollsItself({ enrollToken: forHost }));
    const boxNamed = await cluster.agent(c.prefix, 'host-m2', 'box-named', [], enrollsItself({ enrollToken: forMachine }));
    await Promise.all([named.enrolled, boxNamed.enrolled]);
    expect(await keyOf(c.url, named.key)).toMatchObject({ state: 'enrolled', via: 'token', hostId: 'host-named' });
    expect(await keyOf(c.url, boxNamed.key)).toMatchObject({ state: 'enrolled', via: 'token', machine: 'box-named' });
  });

  it('for a host with a live key is refused without --replace; with it, enrolls the new key and revokes the old', async () => {
    const { c, refusals } = await loggedCoordinator();
    const first = await cluster.agent(c.prefix, 'host-re', 'box-re', [], enrollsItself({ enrollToken: await token(c.url) }));
    await first.enrolled;

    // The host reinstalled: a new state directory, so a new key, with an ordinary token.
    const plain = await token(c.url);
    const reinstalled = await cluster.agent(c.prefix, 'host-re', 'box-re', [], enrollsItself({ enrollToken: plain }));
    const [refusal] = await until('the plain token to be refused', () => Promise.resolve(refusals().length > 0 ? refusals() : undefined));
    expect(refusal).toMatchObject({ key: reinstalled.key, tokenId: plain.split('.')[0] });
    expect(refusal?.reason).toMatch(new RegExp(`^host host-re has a live key \\(${first.key.replace(/[+/]/g, '\\$&')}\\)`));
    expect(await keyOf(c.url, reinstalled.key)).toMatchObject({ state: 'pending' });
    expect(await keyOf(c.url, first.key)).toMatchObject({ state: 'enrolled' });
    expect(first.approved()).toBe(true);
    await reinstalled.stop();

    const replacing = await token(c.url, '--replace', '--host', 'host-re');
    const replacement = await cluster.agent(c.prefix, 'host-re', 'box-re', [], enrollsItself({ enrollToken: replacing }));
    await replacement.enrolled;
    expect(await keyOf(c.url, replacement.key)).toMatchObject({ state: 'enrolled', via: 'token', hostId: 'host-re', machine: 'box-re' });
    expect(await keyOf(c.url, first.key)).toMatchObject({ state: 'revoked' });
    await until('the replaced agent to stop taking jobs', () => Promise.resolve(first.approved() ? undefined : true));
    const { changes } = await get(`${c.url}/v1/agents/history`, History);
    expect(changes.slice(0, 2).map((ch) => [ch.action, ch.key, ch.actor, ch.detail])).toEqual([
      ['revoke', first.key, `agent ${replacement.key}`, `replaced by ${replacement.key} (token ${replacing.split('.')[0] ?? '?'})`],
      ['enroll-token', replacement.key, `agent ${replacement.key}`, `token ${replacing.split('.')[0] ?? '?'}, replacing ${first.key}`],
    ]);

    // The refused token was left unused: it enrolls a host with no live key.
    const elsewhere = await cluster.agent(c.prefix, 'host-fresh', 'box-fresh', [], enrollsItself({ enrollToken: plain }));
    await elsewhere.enrolled;
    expect(await keyOf(c.url, elsewhere.key)).toMatchObject({ state: 'enrolled', via: 'token' });
  });
});
