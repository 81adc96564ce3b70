/**
 * The README documents every parameter and setting exactly as the code defines them. This only
 * compares: after changing a spec, `npm run readme` rewrites the generated sections
 * (tests/fixtures/readme-sections.ts).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { README_FILE, README_SECTIONS, readSection } from './fixtures/readme-sections.js';

const readme = readFileSync(README_FILE, 'utf8');

describe('README', () => {
  it.each(Object.entries(README_SECTIONS))('has the %s section as the code generates it (npm run readme rewrites it)', (name, generate) => {
    expect(readSection(readme, name)).toBe(generate());
  });

  it('names the same test command that CI runs', () => {
    const ci = readFileSync(path.join(import.meta.dirname, '..', '.ci', 'run'), 'utf8');
    const command = ci.trim().split('\n').at(-1) ?? '';
    expect(command).toBe('npm ci && npm test');
    expect(readme).toContain(`\`\`\`sh\n${command}\n\`\`\``);
  });
});
