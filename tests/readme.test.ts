/**
 * The README stays short enough for a newcomer, its links and the docs' links lead somewhere,
 * and the docs document every parameter, metric, setting and code exactly as the code defines
 * them. This only compares: after changing a spec, `npm run docs` rewrites the generated
 * sections (scripts/docs.ts).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DOC_SECTIONS, docPath, readSection } from '../scripts/docs.js';

const ROOT = path.join(import.meta.dirname, '..');
/** Every Markdown file a reader follows links through: the README and the pages under docs/. */
const MARKDOWN = ['README.md', ...readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');
const readme = read('README.md');

/** The text outside fenced code blocks, where Markdown is Markdown. */
function prose(text: string): string {
  return text.replace(/^(`{3,}|~{3,})[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '');
}

/**
 * The anchors GitHub gives a file's headings: the heading's text, lower-cased, without
 * punctuation (backticks and formatting included), each space a hyphen; a repeated slug gets
 * `-1`, `-2` ... in order of appearance.
 */
function headingAnchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const line of prose(text).split('\n')) {
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (m?.[1] === undefined) continue;
    const base = m[1]
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** The targets of a file's inline links and images, code left out (a `[x](y)` in code is no link). */
function linkTargets(text: string): string[] {
  const withoutCode = prose(text).replace(/(`+)[\s\S]*?\1/g, '');
  return [...withoutCode.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1] ?? '');
}

/** Why the relative link `target` in `file` leads nowhere, or null when it resolves. */
function brokenLink(file: string, target: string): string | null {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return null; // http:, https:, mailto: are not checked here
  const [rel = '', anchor] = target.split('#', 2);
  const resolved = rel === '' ? file : path.posix.normalize(path.posix.join(path.posix.dirname(file), decodeURI(rel)));
  if (!existsSync(path.join(ROOT, resolved))) return `${target}: no file ${resolved}`;
  if (anchor === undefined || !resolved.endsWith('.md')) return null;
  return headingAnchors(read(resolved)).has(decodeURIComponent(anchor)) ? null : `${target}: no heading #${anchor} in ${resolved}`;
}

describe('README and docs', () => {
  it.each(DOC_SECTIONS.map((s) => [`${s.file}: ${s.name}`, s] as const))(
    'has %s as the code generates it (npm run docs rewrites it)',
    (_, section) => {
      expect(readSection(readFileSync(docPath(section.file), 'utf8'), section.name, section.file)).toBe(section.generate());
    },
  );

  it('holds each generated section in one file only, the one the generator writes', () => {
    for (const section of DOC_SECTIONS) {
      const holders = MARKDOWN.filter((f) => read(f).includes(`<!-- ${section.name}:begin -->`));
      expect(holders, section.name).toEqual([section.file]);
    }
  });

  it('keeps the README to 250 lines', () => {
    expect(readme.trimEnd().split('\n').length).toBeLessThanOrEqual(250);
  });

  it('has no relative link, in the README or under docs/, to a missing file or heading', () => {
    const broken = MARKDOWN.flatMap((file) =>
      linkTargets(read(file)).flatMap((target) => {
        const why = brokenLink(file, target);
        return why === null ? [] : [`${file}: ${why}`];
      }),
    );
    expect(broken).toEqual([]);
    // The checker itself: a link it must reject, and the slug of a heading with code and punctuation.
    expect(brokenLink('README.md', 'docs/deployment.md#no-such-heading')).not.toBeNull();
    expect(headingAnchors('## Noise: `npm run bench:noise`\n## Two machines, with TLS\n## Two machines, with TLS')).toEqual(
      new Set(['noise-npm-run-benchnoise', 'two-machines-with-tls', 'two-machines-with-tls-1']),
    );
  });

  it('names the same test command that CI runs', () => {
    const ci = readFileSync(path.join(ROOT, '.ci', 'run'), 'utf8');
    const command = ci.trim().split('\n').at(-1) ?? '';
    expect(command).toBe('npm ci && npm test');
    expect(readme).toContain(`\`\`\`sh\n${command}\n\`\`\``);
  });
});
