/**
 * The dashboard as static files served by the coordinator at `/`: index.html and style.css from
 * dashboard/, its script as esbuild bundled it from dashboard/app.ts (dist/dashboard/app.js,
 * made by `npm run build`), Chart.js straight from node_modules, and `GET /openapi.json`.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import express, { Router, type RequestHandler } from 'express';
import { PACKAGE_ROOT } from '../../host/native.js';
import { unguarded } from '../http/index.js';
import { openApiDocument } from './openapi.js';

/** Where index.html and style.css live, in the source tree and in the installed package alike. */
export const DASHBOARD_DIR = path.join(PACKAGE_ROOT, 'dashboard');
/** The bundled script (scripts/bundle.ts). */
const APP_BUNDLE = path.join(PACKAGE_ROOT, 'dist', 'dashboard', 'app.js');

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

const BROWSER_FILE = /^\/[A-Za-z0-9_-]+\.(?:html|css)$/;

export function dashboardRouter(deps: DashboardDeps = {}): Router {
  const router = Router();
  const chart = chartJsFile();
  router.get('/vendor/chart.umd.min.js', (_req, res) => {
    res.type('text/javascript').sendFile(chart, { maxAge: '1d' });
  });
  router.get('/app.js', (_req, res) => {
    res.type('text/javascript').sendFile(APP_BUNDLE, { maxAge: '1h' });
  });
  let doc: string | undefined;
  router.get('/openapi.json', deps.read ?? unguarded, (_req, res) => {
    doc ??= JSON.stringify(openApiDocument(deps.version ?? '0.1.0'));
    res.type('application/json').send(doc);
  });
  // Only the page and its style: the TypeScript next to them is bundled into /app.js.
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
