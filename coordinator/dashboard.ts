/**
 * The dashboard as static files served by the coordinator at `/`: plain ES modules and CSS from
 * this directory, Chart.js straight from node_modules (nothing to build, for users or for us),
 * and `GET /openapi.json`.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import express, { Router, type RequestHandler } from 'express';
import { PACKAGE_ROOT } from '../host/native.js';
import { openApiDocument } from './openapi.js';

/** Where index.html, app.js and style.css live, in the source tree and in the installed package alike. */
export const DASHBOARD_DIR = path.join(PACKAGE_ROOT, 'dashboard');

/**
 * Compiled modules the page imports as they are, so the dashboard formats numbers and describes
 * machines with the very functions every other output uses. Each imports nothing outside this list.
 */
const SHARED_MODULES = ['report/format.js', 'contract/units.js', 'compare/machine-facts.js'] as const;

/** Chart.js's self-contained UMD build, resolved the way Node resolves the package. */
export function chartJsFile(): string {
  const main = createRequire(import.meta.url).resolve('chart.js');
  return path.join(path.dirname(main), 'chart.umd.min.js');
}

export interface DashboardDeps {
  /** The coordinator's read guard; the page itself is public, what it reads is guarded by the API. */
  readonly read?: RequestHandler;
  /** Shown in the OpenAPI document. */
  readonly version?: string;
}

const BROWSER_FILE = /^\/[A-Za-z0-9_-]+\.(?:html|js|css)$/;

export function dashboardRouter(deps: DashboardDeps = {}): Router {
  const router = Router();
  const chart = chartJsFile();
  router.get('/vendor/chart.umd.min.js', (_req, res) => {
    res.type('text/javascript').sendFile(chart, { maxAge: '1d' });
  });
  for (const file of SHARED_MODULES) {
    router.get(`/lib/${file}`, (_req, res) => {
      res.type('text/javascript').sendFile(path.join(PACKAGE_ROOT, 'dist', file), { maxAge: '1h' });
    });
  }
  let doc: string | undefined;
  router.get('/openapi.json', deps.read ?? ((_req, _res, next) => {
    next();
  }), (_req, res) => {
    doc ??= JSON.stringify(openApiDocument(deps.version ?? '0.1.0'));
    res.type('application/json').send(doc);
  });
  // Only the browser files: the TypeScript next to them is not for the page.
  const files = express.static(DASHBOARD_DIR, { index: 'index.html', fallthrough: true, redirect: false });
  router.use((req, res, next) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      next();
      return;
    }
    if (req.path === '/' || BROWSER_FILE.test(req.path)) {
      files(req, res, next);
      return;
    }
    next();
  });
  return router;
}
