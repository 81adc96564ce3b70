/**
 * Chromium (found on PATH, or CHROME_BIN), headless, driven by playwright-core: a fresh profile
 * per test file, the flags that keep it off the network, and every console error, page error and
 * failed request collected so a test can assert there were none.
 */
import { accessSync, constants, mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Page } from 'playwright-core';
import { expect } from 'vitest';

/** The commands Chromium goes by: Debian's package installs `chromium`, other systems `chromium-browser`. */
const CHROMIUM_COMMANDS = ['chromium', 'chromium-browser'];

function executable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
}

/**
 * The Chromium to drive: CHROME_BIN when set (the variable Karma and many CI images use), else the
 * first of CHROMIUM_COMMANDS on PATH; a clear error naming what was looked for when there is none.
 */
function findChromium(env: NodeJS.ProcessEnv = process.env): string {
  const chosen = env['CHROME_BIN'];
  if (chosen !== undefined && chosen !== '') {
    if (!executable(chosen)) throw new Error(`CHROME_BIN is ${chosen}, which is not an executable file: point it at a Chromium, or unset it to use chromium from PATH`);
    return chosen;
  }
  const dirs = (env['PATH'] ?? '').split(path.delimiter).filter((d) => d !== '');
  for (const command of CHROMIUM_COMMANDS) {
    for (const dir of dirs) {
      const file = path.join(dir, command);
      if (executable(file)) return file;
    }
  }
  throw new Error(
    `the browser tests need Chromium, and none of ${CHROMIUM_COMMANDS.join(', ')} is on PATH (${dirs.join(path.delimiter)}) and CHROME_BIN is not set: ` +
      'on Debian apt-get install chromium (npm test does it: scripts/prepare-host.sh), or set CHROME_BIN to a Chromium',
  );
}

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
  const executablePath = findChromium();
  const profile = mkdtempSync(path.join(os.tmpdir(), 'fsbench-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath,
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
