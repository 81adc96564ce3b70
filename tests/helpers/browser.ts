/**
 * Debian's Chromium, headless, driven by playwright-core: a fresh profile per test file, the
 * flags that keep it off the network, and every console error, page error and failed request
 * collected so a test can assert there were none.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Page } from 'playwright-core';
import { expect } from 'vitest';

export const CHROMIUM = '/usr/bin/chromium';

export interface Browser {
  readonly page: Page;
  /** Console errors and warnings, page errors and failed requests, as they happen. */
  readonly problems: string[];
  /** Loads `base/hash` and waits until the dashboard says the view `hash` names is ready. */
  open(base: string, hash: string): Promise<void>;
  /**
   * Waits until the JavaScript expression is truthy in the page. Not page.waitForFunction: that
   * polls with eval() in the page, which the coordinator's Content-Security-Policy forbids.
   */
  waitFor(expression: string, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export async function openBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`the dashboard tests need Debian's chromium at ${CHROMIUM}: apt-get install chromium`);
  const profile = mkdtempSync(path.join(os.tmpdir(), 'fsbench-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
    viewport: { width: 1400, height: 1000 },
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const problems: string[] = [];
  page.on('console', (msg) => {
    if (msg.type() === 'error' || msg.type() === 'warning') problems.push(`console ${msg.type()}: ${msg.text()}`);
  });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('requestfailed', (r) => {
    // Leaving a page closes its event streams: that is not a failure of the page.
    if (!r.url().endsWith('/events')) problems.push(`request failed: ${r.url()} ${r.failure()?.errorText ?? ''}`);
  });
  // page.evaluate runs the expression through the DevTools protocol, which the page's CSP does not govern.
  const waitFor = async (expression: string, timeoutMs = 30_000): Promise<void> => {
    const end = Date.now() + timeoutMs;
    while (!(await page.evaluate<unknown>(expression))) {
      if (Date.now() > end) throw new Error(`timed out waiting for ${expression} in the page`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  return {
    page,
    problems,
    waitFor,
    async open(base, hash) {
      // A hash change keeps the document, and with it the last view's ready mark: clear it, so
      // that only the view now opened can set it.
      await page.evaluate('if (document.body) delete document.body.dataset.ready');
      await page.goto(`${base}/${hash}`);
      const view = hash.replace(/^#/, '').split('?')[0] || '/';
      await waitFor(`['${view}', 'error'].includes(document.body.dataset.ready)`);
      // The dashboard's error banner says why a view failed (an answer it could not parse, a status).
      expect(await page.evaluate('document.body.dataset.ready'), await page.evaluate(`document.getElementById('banner')?.textContent ?? ''`)).toBe(view);
    },
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
