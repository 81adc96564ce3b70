/**
 * The README documents every parameter and setting exactly as the code defines them. Run with
 * UPDATE_README=1 to rewrite the generated sections after changing a spec.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { paramsMarkdown } from '../cli/local.js';
import { settingsMarkdown } from '../settings/index.js';

const file = path.join(import.meta.dirname, '..', 'README.md');

function section(text: string, name: string): string {
  const begin = `<!-- ${name}:begin -->\n`;
  const end = `<!-- ${name}:end -->`;
  const a = text.indexOf(begin);
  const b = text.indexOf(end);
  if (a < 0 || b < a) throw new Error(`README.md has no ${name} section`);
  return text.slice(a + begin.length, b);
}

function replace(text: string, name: string, body: string): string {
  const start = text.indexOf(`<!-- ${name}:begin -->\n`) + `<!-- ${name}:begin -->\n`.length;
  return text.slice(0, start) + body + text.slice(start + section(text, name).length);
}

describe('README', () => {
  const generated = { params: paramsMarkdown(), settings: `${settingsMarkdown()}\n` };

  if (process.env['UPDATE_README'] === '1') {
    let text = readFileSync(file, 'utf8');
    for (const [name, body] of Object.entries(generated)) text = replace(text, name, body);
    writeFileSync(file, text);
  }

  it.each(Object.keys(generated) as (keyof typeof generated)[])('documents every %s with its default, as the code defines it', (name) => {
    expect(section(readFileSync(file, 'utf8'), name)).toBe(generated[name]);
  });

  it('names the same test command that CI runs', () => {
    const ci = readFileSync(path.join(import.meta.dirname, '..', '.ci', 'run'), 'utf8');
    const command = ci.trim().split('\n').at(-1) ?? '';
    expect(readFileSync(file, 'utf8')).toContain(`\`\`\`sh\n${command}\n\`\`\``);
  });
});
