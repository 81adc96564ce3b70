/**
 * Which dependencies may run install scripts is decided in package.json (`allowScripts`), pinned,
 * and every dependency with a script is decided: npm 11 warns about the undecided ones and npm 12
 * skips them, which would leave better-sqlite3 unbuilt without a word. Read from the lockfile, so
 * this holds whatever npm version runs the tests; a new dependency with a script fails it until
 * someone reviews the script and lists the package.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';

const Manifest = z.object({ allowScripts: z.record(z.string(), z.boolean()).optional() });
const Lock = z.object({
  packages: z.record(
    z.string(),
    z.object({
      version: z.string().optional(),
      resolved: z.string().optional(),
      link: z.boolean().optional(),
      hasInstallScript: z.boolean().optional(),
    }),
  ),
});

const manifest = Manifest.parse(JSON.parse(readFileSync('package.json', 'utf8')));
const lock = Lock.parse(JSON.parse(readFileSync('package-lock.json', 'utf8')));
const policy = manifest.allowScripts ?? {};

/** `node_modules/a/node_modules/@s/b` → `@s/b`. */
function nameOf(lockKey: string): string {
  const at = lockKey.lastIndexOf('node_modules/');
  return lockKey.slice(at + 'node_modules/'.length);
}

/** A policy key `name` or `name@version` (`@scope/name@version`) split apart. */
function parseKey(key: string): { name: string; version: string | null } {
  const at = key.indexOf('@', 1);
  return at < 0 ? { name: key, version: null } : { name: key.slice(0, at), version: key.slice(at + 1) };
}

const withScripts = Object.entries(lock.packages)
  .filter(([key, p]) => key !== '' && p.hasInstallScript === true && p.link !== true)
  .map(([key, p]) => ({ key, name: nameOf(key), version: p.version ?? '', resolved: p.resolved }));

describe('install scripts declared in package.json', () => {
  it('the lockfile has dependencies with install scripts to decide about', () => {
    expect(withScripts.length).toBeGreaterThan(0);
  });

  it('every dependency with an install script is allowed at its exact version or denied by name', () => {
    const undecided: string[] = [];
    for (const dep of withScripts) {
      const entries = Object.entries(policy).map(([k, allow]) => ({ ...parseKey(k), allow }));
      const denied = entries.some((e) => e.name === dep.name && !e.allow);
      const allowed = entries.some((e) => e.name === dep.name && e.allow && e.version === dep.version);
      if (!denied && !allowed) undecided.push(`${dep.name}@${dep.version}`);
    }
    expect(undecided).toEqual([]);
  });

  it('allows are pinned (name@version) and denies are by name, so no other version slips through', () => {
    for (const [key, allow] of Object.entries(policy)) {
      const { version } = parseKey(key);
      if (allow) expect(version, key).toMatch(/^\d+\.\d+\.\d+(-[\w.]+)?$/);
      else expect(version, key).toBeNull();
    }
  });

  it('no entry outlives its package (a stale pin would hide that an upgrade went unreviewed)', () => {
    for (const key of Object.keys(policy)) {
      const { name, version } = parseKey(key);
      const match = withScripts.filter((d) => d.name === name && (version === null || d.version === version));
      expect(match.length, key).toBeGreaterThan(0);
    }
  });

  it('npm can verify each pin: the allowed packages carry their registry URL in the lockfile', () => {
    // npm matches `name@version` against the version in `resolved`, never the tarball's own
    // package.json; a lock written with omit-lockfile-registry-resolved leaves every pin unmatched.
    for (const dep of withScripts) {
      const allowed = Object.entries(policy).some(([k, allow]) => allow && parseKey(k).name === dep.name);
      if (!allowed) continue;
      const base = dep.name.startsWith('@') ? dep.name.split('/')[1] : dep.name;
      expect(dep.resolved, dep.key).toMatch(new RegExp(`/${dep.name}/-/${base}-${dep.version.replace(/\./g, '\\.')}\\.tgz$`));
    }
  });
});
