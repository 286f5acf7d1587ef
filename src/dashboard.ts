// GET /dashboard: the usage dashboard, a static page (the package's
// dashboard/ folder) and uPlot's files from node_modules. The page holds no
// data and needs no key to load: its script asks for an admin key, keeps it in
// the tab's sessionStorage and sends it as `Authorization: Bearer` to the
// admin API (/admin/usage…), which checks it. docs/observability.md, "Dashboard".
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import type Router from '@koa/router';
import type Koa from 'koa';
import type { Logger } from 'pino';
import { GatewayError } from './errors.js';

/** From dist/src/ (or src/ under a TypeScript runner), the package root is two folders up. */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

interface Asset {
  file: string;
  type: string;
}

function assets(): Map<string, Asset> {
  const uplot = path.dirname(createRequire(import.meta.url).resolve('uplot/dist/uPlot.iife.min.js'));
  const own = (name: string) => path.join(ROOT, 'dashboard', name);
  return new Map<string, Asset>([
    ['/dashboard', { file: own('index.html'), type: 'text/html; charset=utf-8' }],
    ['/dashboard/app.js', { file: own('app.js'), type: 'text/javascript; charset=utf-8' }],
    ['/dashboard/app.css', { file: own('app.css'), type: 'text/css; charset=utf-8' }],
    ['/dashboard/uplot.min.js', { file: path.join(uplot, 'uPlot.iife.min.js'), type: 'text/javascript; charset=utf-8' }],
    ['/dashboard/uplot.min.css', { file: path.join(uplot, 'uPlot.min.css'), type: 'text/css; charset=utf-8' }],
  ]);
}

/**
 * What the browser may do with the page: its own scripts and styles only (no
 * inline script, nothing from elsewhere), requests to this origin only, no
 * form submission (the key never leaves in a form), no framing.
 */
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

export function dashboardRoutes(router: Router, logger: Logger): void {
  let files: Map<string, Asset> | undefined;
  // Read once, on first use: a few small files, kept for the gateway's life.
  const cache = new Map<string, Promise<Buffer>>();
  const serve = (route: string) => async (kctx: Koa.Context) => {
    // The page's relative links resolve from /dashboard, not /dashboard/ (which the router also matches).
    if (kctx.path.endsWith('/')) {
      kctx.status = 308;
      kctx.set('location', '../dashboard');
      return;
    }
    files ??= assets();
    const asset = files.get(route)!;
    let body = cache.get(route);
    if (!body) {
      body = readFile(asset.file);
      cache.set(route, body);
    }
    let data: Buffer;
    try {
      data = await body;
    } catch (err) {
      cache.delete(route);
      logger.error({ err: { message: (err as Error).message } }, 'dashboard: a file of the page could not be read');
      throw new GatewayError(500, 'api_error', 'The dashboard is not installed with this gateway (a file of the page is missing: see the gateway log).', { code: 'dashboard_unavailable' });
    }
    kctx.set('content-type', asset.type);
    kctx.set('cache-control', 'no-cache');
    kctx.set('x-content-type-options', 'nosniff');
    kctx.set('referrer-policy', 'no-referrer');
    if (route === '/dashboard') {
      kctx.set('content-security-policy', CSP);
      kctx.set('x-frame-options', 'DENY');
    }
    kctx.body = data;
  };
  for (const route of ['/dashboard', '/dashboard/app.js', '/dashboard/app.css', '/dashboard/uplot.min.js', '/dashboard/uplot.min.css']) router.get(route, serve(route));
}
