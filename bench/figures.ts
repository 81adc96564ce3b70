/**
 * Renders the charts of a self-contained HTML report (`fsbench report runs.jsonl --html`) to
 * PNG files, in Debian's Chromium, offline: the figures of the pages under docs/ are the report's
 * own charts, not drawn a second time.
 *
 *   node dist/bench/figures.js <report.html> <out-dir> <name-prefix>
 *
 * Writes <out-dir>/<prefix>-<n>.png for each chart, in page order, and prints each file with the
 * chart's caption.
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

const [file, outDir, prefix] = process.argv.slice(2);
if (file === undefined || outDir === undefined || prefix === undefined) {
  process.stderr.write('usage: node dist/bench/figures.js <report.html> <out-dir> <name-prefix>\n');
  process.exit(64);
}

const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu'] });
try {
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 }, deviceScaleFactor: 1 });
  // Nothing but the file itself: a report that reached out would fail here.
  await page.route(/^(?!file:)/, (route) => route.abort());
  await page.goto(pathToFileURL(path.resolve(file)).href);
  await page.waitForSelector('figure canvas', { timeout: 30_000 });
  // Chart.js animates its first draw.
  await page.waitForTimeout(1500);
  const figures = page.locator('figure:has(canvas)');
  const n = await figures.count();
  mkdirSync(outDir, { recursive: true });
  for (let i = 0; i < n; i++) {
    const figure = figures.nth(i);
    const out = path.join(outDir, `${prefix}-${i + 1}.png`);
    await figure.scrollIntoViewIfNeeded();
    await figure.screenshot({ path: out });
    const caption = (await figure.locator('figcaption').first().textContent({ timeout: 1000 }).catch(() => null)) ?? '';
    process.stdout.write(`${out}\t${caption.trim()}\n`);
  }
} finally {
  await browser.close();
}
