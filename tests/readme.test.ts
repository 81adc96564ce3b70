/**
 * The README stays short enough for a newcomer, its links and the docs' links lead somewhere,
 * the docs document every parameter, metric, setting and code exactly as the code defines
 * them, and they speak to the user's task: how the project got here (issue numbers, commits,
 * rounds, sessions) belongs in CHANGELOG.md and git history. This only compares: after
 * changing a spec, `npm run docs` rewrites the generated sections (scripts/docs.ts).
 */
import { execFileSync } from 'node:child_process';
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

/** Phrases of a development log, which README.md and docs/ leave to CHANGELOG.md and git history. */
const HISTORY_PHRASES: readonly RegExp[] = [
  /\bissues? #?\d+/i,
  /\b(?:this|last|previous|next) (?:round|session)\b/i,
  /\bround's\b/i,
  /\bcommit [0-9a-f]{7,40}\b/i,
  /\bbefore this (?:change|round|commit|session)\b/i,
  /\bhow it got here\b/i,
  /\b(?:was|were|is) withdrawn\b/i,
];

/** Every commit of this checkout's history, full hashes. */
function commitHashes(): string[] {
  return execFileSync('git', ['log', '--all', '--format=%H'], { cwd: ROOT, encoding: 'utf8' }).split('\n').filter((h) => h !== '');
}

/**
 * Where `text` tells the project's history rather than the user's task: each line with a
 * history phrase, or with a hexadecimal word of 7 to 40 characters that names one of `commits`
 * (so `--annotate commit=4f2a9c1`, an example value, and ids in example output pass).
 */
function historyIn(text: string, commits: readonly string[]): string[] {
  return text.split('\n').flatMap((line, i) => {
    const phrase = HISTORY_PHRASES.find((re) => re.test(line));
    const hash = [...line.matchAll(/\b[0-9a-f]{7,40}\b/g)].map((m) => m[0]).find((h) => /[a-f]/.test(h) && commits.some((c) => c.startsWith(h)));
    if (phrase === undefined && hash === undefined) return [];
    return [`line ${String(i + 1)}: ${hash === undefined ? `matches ${String(phrase)}` : `names commit ${hash}`}: ${line.trim().slice(0, 120)}`];
  });
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

  it('tell what to do and what it shows, not how the project got there (no issue numbers, rounds, sessions or commits)', () => {
    const commits = commitHashes();
    expect(commits.length).toBeGreaterThan(0);
    const found = MARKDOWN.flatMap((file) => historyIn(read(file), commits).map((why) => `${file}: ${why}`));
    expect(found).toEqual([]);
    // The checker itself: what it must find, and example values it must let through.
    const commit = commits.find((c) => /[a-f]/.test(c.slice(0, 7))) ?? '';
    expect(historyIn(`Issue 21 asked for 0.8.\nIn this round it took 36 s.\nthat code (commit ${commit.slice(0, 7)}) made\nbuilt from ${commit.slice(0, 9)}`, commits)).toHaveLength(4);
    expect(historyIn('`--annotate commit=4f2a9c1`\n"cellId":"3f2a9c0b1d4e"\nrounds 0.229, 0.203, 0.218', commits)).toEqual([]);
  });

  it('names the same test command that CI runs', () => {
    const ci = readFileSync(path.join(ROOT, '.ci', 'run'), 'utf8');
    const command = ci.trim().split('\n').at(-1) ?? '';
    expect(command).toBe('npm ci && npm test');
    expect(readme).toContain(`\`\`\`sh\n${command}\n\`\`\``);
  });
});
